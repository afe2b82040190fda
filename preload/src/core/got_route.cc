#include "core/got_route.h"

#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "core/common.h"
#include "core/own_mappings.h"

namespace hs::got_route {
namespace {

struct Context {
  const char *const *names;
  int patched;
};

bool wanted(const char *path, const char *const *names) {
  if (!path || !path[0]) return false;
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  for (const char *const *n = names; *n; ++n)
    if (strstr(base, *n)) return true;
  return false;
}

void *replacement(const char *sym) {
  if (strcmp(sym, "mmap") == 0 || strcmp(sym, "mmap64") == 0) return reinterpret_cast<void *>(&own_mappings::mmap_noted);
  if (strcmp(sym, "munmap") == 0) return reinterpret_cast<void *>(&own_mappings::munmap_noted);
  return nullptr;
}

// A dynamic entry's address: glibc's loader relocates them in place on x86-64; an object whose
// entries it left as offsets has them below its load address.
uint64_t dyn_ptr(const dl_phdr_info *info, uint64_t v) { return v < info->dlpi_addr ? v + info->dlpi_addr : v; }

// Writes the entry at slot; a slot in the RELRO segment (made read-only after relocation, with
// -z now every GOT entry is) is made writable for the write, then read-only again.
bool patch(uint64_t slot, void *to, uint64_t relro_lo, uint64_t relro_hi) {
  const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  const bool ro = slot >= relro_lo && slot < relro_hi;
  void *pg = reinterpret_cast<void *>(slot & ~(page - 1));
  if (ro && mprotect(pg, page, PROT_READ | PROT_WRITE) != 0) return false;
  __atomic_store_n(reinterpret_cast<void **>(slot), to, __ATOMIC_RELEASE);
  if (ro) mprotect(pg, page, PROT_READ);
  return true;
}

int visit(dl_phdr_info *info, size_t, void *arg) {
  auto &ctx = *static_cast<Context *>(arg);
  if (!wanted(info->dlpi_name, ctx.names)) return 0;
  const ElfW(Dyn) *dyn = nullptr;
  uint64_t relro_lo = 0, relro_hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_DYNAMIC) dyn = reinterpret_cast<const ElfW(Dyn) *>(info->dlpi_addr + ph.p_vaddr);
    if (ph.p_type == PT_GNU_RELRO) {
      // (As the loader protects it: whole pages, the last partial one left writable.)
      const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
      relro_lo = (info->dlpi_addr + ph.p_vaddr) & ~(page - 1);
      relro_hi = (info->dlpi_addr + ph.p_vaddr + ph.p_memsz) & ~(page - 1);
    }
  }
  if (!dyn) return 0;
  const ElfW(Sym) *symtab = nullptr;
  const char *strtab = nullptr;
  uint64_t strsz = 0;
  const ElfW(Rela) *tables[2] = {nullptr, nullptr};
  uint64_t sizes[2] = {0, 0};
  for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB: symtab = reinterpret_cast<const ElfW(Sym) *>(dyn_ptr(info, d->d_un.d_ptr)); break;
      case DT_STRTAB: strtab = reinterpret_cast<const char *>(dyn_ptr(info, d->d_un.d_ptr)); break;
      case DT_STRSZ: strsz = d->d_un.d_val; break;
      case DT_JMPREL: tables[0] = reinterpret_cast<const ElfW(Rela) *>(dyn_ptr(info, d->d_un.d_ptr)); break;
      case DT_PLTRELSZ: sizes[0] = d->d_un.d_val; break;
      case DT_RELA: tables[1] = reinterpret_cast<const ElfW(Rela) *>(dyn_ptr(info, d->d_un.d_ptr)); break;
      case DT_RELASZ: sizes[1] = d->d_un.d_val; break;
      default: break;
    }
  }
  if (!symtab || !strtab) return 0;
  for (int t = 0; t < 2; ++t) {
    if (!tables[t]) continue;
    for (size_t k = 0; k < sizes[t] / sizeof(ElfW(Rela)); ++k) {
      const ElfW(Rela) &r = tables[t][k];
      const uint32_t type = ELF64_R_TYPE(r.r_info);
      if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
      const ElfW(Sym) &s = symtab[ELF64_R_SYM(r.r_info)];
      if (s.st_name >= strsz) continue;
      void *to = replacement(strtab + s.st_name);
      if (to && patch(info->dlpi_addr + r.r_offset, to, relro_lo, relro_hi)) ++ctx.patched;
    }
  }
  return 0;
}

}  // namespace

int route_mmaps(const char *const *names) {
#if defined(__x86_64__)
  ErrnoSaver es;
  Context ctx{names, 0};
  dl_iterate_phdr(visit, &ctx);
  return ctx.patched;
#else
  (void)names;
  return 0;
#endif
}

}  // namespace hs::got_route
