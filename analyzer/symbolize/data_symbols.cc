#include "symbolize/data_symbols.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "symbolize/debug_file_locator.h"
#include "symbolize/demangle.h"
#include "symbolize/readable_name.h"

namespace heapsnap::symbolize {
namespace {

// Fewer is better: a sized symbol over an unsized alias, a name without leading underscores
// (environ over __environ), a global over a local one.
int symbol_rank(const GElf_Sym& sym, const char* name) {
  int underscores = 0;
  while (name[underscores] == '_' && underscores < 3) ++underscores;
  return (sym.st_size == 0 ? 8 : 0) + underscores * 2 + (GELF_ST_BIND(sym.st_info) == STB_LOCAL ? 1 : 0);
}

uint64_t debug_info_bytes(Dwarf* dw) {
  Elf* elf = dwarf_getelf(dw);
  size_t shstrndx = 0;
  if (elf == nullptr || elf_getshdrstrndx(elf, &shstrndx) != 0) return UINT64_MAX;
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf, scn)) != nullptr;) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr) continue;
    const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (name != nullptr && (strcmp(name, ".debug_info") == 0 || strcmp(name, ".zdebug_info") == 0)) return sh.sh_size;
  }
  return 0;
}

// Global and static variables of a module's DWARF: address -> declared type, file and line.
class DwarfVariables {
 public:
  struct Var {
    std::string type, file;
    uint32_t line = 0;
  };

  explicit DwarfVariables(Dwarf* dw) : dw_(dw) {}

  // The member layouts of the program's classes seen by read(), templates included (type_layouts.h).
  TypeLayouts layouts() {
    TypeLayouts out;
    for (const auto& [name, off] : classes_) {
      Dwarf_Die die, m;
      Dwarf_Word size = 0;
      if (dwarf_offdie(dw_, off, &die) == nullptr || dwarf_aggregate_size(&die, &size) != 0) continue;
      std::vector<TypeMember> members;
      if (dwarf_child(&die, &m) == 0) do {
          const int tag = dwarf_tag(&m);
          if (tag != DW_TAG_member && tag != DW_TAG_inheritance) continue;
          Dwarf_Attribute at;
          Dwarf_Word where = 0;
          if (dwarf_attr(&m, DW_AT_data_member_location, &at) != nullptr) {
            if (dwarf_formudata(&at, &where) != 0) continue;  // (a location expression: virtual bases)
          } else if (dwarf_tag(&die) != DW_TAG_union_type || dwarf_hasattr(&m, DW_AT_external)) {
            continue;  // a static member, or a bit field without a byte offset
          }
          TypeMember tm;
          tm.offset = where;
          if (tag == DW_TAG_member) {
            const char* n = dwarf_diename(&m);
            tm.name = n ? n : "(anonymous)";
          }
          Dwarf_Die t;
          if (dwarf_attr_integrate(&m, DW_AT_type, &at) != nullptr && dwarf_formref_die(&at, &t) != nullptr) {
            for (int i = 0; i < 8; ++i) {  // through typedefs and qualifiers to the type itself
              const int tt = dwarf_tag(&t);
              if (tt != DW_TAG_typedef && tt != DW_TAG_const_type && tt != DW_TAG_volatile_type) break;
              Dwarf_Attribute a2;
              if (dwarf_attr_integrate(&t, DW_AT_type, &a2) == nullptr || dwarf_formref_die(&a2, &t) == nullptr) break;
            }
            Dwarf_Word msize = 0;
            if (dwarf_aggregate_size(&t, &msize) == 0) tm.size = msize;
            const int tt = dwarf_tag(&t);
            if (tt == DW_TAG_structure_type || tt == DW_TAG_class_type || tt == DW_TAG_union_type) {
              auto it = names_.find(dwarf_dieoffset(&t));
              if (it != names_.end()) tm.type = layout_key(it->second);
            }
          }
          members.push_back(std::move(tm));
        } while (dwarf_siblingof(&m, &m) == 0);
      out.add(name, size, std::move(members));
    }
    return out;
  }

