#include "symbolize/elf_symbols.h"

#include <gelf.h>

#include <algorithm>

#include "symbolize/demangle.h"

namespace heapsnap::symbolize {
namespace {

int binding_rank(unsigned char info) {
  switch (GELF_ST_BIND(info)) {
    case STB_GLOBAL: return 0;
    case STB_WEAK: return 1;
    default: return 2;
  }
}

}  // namespace

void ElfSymbols::load(Dwfl_Module* mod) {
  loaded_ = true;
  int n = dwfl_module_getsymtab(mod);
  if (n <= 0) return;
  struct Candidate {
    Sym sym;
    int rank;
  };
  std::vector<Candidate> cands;
  cands.reserve(static_cast<size_t>(n));
  for (int i = 1; i < n; ++i) {
    GElf_Sym sym;
    GElf_Addr addr = 0;
    GElf_Word shndx = 0;
    const char* name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, nullptr, nullptr);
    if (name == nullptr || name[0] == '\0' || shndx == SHN_UNDEF || shndx == SHN_ABS) continue;
    int type = GELF_ST_TYPE(sym.st_info);
    if (type != STT_FUNC && type != STT_GNU_IFUNC) continue;
    // Prefer sized, then global, then weak over local aliases of the same address.
    int rank = (sym.st_size == 0 ? 4 : 0) + binding_rank(sym.st_info);
    cands.push_back({Sym{addr, sym.st_size, name, -1}, rank});
  }
  std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
    if (a.sym.addr != b.sym.addr) return a.sym.addr < b.sym.addr;
    return a.rank < b.rank;
  });
  syms_.reserve(cands.size());
  for (const auto& c : cands) {
    if (!syms_.empty() && syms_.back().addr == c.sym.addr) continue;
    syms_.push_back(c.sym);
  }
  syms_.shrink_to_fit();
}

const std::string* ElfSymbols::find(uint64_t addr, bool demangle_names) {
  auto it = std::upper_bound(syms_.begin(), syms_.end(), addr,
                             [](uint64_t a, const Sym& s) { return a < s.addr; });
  if (it == syms_.begin()) return nullptr;
  Sym& s = *(it - 1);
  if (s.size != 0 ? addr - s.addr >= s.size : it == syms_.end()) return nullptr;
  if (s.name_id < 0) {
    s.name_id = static_cast<int32_t>(names_.size());
    names_.push_back(demangle_names ? demangle(s.name) : std::string(s.name));
  }
  return &names_[static_cast<size_t>(s.name_id)];
}

}  // namespace heapsnap::symbolize
