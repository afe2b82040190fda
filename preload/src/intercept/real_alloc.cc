#include "intercept/real_alloc.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <malloc.h>

#include <cstdio>
#include <cstring>

extern "C" {
void *__libc_malloc(size_t);
void __libc_free(void *);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void *__libc_memalign(size_t, size_t);
void *__libc_valloc(size_t);
void *__libc_pvalloc(size_t);
}

namespace hs::real {
namespace {

int bootstrap_posix_memalign(void **out, size_t align, size_t size) {
  // Same checks as glibc: a power of two multiple of sizeof(void*).
  if (align % sizeof(void *) != 0 || (align & (align - 1)) != 0 || align == 0) return 22;  // EINVAL
  void *p = __libc_memalign(align, size);
  if (!p) return 12;  // ENOMEM
  *out = p;
  return 0;
}

size_t bootstrap_usable_size(void *p) {
  // glibc's malloc_usable_size is shadowed by ours; find it the slow way the first time.
  static UsableSizeFn next = nullptr;
  if (!next) next = reinterpret_cast<UsableSizeFn>(dlsym(RTLD_NEXT, "malloc_usable_size"));
  return next ? next(p) : 0;
}

template <typename F>
void pick(F &slot, const char *name) {
  if (void *sym = dlsym(RTLD_NEXT, name)) slot = reinterpret_cast<F>(sym);
}

}  // namespace

Functions fn = {
    __libc_malloc, __libc_free,  __libc_calloc,  __libc_realloc,  __libc_memalign,
    bootstrap_posix_memalign, __libc_memalign, __libc_valloc, __libc_pvalloc, bootstrap_usable_size,
};

namespace {

// The number of symbols in a GNU hash table (the highest index any chain reaches, plus one).
size_t gnu_hash_symbols(const uint32_t *table) {
  uint32_t nbuckets = table[0], symoffset = table[1], bloom_size = table[2];
  const uint32_t *buckets = table + 4 + bloom_size * (sizeof(ElfW(Addr)) / 4);
  const uint32_t *chain = buckets + nbuckets;
  uint32_t last = 0;
  for (uint32_t b = 0; b < nbuckets; ++b)
    if (buckets[b] > last) last = buckets[b];
  if (last < symoffset) return symoffset;
  while (!(chain[last - symoffset] & 1)) ++last;
  return last + 1;
}

// Calls f(symbol) for each symbol of l's dynamic symbol table (the first, null one aside).
template <typename F>
void for_each_dynamic_symbol(const link_map *l, F f) {
  const ElfW(Sym) *symtab = nullptr;
  const char *strtab = nullptr;
  size_t count = 0;
  auto at = [l](ElfW(Addr) v) { return v < l->l_addr ? v + l->l_addr : v; };
  for (const ElfW(Dyn) *d = l->l_ld; d && d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_SYMTAB) symtab = reinterpret_cast<const ElfW(Sym) *>(at(d->d_un.d_ptr));
    else if (d->d_tag == DT_STRTAB) strtab = reinterpret_cast<const char *>(at(d->d_un.d_ptr));
    else if (d->d_tag == DT_HASH && !count) count = reinterpret_cast<const uint32_t *>(at(d->d_un.d_ptr))[1];
    else if (d->d_tag == DT_GNU_HASH) count = gnu_hash_symbols(reinterpret_cast<const uint32_t *>(at(d->d_un.d_ptr)));
  }
  if (!symtab || !strtab) return;
  for (size_t i = 1; i < count; ++i)
    if (f(symtab[i], strtab + symtab[i].st_name)) return;
}

// Whether the object of link map l defines `name` (a function, global or weak) in its dynamic
// symbol table. An executable's undefined entry with an address (its PLT stub, made the function's
// canonical address when the program takes it) is no definition: calls through it go on to the
// first object that defines the name.
bool defines(const link_map *l, const char *name) {
  bool found = false;
  for_each_dynamic_symbol(l, [&](const ElfW(Sym) &s, const char *sym) {
    if (s.st_shndx == SHN_UNDEF || (ELF64_ST_TYPE(s.st_info) != STT_FUNC && ELF64_ST_TYPE(s.st_info) != STT_GNU_IFUNC))
      return false;
    if (ELF64_ST_BIND(s.st_info) != STB_GLOBAL && ELF64_ST_BIND(s.st_info) != STB_WEAK) return false;
    return found = strcmp(sym, name) == 0;
  });
  return found;
}

// Allocation entry points of other allocators that bypass malloc and free (so the shim never sees
// what goes through them): jemalloc's *allocx family, tcmalloc's tc_*, mimalloc's mi_* and its
// C++ forms.
bool is_allocator_api(const char *s) {
  static const char *const kNames[] = {
      "mallocx", "rallocx", "xallocx", "sdallocx", "dallocx",
      "tc_malloc", "tc_free", "tc_calloc", "tc_realloc", "tc_new", "tc_delete", "tc_newarray", "tc_deletearray",
      "tc_memalign", "tc_posix_memalign", "tc_malloc_skip_new_handler",
      "mi_malloc", "mi_free", "mi_calloc", "mi_realloc", "mi_zalloc", "mi_new", "mi_new_n", "mi_reallocn",
      "mi_malloc_aligned", "mi_zalloc_aligned", "mi_realloc_aligned", "mi_heap_malloc", "mi_free_size"};
  for (const char *n : kNames)
    if (strcmp(s, n) == 0) return true;
  return false;
}

}  // namespace