  std::unordered_map<uint64_t, Var> read() {
    std::vector<std::pair<uint64_t, Dwarf_Off>> found;  // (address, variable DIE)
    Dwarf_Off off = 0, next = 0;
    size_t header = 0;
    while (dwarf_nextcu(dw_, off, &next, &header, nullptr, nullptr, nullptr) == 0) {
      Dwarf_Die cu;
      if (dwarf_offdie(dw_, off + header, &cu) != nullptr) walk(cu, found);
      off = next;
    }
    std::unordered_map<uint64_t, Var> out;
    for (auto& [addr, die_off] : found) {
      Dwarf_Die die;
      if (dwarf_offdie(dw_, die_off, &die) == nullptr) continue;
      Var v;
      if (const char* f = dwarf_decl_file(&die)) v.file = f;
      int line = 0;
      if (dwarf_decl_line(&die, &line) == 0 && line > 0) v.line = uint32_t(line);
      Dwarf_Attribute at;
      Dwarf_Die type;
      if (dwarf_attr_integrate(&die, DW_AT_type, &at) != nullptr && dwarf_formref_die(&at, &type) != nullptr)
        v.type = readable_name(type_name(type, 0), 200);
      out.emplace(addr, std::move(v));
    }
    return out;
  }

 private:
  // Iterative walk of a unit's DIE tree: qualified names of the types it declares, and the
  // variables with a static address (DW_OP_addr), wherever they are declared (namespace scope,
  // class statics, function-local statics). `scope` only grows by appending below an item, and
  // the walk is depth first, so each item's prefix is scope[0, scope_len) when it is popped.
  void walk(Dwarf_Die& cu, std::vector<std::pair<uint64_t, Dwarf_Off>>& found) {
    struct Item {
      Dwarf_Die die;
      size_t scope_len;  // length of the scope prefix its children see
    };
    std::string scope;
    std::vector<Item> stack;
    Dwarf_Die child;
    if (dwarf_child(&cu, &child) == 0) stack.push_back({child, 0});
    while (!stack.empty()) {
      Item it = stack.back();
      stack.pop_back();
      Dwarf_Die sib;
      if (dwarf_siblingof(&it.die, &sib) == 0) stack.push_back({sib, it.scope_len});
      scope.resize(it.scope_len);
      const int tag = dwarf_tag(&it.die);
      size_t inner = it.scope_len;
      switch (tag) {
        case DW_TAG_namespace:
        case DW_TAG_structure_type:
        case DW_TAG_class_type:
        case DW_TAG_union_type:
        case DW_TAG_enumeration_type:
        case DW_TAG_typedef:
        case DW_TAG_base_type: {
          const char* n = dwarf_diename(&it.die);
          std::string q = scope + (n ? n : tag == DW_TAG_namespace ? "(anonymous namespace)" : "(anonymous)");
          if (tag != DW_TAG_namespace) names_.emplace(dwarf_dieoffset(&it.die), q);
          // A class's layout, once per name: the program's own (templates too), not a declaration.
          if ((tag == DW_TAG_structure_type || tag == DW_TAG_class_type || tag == DW_TAG_union_type) && n &&
              !dwarf_hasattr(&it.die, DW_AT_declaration) && dwarf_hasattr(&it.die, DW_AT_byte_size)) {
            std::string key = layout_key(q);
            if (!key.empty() && class_names_.insert(key).second) classes_.emplace_back(std::move(key), dwarf_dieoffset(&it.die));
          }
          if (tag != DW_TAG_typedef && tag != DW_TAG_base_type) {
            scope = q + "::";
            inner = scope.size();
          }
          break;
        }
        case DW_TAG_variable: {
          Dwarf_Attribute at;
          Dwarf_Op* ops = nullptr;
          size_t nops = 0;
          if (dwarf_attr(&it.die, DW_AT_location, &at) != nullptr && dwarf_getlocation(&at, &ops, &nops) == 0 &&
              nops == 1 && ops[0].atom == DW_OP_addr)
            found.push_back({ops[0].number, dwarf_dieoffset(&it.die)});
          break;
        }
        case DW_TAG_subprogram:
        case DW_TAG_lexical_block:
          break;
        default:
          continue;  // no variables or types of interest below (parameters, members, enumerators...)
      }
      if (dwarf_haschildren(&it.die) > 0 && dwarf_child(&it.die, &child) == 0) {
        scope.resize(inner);
        stack.push_back({child, inner});  // popped next: scope[0, inner) is still its prefix
      }
    }
  }

