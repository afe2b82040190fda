// Compact adjacency for heap object graphs: compressed sparse row with 32-bit node ids.
//
// Node 0 is by convention the super root: callers add edges 0 -> each root object, so the
// dominator computation has a single entry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace heapsnap::graph {

// Successors of v are targets[offsets[v] .. offsets[v + 1]). Edge counts are limited to 2^32 - 1
// so offsets stay 32-bit (4 bytes per node instead of 8).
struct CsrGraph {
  uint32_t num_nodes = 0;
  std::vector<uint32_t> offsets;  // num_nodes + 1 entries
  std::vector<uint32_t> targets;  // one entry per edge, grouped by source node

  std::span<const uint32_t> successors(uint32_t v) const {
    return {targets.data() + offsets[v], targets.data() + offsets[v + 1]};
  }
  uint32_t num_edges() const { return static_cast<uint32_t>(targets.size()); }
};

// Builds the CSR by a two-pass counting sort over parallel arrays (edge i is from[i] -> to[i]).
// Duplicate edges and self-edges are kept. Within a node, successors keep their input order.
// Throws std::invalid_argument if the spans differ in length or an id is >= num_nodes, and
// std::length_error if there are 2^32 edges or more.
CsrGraph build_csr(uint32_t num_nodes, std::span<const uint32_t> from,
                   std::span<const uint32_t> to);

// The same graph with every edge flipped (predecessor lists). Within a node, predecessors are
// in increasing id order.
CsrGraph reverse(const CsrGraph& g);

// Bytes held by the graph's arrays (what a caller prints as "bytes per node").
size_t bytes_used(const CsrGraph& g);

}  // namespace heapsnap::graph
