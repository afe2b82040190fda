// Retained sizes of groups of objects (all objects of a class, of an allocation site): each
// object counts once, through the topmost member of its group on its dominator chain, whose
// retained size covers the members nested below it. That is DevTools' "retained size" of a
// constructor and MAT's of a class: a std::map's nodes, each dominated by its parent node, add
// up to the map's size, not to the sum of every subtree.
#pragma once
#include <cstdint>
#include <vector>

#include "snapshot/heap_snapshot.h"
#include "snapshot/object_graph.h"

namespace heapsnap::snapshot {

struct GroupFigures {
  std::vector<uint64_t> retained;     // per group
  std::vector<uint64_t> shallow;      // the members' own bytes
  std::vector<uint64_t> count;        // members in the dominator tree
  std::vector<uint64_t> instances;    // members with no member of the group above them
  std::vector<uint32_t> first_block;  // a member (the first the walk met), UINT32_MAX if none
};

// group_of[b]: block b's group (< groups). The graph needs its dominator-tree children.
// Unreachable blocks belong to no dominator chain and are not counted, unless the graph has a
// leak node (GraphOptions::leak_clusters), under which they are.
GroupFigures retained_by_group(const ObjectGraph &g, const HeapSnapshot &s, const std::vector<uint32_t> &group_of,
                               size_t groups);

}  // namespace heapsnap::snapshot