  // The name a class's layout is found by: the one BlockTyper gives its objects. A template's
  // DWARF name spells its arguments out ("Holder<std::__cxx11::basic_string<char, ...> >"), so it
  // is made readable as types are ("Holder<std::string>"). The standard library's own templates
  // are left out ("" : container_field knows their nodes and buffers; a program instantiates
  // hundreds of them).
  static std::string layout_key(const std::string& q) {
    if (q.find('<') == std::string::npos) return q;
    for (const char* lib : {"std::", "__gnu_cxx::", "__cxxabiv1::", "__gnu_debug::"})
      if (q.rfind(lib, 0) == 0) return "";
    return readable_name(q, 400);
  }

  std::string type_name(Dwarf_Die& die, int depth) {
    if (depth > 16) return "...";
    const int tag = dwarf_tag(&die);
    auto inner = [&](const char* none) -> std::string {
      Dwarf_Attribute at;
      Dwarf_Die t;
      if (dwarf_attr_integrate(&die, DW_AT_type, &at) != nullptr && dwarf_formref_die(&at, &t) != nullptr)
        return type_name(t, depth + 1);
      return none;
    };
    auto inner_tag = [&]() {
      Dwarf_Attribute at;
      Dwarf_Die t;
      if (dwarf_attr_integrate(&die, DW_AT_type, &at) != nullptr && dwarf_formref_die(&at, &t) != nullptr)
        return dwarf_tag(&t);
      return 0;
    };
    switch (tag) {
      case DW_TAG_pointer_type: return inner("void") + " *";
      case DW_TAG_reference_type: return inner("void") + " &";
      case DW_TAG_rvalue_reference_type: return inner("void") + " &&";
      case DW_TAG_const_type:
        return inner_tag() == DW_TAG_pointer_type ? inner("void") + " const" : "const " + inner("void");
      case DW_TAG_volatile_type:
        return inner_tag() == DW_TAG_pointer_type ? inner("void") + " volatile" : "volatile " + inner("void");
      case DW_TAG_array_type: {
        std::string dims;
        Dwarf_Die sub;
        if (dwarf_child(&die, &sub) == 0) do {
            if (dwarf_tag(&sub) != DW_TAG_subrange_type) continue;
            Dwarf_Attribute at;
            Dwarf_Word n = 0;
            if (dwarf_attr(&sub, DW_AT_count, &at) && dwarf_formudata(&at, &n) == 0)
              dims += "[" + std::to_string(n) + "]";
            else if (dwarf_attr(&sub, DW_AT_upper_bound, &at) && dwarf_formudata(&at, &n) == 0)
              dims += "[" + std::to_string(n + 1) + "]";
            else
              dims += "[]";
          } while (dwarf_siblingof(&sub, &sub) == 0);
        return inner("?") + dims;
      }
      case DW_TAG_subroutine_type: return "function";
      case DW_TAG_ptr_to_member_type: return "member pointer";
      default: {
        auto it = names_.find(dwarf_dieoffset(&die));
        if (it != names_.end()) return it->second;
        const char* n = dwarf_diename(&die);
        return n ? n : "?";
      }
    }
  }

  Dwarf* dw_;
  std::unordered_map<Dwarf_Off, std::string> names_;  // qualified names of the types seen
  std::unordered_set<std::string> class_names_;       // the classes whose layouts are kept (by name)
  std::vector<std::pair<std::string, Dwarf_Off>> classes_;
};

}  // namespace

