// Retained sizes and top-down views of a dominator tree.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "graph/csr_graph.h"
#include "graph/dominators.h"

namespace heapsnap::graph {

// Per original node id. A node retains itself and everything it dominates. Unreachable nodes
// are not in the tree: they retain 0 bytes and 0 nodes and add nothing to anyone else.
struct RetainedSizes {
  std::vector<uint64_t> bytes;
  std::vector<uint32_t> count;
};

// shallow_size has one entry per node (tree.idom.size()); throws std::invalid_argument if not.
RetainedSizes compute_retained(const DominatorTree& tree, std::span<const uint64_t> shallow_size);

// Dominator-tree children as a CSR: successors(v) are the nodes v immediately dominates, in
// DFS preorder. For top-down (breadth-first) queries.
using DomChildren = CsrGraph;
DomChildren dominator_children(const DominatorTree& tree);

}  // namespace heapsnap::graph
