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

// `roots`: the snapshot's root objects, for the variable source (nullptr: not used).
BlockTypes block_types(const snapshot::HeapSnapshot &s, const capture::StackTree &stacks, StackSymbolizer &sym,
                       const snapshot::RootObjects *roots = nullptr);

// "7Session" (as std::type_info::name() gives it) as a person writes it ("Session").
std::string class_name(const std::string &mangled_type_name);

// The type a pointer variable's declared type points to ("Cache *" -> "Cache"); "" when it is no
// pointer to a class or struct (void *, char *, int **, a function pointer).
std::string pointee_type(const std::string &declared);

}  // namespace heapsnap::replay
