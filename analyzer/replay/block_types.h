// The type of each block of a heap snapshot, with how it was known (issue 29.2), from three
// sources in this order:
//   vtable    the class whose vtable the object's first word points into, read when the snapshot
//             was taken (a `Base *` from a factory is its Derived);
//   frames    what the allocation's frames name (replay/frame_types.h): its whole stack when it
//             was sampled, else its call site's inline chain;
//   variable  the pointee of the global or static pointer variable that holds it (`Cache *g_cache`
//             makes the block it points to a Cache), from the variable's DWARF type.
// Types are groups: 0 is "no type", then one per distinct name. Built once per query, in one
// pass over the blocks (a call site's type is worked out once).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "capture/stack_tree.h"
#include "replay/stack_symbolizer.h"
#include "snapshot/heap_snapshot.h"
#include "snapshot/root_objects.h"

namespace heapsnap::replay {

struct BlockTypes {
  std::vector<std::string> name{""};  // per group; group 0: no type
  std::vector<std::string> how{""};   // per group: "vtable", "frames", "variable", or several joined by ", "
  std::vector<uint32_t> group_of;     // per block

  uint32_t groups() const { return uint32_t(name.size()); }
  const std::string &type_of(uint32_t block) const { return name[group_of[block]]; }
  // The group of a type name, made on first use; `source` joins the group's sources.
  uint32_t group_named(const std::string &type, const char *source);
  size_t memory_bytes() const { return group_of.capacity() * 4; }

 private:
  std::unordered_map<std::string, uint32_t> by_name_;
};

// Types block by block, each worked out when first asked for (a query that labels twenty rows
// types twenty blocks, not ten million): a call site's or a stack's type once, the variables'
// pointees up front (one pass over the root words).
class BlockTyper {
 public:
  // `roots`: the snapshot's root objects, for the variable source (nullptr: not used). The
  // arguments must outlive the typer.
  BlockTyper(const snapshot::HeapSnapshot &s, const capture::StackTree &stacks, StackSymbolizer &sym,
             const snapshot::RootObjects *roots = nullptr);
  uint32_t group(uint32_t block);  // into types().name / how
  const std::string &type_of(uint32_t block) { return t_.name[group(block)]; }
  const std::string &how(uint32_t block) { return t_.how[group(block)]; }
  const std::vector<std::string> &all_names() const { return t_.name; }  // by group, so far
  // Every block's group (BlockTypes::group_of filled): for histograms and grouping.
  const BlockTypes &all();

 private:
  const snapshot::HeapSnapshot &s_;
  const capture::StackTree &stacks_;
  StackSymbolizer &sym_;
  BlockTypes t_;
  bool all_ = false;
  std::vector<uint32_t> vtable_group_;
  std::unordered_map<uint64_t, uint32_t> call_site_group_;
  std::unordered_map<uint32_t, uint32_t> stack_group_;
  std::unordered_map<uint32_t, uint32_t> variable_group_;  // block -> group, from pointer variables
};

// Every block's type at once (BlockTyper(...).all()).
BlockTypes block_types(const snapshot::HeapSnapshot &s, const capture::StackTree &stacks, StackSymbolizer &sym,
                       const snapshot::RootObjects *roots = nullptr);

// "7Session" (as std::type_info::name() gives it) as a person writes it ("Session").
std::string class_name(const std::string &mangled_type_name);

// The type a pointer variable's declared type points to ("Cache *" -> "Cache"); "" when it is no
// pointer to a class or struct (void *, char *, int **, a function pointer).
std::string pointee_type(const std::string &declared);

}  // namespace heapsnap::replay