bool shim_is_first(char *who, size_t n) {
  // The global lookup order: the executable, then the preloaded objects, then their needs, as the
  // link maps chain them from the executable's (the loader's r_debug: no call that allocates, which
  // would leave the program's heap other than it finds it natively).
  Dl_info mine;
  if (!dladdr(reinterpret_cast<void *>(&resolve_next), &mine)) return true;  // cannot tell: traced as usual
  for (link_map *l = _r_debug.r_map; l; l = l->l_next) {
    if (reinterpret_cast<void *>(l->l_addr) == mine.dli_fbase) return true;  // the shim comes first
    if (!defines(l, "malloc")) continue;
    const char *name = l->l_name && *l->l_name ? l->l_name : "the program itself";
    size_t len = strlen(name);
    if (len >= n) len = n - 1;
    memcpy(who, name, len);
    who[len] = '\0';
    return false;
  }
  return true;
}

bool direct_allocator_api(char *what, size_t n) {
  Dl_info mine;
  if (!dladdr(reinterpret_cast<void *>(&resolve_next), &mine)) return false;
  for (link_map *l = _r_debug.r_map; l; l = l->l_next) {
    if (reinterpret_cast<void *>(l->l_addr) == mine.dli_fbase) continue;
    const char *found = nullptr;
    for_each_dynamic_symbol(l, [&](const ElfW(Sym) &s, const char *sym) {
      if (s.st_shndx != SHN_UNDEF || !is_allocator_api(sym)) return false;
      found = sym;
      return true;
    });
    if (found) {
      snprintf(what, n, "%s (called by %s)", found, l->l_name && *l->l_name ? l->l_name : "the program");
      return true;
    }
  }
  return false;
}

void resolve_next() {
  Functions next = fn;
  pick(next.malloc, "malloc");
  pick(next.free, "free");
  pick(next.calloc, "calloc");
  pick(next.realloc, "realloc");
  pick(next.memalign, "memalign");
  pick(next.posix_memalign, "posix_memalign");
  pick(next.aligned_alloc, "aligned_alloc");
  pick(next.valloc, "valloc");
  pick(next.pvalloc, "pvalloc");
  pick(next.usable_size, "malloc_usable_size");
  fn = next;
}

}  // namespace hs::real
