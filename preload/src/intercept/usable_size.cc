#include "intercept/usable_size.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>

#include "tables/shadow_map.h"

namespace hs::usable {

bool g_glibc_layout = false;
char g_allocator_path[256];

namespace {

// Whether the object whose link map is `map` is the executable (the first of the lookup order).
bool is_executable(const link_map *map) { return map == _r_debug.r_map; }

// Whether the next malloc is glibc's own. The check below reads the word before a block, which
// only glibc's layout makes safe: another allocator (a sanitizer's, jemalloc preloaded after
// heapsnap) may put a block at the start of a mapping, or flag the read as an overflow.
bool next_is_glibc() {
  Dl_info info;
  link_map *map = nullptr;
  if (!dladdr1(reinterpret_cast<void *>(real::fn.malloc), &info, reinterpret_cast<void **>(&map), RTLD_DL_LINKMAP) ||
      !info.dli_fname)
    return false;
  const char *base = strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  if (strncmp(base, "libc.so", 7) == 0) return true;
  // A shared library of its own (not the executable, whose data also holds the program's globals).
  // As /proc/self/maps names it: the file, symbolic links resolved (the loader keeps the name it
  // was given, libtcmalloc_minimal.so.4 for libtcmalloc_minimal.so.4.5.10).
  char real_path[PATH_MAX];
  if (!is_executable(map) && realpath(info.dli_fname, real_path) && strlen(real_path) < sizeof(g_allocator_path))
    strcpy(g_allocator_path, real_path);
  return false;
}

// Frees a probe block without moving glibc's dynamic mmap threshold. free() of an mmapped chunk
// larger than the threshold raises it to the chunk's size (and the trim threshold to twice that)
// for the whole process: freeing the 5 MB probe did so before the program's first malloc, so
// that under the tracer python's large blocks came from the heap instead of mmap, with more
// consolidation work and no mremap (python: 1.24x native wall time; 1.06x with the threshold
// pinned in both runs). realloc() shrinks an mmapped chunk in place (mremap) or moves it, and
// neither path touches the threshold; the one-page chunk left is below any threshold when freed.
// (Only called once next_is_glibc(): the header read is safe.)
void free_probe(void *p) {
  if (static_cast<const size_t *>(p)[-1] & 2) {  // 2 = IS_MMAPPED
    if (void *q = real::fn.realloc(p, 1)) p = q;
  }
  real::fn.free(p);
}

// Whether the next allocator's blocks are at least 8-byte aligned, as the byte shadow's 8-byte
// granule needs (no two blocks may start in one granule). Every allocator the shim was tried with
// is (jemalloc, tcmalloc and mimalloc put their smallest blocks 8 bytes apart); one that packs
// blocks closer cannot be traced and is refused by name (tracer.cc).
bool blocks_8_aligned() {
  void *held[32];
  bool ok = true;
  int n = 0;
  for (size_t size : {1, 2, 3, 4, 5, 7, 8}) {
    for (int k = 0; k < 4 && n < 32; ++k) {
      void *p = real::fn.malloc(size);
      if (!p) break;
      held[n++] = p;
      ok = ok && (reinterpret_cast<uintptr_t>(p) & 7) == 0;
    }
  }
  while (n) real::fn.free(held[--n]);
  return ok;
}

}  // namespace

bool g_blocks_aligned = true;

void init() {
  static const size_t sizes[] = {0, 1, 8, 24, 25, 40, 100, 1000, 4096, 70000, 300000, 5000000};
  if (!next_is_glibc()) {
    shadow::set_granule(3);
    g_blocks_aligned = blocks_8_aligned();
    return;
  }
  bool same = true;
  for (size_t n : sizes) {
    void *p = real::fn.malloc(n);
    if (!p) return;
    same = same && glibc_usable(p) == real::fn.usable_size(p);
    free_probe(p);
    void *q = real::fn.memalign(256, n);
    if (!q) return;
    same = same && glibc_usable(q) == real::fn.usable_size(q);
    free_probe(q);
  }
  g_glibc_layout = same;
  shadow::set_granule(same ? shadow::kGlibcGranuleShift : 3);
}

}  // namespace hs::usable
