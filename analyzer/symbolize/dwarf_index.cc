#include "symbolize/dwarf_index.h"

#include <dwarf.h>

#include <algorithm>

#include "symbolize/demangle.h"

namespace heapsnap::symbolize {
namespace {

// Linked code that the linker dropped (--gc-sections, COMDAT) keeps its DWARF with low_pc 0 or
// a tombstone (-1/-2); such ranges would overlap real code or each other.
bool usable_range(Dwarf_Addr lo, Dwarf_Addr hi) {
  return lo != 0 && hi > lo && lo < UINT64_MAX - 1;
}

template <typename F>
void for_each_range(Dwarf_Die* die, F&& f) {
  Dwarf_Addr base = 0, lo = 0, hi = 0;
  ptrdiff_t off = 0;
  while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
    if (usable_range(lo, hi)) f(lo, hi);
  }
}

uint32_t attr_udata(Dwarf_Die* die, unsigned int name) {
  Dwarf_Attribute attr;
  Dwarf_Word v = 0;
  if (dwarf_attr(die, name, &attr) == nullptr || dwarf_formudata(&attr, &v) != 0) return 0;
  return v > UINT32_MAX ? 0 : static_cast<uint32_t>(v);
}

// Tags whose children may hold code-bearing subprograms or inlined subroutines.
bool may_contain_code(int tag) {
  switch (tag) {
    case DW_TAG_subprogram:
    case DW_TAG_inlined_subroutine:
    case DW_TAG_lexical_block:
    case DW_TAG_try_block:
    case DW_TAG_catch_block:
    case DW_TAG_namespace:
    case DW_TAG_module:
    case DW_TAG_class_type:
    case DW_TAG_structure_type:
    case DW_TAG_union_type:
    case DW_TAG_interface_type:
    case DW_TAG_entry_point:
    case DW_TAG_with_stmt:
      return true;
    default:
      return false;
  }
}

// Follows DW_AT_abstract_origin / DW_AT_specification from `die` to the declaration it
// refines; true if it moved.
bool follow_to_declaration(Dwarf_Die* die) {
  bool moved = false;
  for (int hop = 0; hop < 8; ++hop) {
    Dwarf_Attribute attr;
    Dwarf_Die next;
    if ((dwarf_attr(die, DW_AT_abstract_origin, &attr) == nullptr &&
         dwarf_attr(die, DW_AT_specification, &attr) == nullptr) ||
        dwarf_formref_die(&attr, &next) == nullptr)
      break;
    *die = next;
    moved = true;
  }
  return moved;
}

}  // namespace

DwarfIndex::DwarfIndex(Dwarf* dw, bool demangle_names) : dw_(dw), demangle_(demangle_names) {
  Dwarf_CU* cu = nullptr;
  Dwarf_CU* next = nullptr;
  Dwarf_Half version = 0;
  uint8_t unit_type = 0;
  Dwarf_Die cudie, subdie;
  while (dwarf_get_units(dw_, cu, &next, &version, &unit_type, &cudie, &subdie) == 0) {
    cu = next;
    if (unit_type != DW_UT_compile && unit_type != DW_UT_partial && unit_type != DW_UT_skeleton)
      continue;
    auto index = static_cast<uint32_t>(units_.size());
    bool any = false;
    for_each_range(&cudie, [&](Dwarf_Addr lo, Dwarf_Addr hi) {
      ranges_.push_back({lo, hi, index});
      any = true;
    });
    if (!any) continue;
    units_.push_back(Unit{});
    Unit& u = units_.back();
    u.cudie = cudie;
    u.scopes = cudie;
    u.scopes_dw = dw_;
    // Split DWARF: libdw opens the .dwo (DW_AT_dwo_name) when it can; else lines only.
    if (unit_type == DW_UT_skeleton && subdie.addr != nullptr) {
      if (Dwarf* split = dwarf_cu_getdwarf(subdie.cu)) {
        u.scopes = subdie;
        u.scopes_dw = split;
      }
    }
  }
  std::sort(ranges_.begin(), ranges_.end(), [](const UnitRange& a, const UnitRange& b) {
    return a.lo != b.lo ? a.lo < b.lo : a.hi > b.hi;
  });
  max_hi_.resize(ranges_.size());
  uint64_t m = 0;
  for (size_t i = 0; i < ranges_.size(); ++i) max_hi_[i] = m = std::max(m, ranges_[i].hi);
}

