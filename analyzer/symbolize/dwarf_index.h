// Address -> (line, chain of inlined subroutines) index over one module's DWARF.
//
// Unit address ranges are read once when the index is made. The first lookup in a unit walks
// that unit's DIE tree once and flattens its subprogram / inlined-subroutine ranges into sorted
// segments that each name the innermost scope; later lookups are two binary searches plus a walk
// up the parent links. (dwarf_getscopes re-walks the whole unit on every call.)
#pragma once

#include <elfutils/libdw.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "symbolize/symbolizer.h"

namespace heapsnap::symbolize {

class DwarfIndex {
 public:
  DwarfIndex(Dwarf* dw, bool demangle);
  DwarfIndex(const DwarfIndex&) = delete;
  DwarfIndex& operator=(const DwarfIndex&) = delete;

  // Fills `frames` (innermost first) for DWARF address `addr`. Returns false when no unit covers
  // the address or the unit has neither a line nor a function for it. The innermost frame's
  // file/line come from the line table, each outer frame's from the DW_AT_call_* attributes of
  // the inlined scope below it. A frame whose function is unknown has an empty name.
  bool lookup(uint64_t addr, std::vector<SourceFrame>& frames);

  size_t unit_count() const { return units_.size(); }

 private:
  struct Node {
    Dwarf_Off die;     // offset of the subprogram / inlined_subroutine DIE
    int32_t parent;    // enclosing node this one is inlined into; -1 for a subprogram
    uint32_t call_file, call_line, call_column;  // where this inlined scope was called from
    int32_t name;      // index into names_; -1 = not resolved yet, -2 = no name
    bool inlined;
  };
  struct Segment {
    uint64_t start;  // covers [start, next segment's start)
    int32_t node;    // innermost node, -1 for none
  };
  struct Unit {
    Dwarf_Die cudie;     // lines and file names (the skeleton for split DWARF)
    Dwarf_Die scopes;    // where subprograms live (the split unit's DIE for split DWARF)
    Dwarf* scopes_dw;    // Dwarf that `scopes` belongs to (a .dwo for split DWARF)
    bool built = false;
    std::vector<Node> nodes;
    std::vector<Segment> segments;
    const char* comp_dir = nullptr;  // DW_AT_comp_dir, read with the file table
    bool files_read = false;
    Dwarf_Files* files = nullptr;
    size_t nfiles = 0;
  };
  struct UnitRange {
    uint64_t lo, hi;
    uint32_t unit;
  };

  Unit* find_unit(uint64_t addr);
  void build(Unit& u);
  const std::string* node_name(const Unit& u, Node& n);
  std::string scope_prefix(Dwarf_Die* decl, int depth = 0);
  void read_files(Unit& u);
  std::string full_path(Unit& u, const char* src);

  Dwarf* dw_;
  bool demangle_;
  std::vector<Unit> units_;
  std::vector<UnitRange> ranges_;     // sorted by lo
  std::vector<uint64_t> max_hi_;      // max_hi_[i] = max(ranges_[0..i].hi)
  std::vector<std::string> names_;
  // Keyed by the declaration DIE the name came from: (its Dwarf, its offset). Several Dwarfs
  // occur: the dwz alt file, split-DWARF .dwo files.
  struct DeclKey {
    const Dwarf* dw;
    uint64_t off;
    bool operator==(const DeclKey&) const = default;
  };
  struct DeclKeyHash {
    size_t operator()(const DeclKey& k) const {
      return std::hash<uint64_t>()(k.off * 0x9E3779B97F4A7C15ull ^
                                   reinterpret_cast<uintptr_t>(k.dw));
    }
  };
  std::unordered_map<DeclKey, int32_t, DeclKeyHash> name_ids_;
};

}  // namespace heapsnap::symbolize
