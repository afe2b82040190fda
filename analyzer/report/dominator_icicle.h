// The dominator tree of a snapshot grouped by allocation site, as the report's icicle draws it:
// the super root's dominated objects grouped by site, then each group's dominated objects grouped
// by site, breadth first (a fresh small map per group), within a node budget. Groups a level
// leaves out merge into one "other" node under their parent.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "snapshot/heap_snapshot.h"
#include "snapshot/object_graph.h"

namespace heapsnap::report {

struct IcicleBudget {
  size_t max_nodes = 2000;     // nodes in the result, root and "other" nodes included
  int max_depth = 12;          // levels below the root
  size_t max_children = 24;    // groups shown under one parent (the rest merge into "other")
  double min_share = 1e-4;     // groups retaining less than this share of the total merge into "other"
};

struct SiteIcicle {
  std::vector<uint32_t> parent;    // node 0: everything reachable; parent[0] = 0
  std::vector<uint64_t> site;      // call-site address of the group (0 for the root and "other")
  std::vector<uint32_t> example;   // a block of the group (UINT32_MAX for the root and "other")
  std::vector<uint64_t> retained, objects, shallow;
  std::vector<bool> other;
  size_t nodes() const { return parent.size(); }
};

// `g` must have been built with its dominator-tree children.
SiteIcicle dominator_icicle(const snapshot::HeapSnapshot &s, const snapshot::ObjectGraph &g, const IcicleBudget &budget);

}  // namespace heapsnap::report