DwarfIndex::Unit* DwarfIndex::find_unit(uint64_t addr) {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), addr,
                             [](uint64_t a, const UnitRange& r) { return a < r.lo; });
  // Ranges may overlap (rarely); walk back while some earlier range can still reach addr.
  for (size_t i = static_cast<size_t>(it - ranges_.begin()); i-- > 0 && max_hi_[i] > addr;) {
    if (addr < ranges_[i].hi) return &units_[ranges_[i].unit];
  }
  return nullptr;
}

void DwarfIndex::build(Unit& u) {
  u.built = true;
  struct Interval {
    uint64_t lo, hi;
    int32_t node;
    uint32_t depth;
  };
  std::vector<Interval> intervals;
  struct Item {
    Dwarf_Die die;
    int32_t parent;  // node that scopes found under this DIE are inlined into
    uint32_t depth;
  };
  std::vector<Item> stack;
  Dwarf_Die child;
  if (dwarf_child(&u.scopes, &child) == 0) stack.push_back({child, -1, 1});
  while (!stack.empty()) {
    Item it = stack.back();
    stack.pop_back();
    Dwarf_Die sibling;
    if (dwarf_siblingof(&it.die, &sibling) == 0) stack.push_back({sibling, it.parent, it.depth});
    int tag = dwarf_tag(&it.die);
    if (!may_contain_code(tag)) continue;
    int32_t scope = it.parent;
    if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
        tag == DW_TAG_entry_point) {
      bool inlined = tag == DW_TAG_inlined_subroutine;
      auto id = static_cast<int32_t>(u.nodes.size());
      bool any = false;
      for_each_range(&it.die, [&](Dwarf_Addr lo, Dwarf_Addr hi) {
        intervals.push_back({lo, hi, id, it.depth});
        any = true;
      });
      if (any) {
        Node n{};
        n.die = dwarf_dieoffset(&it.die);
        n.parent = inlined ? it.parent : -1;
        n.inlined = inlined && it.parent >= 0;
        if (inlined) {
          n.call_file = attr_udata(&it.die, DW_AT_call_file);
          n.call_line = attr_udata(&it.die, DW_AT_call_line);
          n.call_column = attr_udata(&it.die, DW_AT_call_column);
        }
        n.name = -1;
        u.nodes.push_back(n);
        scope = id;
      }
    }
    if (dwarf_haschildren(&it.die) > 0 && dwarf_child(&it.die, &child) == 0)
      stack.push_back({child, scope, it.depth + 1});
  }

  // Flatten properly nested intervals into segments naming the innermost node.
  std::sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) {
    if (a.lo != b.lo) return a.lo < b.lo;
    if (a.hi != b.hi) return a.hi > b.hi;
    if (a.depth != b.depth) return a.depth < b.depth;
    // Same range at the same depth (GNU as emits one subprogram per alias, e.g. quotactl and
    // __GI_quotactl): the one pushed last wins, so put the first DIE last.
    return a.node > b.node;
  });
  auto& segs = u.segments;
  auto emit = [&segs](uint64_t start, uint64_t end, int32_t node) {
    if (start >= end) return;
    if (!segs.empty() && segs.back().node == node) return;
    if (!segs.empty() && segs.back().start == start) {
      segs.back().node = node;
      return;
    }
    segs.push_back({start, node});
  };
  std::vector<const Interval*> open;
  uint64_t pos = 0;
  for (const Interval& iv : intervals) {
    while (!open.empty() && open.back()->hi <= iv.lo) {
      const Interval* top = open.back();
      open.pop_back();
      emit(pos, top->hi, top->node);
      pos = std::max(pos, top->hi);
    }
    emit(pos, iv.lo, open.empty() ? -1 : open.back()->node);
    pos = std::max(pos, iv.lo);
    open.push_back(&iv);
  }
  while (!open.empty()) {
    const Interval* top = open.back();
    open.pop_back();
    emit(pos, top->hi, top->node);
    pos = std::max(pos, top->hi);
  }
  if (!segs.empty() && segs.back().node != -1) segs.push_back({pos, -1});
  segs.shrink_to_fit();
  u.nodes.shrink_to_fit();
}

