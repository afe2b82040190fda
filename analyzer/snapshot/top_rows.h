// The rows of "what retains the most", one per structure, as top-retainers and the report list
// them: nodes by retained bytes, a node left out when a row above it on its dominator chain is the
// same structure (a block of the same site: a std::map's nodes under its root node, a list under
// its head; or a variable whose direct children include one of that site: the map's nodes under
// g_sessions). A variable whose one child retains all it does is shown as that child (g_cache as
// the Cache it points to).
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "snapshot/object_graph.h"
#include "snapshot/root_objects.h"

namespace heapsnap::snapshot {

// The root objects' direct children in the dominator tree, and per root object the node that
// stands for it: the one child that retains all it retains (the object a pointer variable points
// to), else its own node.
struct RootChildren {
  std::vector<std::pair<uint32_t, uint32_t>> kids;  // (root object, node), in order
  std::vector<uint32_t> rep;                        // per root object
  void build(const ObjectGraph &g);                 // one sequential pass over the dominators
  uint32_t rep_of(const ObjectGraph &g, uint32_t v) const { return g.is_root(v) ? rep[g.root_object(v)] : v; }
  std::vector<uint32_t> kids_of(uint32_t root_object) const;
  // The (root object, node) pairs of one root object, without a copy (millions for a static list).
  std::span<const std::pair<uint32_t, uint32_t>> kid_pairs(uint32_t root_object) const;
};

struct TopRow {
  uint32_t node;
  uint32_t inside;  // index of the nearest listed row above it on its dominator chain, or UINT32_MAX
  uint64_t own;     // its retained bytes less those of the rows listed inside it
};

// site_id(block): the block's allocation site, as an id (equal ids, same site). Roots that stand
// for a child are left out (the child's row is theirs); so are the leak node and the blocks only
// it retains when leaks is false.
std::vector<TopRow> top_rows(const ObjectGraph &g, const RootObjects &roots, const RootChildren &rc,
                             const std::function<uint32_t(uint32_t block)> &site_id, size_t limit, bool leaks = true);

}  // namespace heapsnap::snapshot
