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

// The same, with node v's shallow size given by shallow_of(v), called once per reachable node in
// increasing id order: no array of shallow sizes needs to exist (a snapshot's narrow size column
// is read directly).
template <class ShallowOf>
RetainedSizes compute_retained_with(const DominatorTree& tree, ShallowOf&& shallow_of);

namespace detail {
// Adds every reachable node's bytes and count into its idom's, children before parents.
void accumulate_retained(const DominatorTree& tree, RetainedSizes& r);
}  // namespace detail

template <class ShallowOf>
RetainedSizes compute_retained_with(const DominatorTree& tree, ShallowOf&& shallow_of) {
  const size_t num = tree.idom.size();
  const uint32_t root = tree.preorder.empty() ? kNoIdom : tree.preorder[0];
  RetainedSizes r;
  // Each node starts with its own size and count (0 for unreachable nodes, which retain
  // nothing), filled in one sequential pass.
  r.bytes.resize(num);
  r.count.resize(num);
  uint64_t* bytes = r.bytes.data();
  uint32_t* count = r.count.data();
  const uint32_t* idom = tree.idom.data();
  for (size_t v = 0; v < num; ++v) {
    const bool reachable = idom[v] != kNoIdom || v == root;
    bytes[v] = reachable ? uint64_t(shallow_of(uint32_t(v))) : 0;
    count[v] = reachable;
  }
  detail::accumulate_retained(tree, r);
  return r;
}

// Dominator-tree children as a CSR: successors(v) are the nodes v immediately dominates, in
// DFS preorder. For top-down (breadth-first) queries.
using DomChildren = CsrGraph;
DomChildren dominator_children(const DominatorTree& tree);

}  // namespace heapsnap::graph