const std::string* DwarfIndex::node_name(const Unit& u, Node& n) {
  if (n.name != -1) return n.name >= 0 ? &names_[static_cast<size_t>(n.name)] : nullptr;
  n.name = -2;
  Dwarf_Die die;
  if (dwarf_offdie(u.scopes_dw, n.die, &die) == nullptr) return nullptr;
  // Follow DW_AT_abstract_origin / DW_AT_specification to the declaration, taking the first
  // linkage name and DW_AT_name met on the way.
  const char* linkage = nullptr;
  const char* plain = nullptr;
  Dwarf_Die decl = die;
  for (int hop = 0; hop < 8; ++hop) {
    Dwarf_Attribute attr;
    if (linkage == nullptr && (dwarf_attr(&decl, DW_AT_linkage_name, &attr) != nullptr ||
                               dwarf_attr(&decl, DW_AT_MIPS_linkage_name, &attr) != nullptr))
      linkage = dwarf_formstring(&attr);
    if (plain == nullptr && dwarf_attr(&decl, DW_AT_name, &attr) != nullptr)
      plain = dwarf_formstring(&attr);
    Dwarf_Die next;
    if ((dwarf_attr(&decl, DW_AT_abstract_origin, &attr) != nullptr ||
         dwarf_attr(&decl, DW_AT_specification, &attr) != nullptr) &&
        dwarf_formref_die(&attr, &next) != nullptr) {
      decl = next;
      continue;
    }
    break;
  }
  if (linkage == nullptr && plain == nullptr) return nullptr;
  DeclKey key{dwarf_cu_getdwarf(decl.cu), dwarf_dieoffset(&decl)};
  auto [it, inserted] = name_ids_.try_emplace(key, static_cast<int32_t>(names_.size()));
  if (inserted) {
    bool itanium = linkage != nullptr && linkage[0] == '_' && linkage[1] == 'Z';
    if (itanium)
      names_.push_back(demangle_ ? demangle(linkage) : std::string(linkage));
    else if (plain != nullptr)
      names_.push_back(scope_prefix(&decl) + plain);
    else
      names_.push_back(linkage);
  }
  n.name = it->second;
  return &names_[static_cast<size_t>(n.name)];
}

std::string DwarfIndex::scope_prefix(Dwarf_Die* decl, int depth) {
  // libdw has no parent links: descend from the unit DIE, at each level into the child whose
  // subtree holds the declaration, collecting namespace and class names. Once per name.
  Dwarf_Die parent;
  if (dwarf_diecu(decl, &parent, nullptr, nullptr) == nullptr) return {};
  const Dwarf_Off target = dwarf_dieoffset(decl);
  std::string prefix;
  bool in_function = false;
  Dwarf_Die child;
  size_t budget = 1u << 20;  // sibling steps; malformed DWARF must not loop forever
  while (dwarf_child(&parent, &child) == 0) {
    bool descended = false;
    for (Dwarf_Die cur = child; budget-- > 0;) {
      Dwarf_Off off = dwarf_dieoffset(&cur);
      if (off == target) return prefix;
      if (off > target) return {};
      Dwarf_Die next;
      bool more = dwarf_siblingof(&cur, &next) == 0;
      if (!more || target < dwarf_dieoffset(&next)) {
        const char* name = dwarf_diename(&cur);
        switch (dwarf_tag(&cur)) {
          case DW_TAG_namespace:
            prefix += name != nullptr ? name : "(anonymous namespace)";
            prefix += "::";
            break;
          case DW_TAG_class_type:
          case DW_TAG_structure_type:
          case DW_TAG_union_type:
          case DW_TAG_interface_type:
            // An unnamed class inside a function is (nearly always) a lambda's closure type.
            prefix += name != nullptr ? name : in_function ? "{lambda}" : "(anonymous class)";
            prefix += "::";
            break;
          case DW_TAG_subprogram:
            if (name != nullptr) {
              // An out-of-line definition sits outside its class/namespace: qualify it from
              // its declaration instead.
              Dwarf_Die fdecl = cur;
              if (follow_to_declaration(&fdecl) && depth < 4) prefix = scope_prefix(&fdecl, depth + 1);
              prefix += name;
              prefix += "::";
            }
            in_function = true;
            break;
          default:
            break;  // blocks: local entities keep the enclosing scope's prefix
        }
        parent = cur;
        descended = true;
        break;
      }
      cur = next;
    }
    if (!descended) break;
  }
  return {};
}