DataSymbols::DataSymbols(const std::string& path, const std::string& expected_build_id, const DataSymbolsOptions& opts) {
  DebugFileLocator locator(opts.debug_dirs, false);
  DebugFileLocator::ModuleContext ctx;
  ctx.locator = &locator;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error_ = path + ": " + std::strerror(errno);
    return;
  }
  Dwfl* dwfl = dwfl_begin(locator.callbacks());
  if (dwfl == nullptr) {
    ::close(fd);
    error_ = dwfl_errmsg(-1);
    return;
  }
  dwfl_report_begin(dwfl);
  auto slash = path.rfind('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  Dwfl_Module* mod = dwfl_report_elf(dwfl, name.c_str(), path.c_str(), fd, 0, true);
  dwfl_report_end(dwfl, nullptr, nullptr);
  if (mod == nullptr) {
    ::close(fd);
    error_ = dwfl_errmsg(-1);
    dwfl_end(dwfl);
    return;
  }
  DebugFileLocator::attach(mod, &ctx);
  const unsigned char* bits = nullptr;
  GElf_Addr vaddr = 0;
  int nb = dwfl_module_build_id(mod, &bits, &vaddr);
  std::string id = nb > 0 ? std::string(reinterpret_cast<const char*>(bits), size_t(nb)) : std::string();
  if (!expected_build_id.empty() && !id.empty() && id != expected_build_id) {
    error_ = path + ": build-id differs from the recorded one";
    dwfl_end(dwfl);
    return;
  }
  struct Candidate {
    DataSymbol sym;
    int rank;
  };
  std::vector<Candidate> cands;
  int n = dwfl_module_getsymtab(mod);
  for (int i = 1; i < n; ++i) {
    GElf_Sym sym;
    GElf_Addr addr = 0;
    GElf_Word shndx = 0;
    const char* nm = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, nullptr, nullptr);
    if (nm == nullptr || nm[0] == '\0' || shndx == SHN_UNDEF || shndx == SHN_ABS) continue;
    if (GELF_ST_TYPE(sym.st_info) != STT_OBJECT) continue;
    DataSymbol d;
    d.addr = addr;
    d.size = sym.st_size;
    d.name = nm;  // demangled below, for the ones kept
    d.local = GELF_ST_BIND(sym.st_info) == STB_LOCAL;
    cands.push_back({std::move(d), symbol_rank(sym, nm)});
  }
  std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
    return a.sym.addr != b.sym.addr ? a.sym.addr < b.sym.addr : a.rank < b.rank;
  });
  for (auto& c : cands) {
    if (!syms_.empty() && syms_.back().addr == c.sym.addr) continue;
    // A sized symbol nested in the previous one's extent: the outer one names the bytes.
    if (!syms_.empty() && syms_.back().size && c.sym.addr < syms_.back().addr + syms_.back().size) continue;
    // Readable as sites are: "g_names[abi:cxx11]" is g_names, "std::__cxx11::..." is "std::...".
    c.sym.name = readable_name(demangle(c.sym.name.c_str()), 200);
    syms_.push_back(std::move(c.sym));
  }
  Dwarf_Addr bias = 0;
  Dwarf* dw = opts.max_dwarf_bytes && !syms_.empty() ? dwfl_module_getdwarf(mod, &bias) : nullptr;
  if (dw != nullptr && debug_info_bytes(dw) <= opts.max_dwarf_bytes) {
    dwarf_ = true;
    DwarfVariables dv(dw);
    auto vars = dv.read();
    layouts_ = dv.layouts();
    for (auto& s : syms_) {
      auto it = vars.find(s.addr - bias);
      if (it == vars.end()) continue;
      s.type = std::move(it->second.type);
      s.file = std::move(it->second.file);
      s.line = it->second.line;
    }
  }
  dwfl_end(dwfl);
}

DataSymbols::~DataSymbols() = default;

const DataSymbol* DataSymbols::find(uint64_t addr) const {
  auto it = std::upper_bound(syms_.begin(), syms_.end(), addr, [](uint64_t a, const DataSymbol& s) { return a < s.addr; });
  if (it == syms_.begin()) return nullptr;
  const DataSymbol& s = *(it - 1);
  if (s.size ? addr - s.addr < s.size : addr == s.addr) return &s;
  return nullptr;
}

}  // namespace heapsnap::symbolize
