// The dominator tree of a snapshot grouped by allocation site, as the report's icicle draws it:
// the super root's dominated objects grouped by site, then each group's dominated objects grouped
// by site, breadth first (a fresh small map per group), within a node budget. Groups a level
// leaves out merge into one "other" node under their parent.
//
// A site is whatever key the caller gives each block: the report gives the block's program site
// (StackSymbolizer::site_id, as `heapsnap dominators` groups), so that every std::vector<int> of
// one program line is one group rather than the library's one allocate() for all of them. The
// grouping itself knows nothing of symbols.
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

constexpr uint32_t kNoSite = UINT32_MAX;

struct SiteIcicle {
  std::vector<uint32_t> parent;    // node 0: everything reachable; parent[0] = 0
  std::vector<uint32_t> site;      // the group's site key (kNoSite for the root and "other")
  std::vector<uint32_t> example;   // a block of the group (UINT32_MAX for the root and "other")
  std::vector<uint64_t> retained, objects, shallow;
  std::vector<bool> other;
  size_t nodes() const { return parent.size(); }
};

// `g` must have been built with its dominator-tree children. site_of[b]: block b's site key (a
// block past its end, or with kNoSite, is grouped under kNoSite).
SiteIcicle dominator_icicle(const snapshot::HeapSnapshot &s, const snapshot::ObjectGraph &g,
                            const std::vector<uint32_t> &site_of, const IcicleBudget &budget);

}  // namespace heapsnap::report