void DwarfIndex::read_files(Unit& u) {
  u.files_read = true;
  if (dwarf_getsrcfiles(&u.cudie, &u.files, &u.nfiles) != 0) {
    u.files = nullptr;
    u.nfiles = 0;
  }
  Dwarf_Attribute attr;
  if (dwarf_attr(&u.cudie, DW_AT_comp_dir, &attr) != nullptr) u.comp_dir = dwarf_formstring(&attr);
}

// libdw leaves names relative to the compilation directory as they are; join them to it so that
// the result names the file (as addr2line and llvm-symbolizer do).
std::string DwarfIndex::full_path(Unit& u, const char* src) {
  if (src == nullptr) return {};
  if (src[0] == '/') return src;
  if (!u.files_read) read_files(u);
  if (u.comp_dir == nullptr || u.comp_dir[0] == '\0') return src;
  std::string out = u.comp_dir;
  if (out.back() != '/') out += '/';
  out += src;
  return out;
}

bool DwarfIndex::lookup(uint64_t addr, std::vector<SourceFrame>& frames) {
  frames.clear();
  Unit* u = find_unit(addr);
  if (u == nullptr) return false;
  if (!u->built) build(*u);

  int32_t node = -1;
  auto seg = std::upper_bound(u->segments.begin(), u->segments.end(), addr,
                              [](uint64_t a, const Segment& s) { return a < s.start; });
  if (seg != u->segments.begin()) node = (seg - 1)->node;

  Dwarf_Line* line = dwarf_getsrc_die(&u->cudie, addr);
  if (node < 0 && line == nullptr) return false;

  SourceFrame inner;
  if (line != nullptr) {
    int lineno = 0, col = 0;
    dwarf_lineno(line, &lineno);
    dwarf_linecol(line, &col);
    inner.file = full_path(*u, dwarf_linesrc(line, nullptr, nullptr));
    inner.line = lineno > 0 ? static_cast<uint32_t>(lineno) : 0;
    inner.column = col > 0 ? static_cast<uint32_t>(col) : 0;
  }
  if (node >= 0) {
    Node& n = u->nodes[static_cast<size_t>(node)];
    if (const std::string* name = node_name(*u, n)) inner.function = *name;
    inner.inlined = n.inlined;
  }
  frames.push_back(std::move(inner));

  // Walk out through the scopes the innermost one is inlined into. Bounded by the node count so
  // that malformed parent links cannot loop.
  for (size_t guard = 0; node >= 0 && guard < u->nodes.size(); ++guard) {
    const Node& n = u->nodes[static_cast<size_t>(node)];
    if (!n.inlined || n.parent < 0) break;
    Node& p = u->nodes[static_cast<size_t>(n.parent)];
    SourceFrame outer;
    if (const std::string* name = node_name(*u, p)) outer.function = *name;
    if (!u->files_read) read_files(*u);
    if (u->files != nullptr && n.call_file < u->nfiles)
      outer.file = full_path(*u, dwarf_filesrc(u->files, n.call_file, nullptr, nullptr));
    outer.line = n.call_line;
    outer.column = n.call_column;
    outer.inlined = p.inlined;
    frames.push_back(std::move(outer));
    node = n.parent;
  }
  return true;
}

}  // namespace heapsnap::symbolize
