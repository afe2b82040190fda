#include "usable_size.h"

#include <dlfcn.h>

#include <cstring>

namespace hs::usable {

bool g_glibc_layout = false;

namespace {

// Whether the next malloc is glibc's own. The check below reads the word before a block, which
// only glibc's layout makes safe: another allocator (a sanitizer's, jemalloc preloaded after
// heapsnap) may put a block at the start of a mapping, or flag the read as an overflow.
bool next_is_glibc() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void *>(real::fn.malloc), &info) || !info.dli_fname) return false;
  const char *base = strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  return strncmp(base, "libc.so", 7) == 0;
}

}  // namespace

void init() {
  static const size_t sizes[] = {0, 1, 8, 24, 25, 40, 100, 1000, 4096, 70000, 300000, 5000000};
  if (!next_is_glibc()) return;
  bool same = true;
  for (size_t n : sizes) {
    void *p = real::fn.malloc(n);
    if (!p) return;
    same = same && glibc_usable(p) == real::fn.usable_size(p);
    real::fn.free(p);
    void *q = real::fn.memalign(256, n);
    if (!q) return;
    same = same && glibc_usable(q) == real::fn.usable_size(q);
    real::fn.free(q);
  }
  g_glibc_layout = same;
}

}  // namespace hs::usable
