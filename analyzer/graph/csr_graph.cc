#include "graph/csr_graph.h"

#include <limits>
#include <stdexcept>
#include <string>

namespace heapsnap::graph {

namespace {

// After the counting pass offsets[v + 1] holds v's degree; this turns them into start
// positions, so offsets[v] is v's first slot.
void counts_to_starts(std::vector<uint32_t>& offsets) {
  uint32_t sum = 0;
  for (uint32_t& o : offsets) {
    sum += o;
    o = sum;
  }
}

// The fill pass used offsets[v] as v's write cursor, which leaves it at v's end (= the start
// of v + 1). Shifting by one slot restores the starts without a separate cursor array.
void ends_to_starts(std::vector<uint32_t>& offsets) {
  for (size_t v = offsets.size() - 1; v > 0; --v) offsets[v] = offsets[v - 1];
  offsets[0] = 0;
}

}  // namespace

CsrGraph build_csr(uint32_t num_nodes, std::span<const uint32_t> from,
                   std::span<const uint32_t> to) {
  if (from.size() != to.size())
    throw std::invalid_argument("build_csr: from and to differ in length");
  if (from.size() > std::numeric_limits<uint32_t>::max())
    throw std::length_error("build_csr: more than 2^32-1 edges");

  CsrGraph g;
  g.num_nodes = num_nodes;
  g.offsets.assign(size_t{num_nodes} + 1, 0);
  // Pass 1: degrees, validating both ends here so the fill pass cannot write out of bounds.
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] >= num_nodes || to[i] >= num_nodes)
      throw std::invalid_argument("build_csr: edge " + std::to_string(i) +
                                  " has a node id >= num_nodes");
    ++g.offsets[size_t{from[i]} + 1];
  }
  counts_to_starts(g.offsets);

  // Pass 2: scatter targets; walking edges in input order keeps each node's list stable.
  g.targets.resize(from.size());
  for (size_t i = 0; i < from.size(); ++i) g.targets[g.offsets[from[i]]++] = to[i];
  ends_to_starts(g.offsets);
  return g;
}

CsrGraph reverse(const CsrGraph& g) {
  CsrGraph r;
  r.num_nodes = g.num_nodes;
  r.offsets.assign(size_t{g.num_nodes} + 1, 0);
  for (uint32_t t : g.targets) ++r.offsets[size_t{t} + 1];
  counts_to_starts(r.offsets);

  r.targets.resize(g.targets.size());
  for (uint32_t v = 0; v < g.num_nodes; ++v)
    for (uint32_t e = g.offsets[v]; e < g.offsets[v + 1]; ++e)
      r.targets[r.offsets[g.targets[e]]++] = v;
  ends_to_starts(r.offsets);
  return r;
}

size_t bytes_used(const CsrGraph& g) {
  return g.offsets.capacity() * sizeof(uint32_t) + g.targets.capacity() * sizeof(uint32_t);
}

}  // namespace heapsnap::graph
