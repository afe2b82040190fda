// Deterministic synthetic object graphs for tests and benchmarks. Same arguments, same graph,
// on every platform (own PRNG, no std distributions). Node 0 is the super root in all of them.
#pragma once

#include <cstdint>
#include <vector>

namespace heapsnap::graph {

struct SyntheticGraph {
  uint32_t num_nodes = 0;
  std::vector<uint32_t> from;  // edge i is from[i] -> to[i]
  std::vector<uint32_t> to;
  std::vector<uint64_t> shallow_size;  // per node; 0 for the super root
};

// About edges_per_node * n edges with uniformly random ends (so some nodes are unreachable,
// and there are cycles, self-edges and duplicates).
SyntheticGraph random_graph(uint32_t n, double edges_per_node, uint64_t seed);

// 0 -> 1 -> 2 -> ... -> n-1.
SyntheticGraph linked_list(uint32_t n, uint64_t seed);

// 0 -> 1, and i <-> i+1 for i >= 1.
SyntheticGraph doubly_linked_list(uint32_t n, uint64_t seed);

// Complete binary tree rooted at 0: i -> 2i+1, 2i+2.
SyntheticGraph binary_tree(uint32_t n, uint64_t seed);

// Shaped like a real heap, ~2 edges per node: nodes are allocated in runs that form lists and
// trees with mostly local edges (owner pointers, back pointers, nearby references), some
// pointers to a small pool of widely shared nodes, a few far references, a few hundred root
// edges from node 0, and about 1% of runs left unreferenced (leaked).
SyntheticGraph heap_like_graph(uint32_t n, uint64_t seed);

}  // namespace heapsnap::graph
