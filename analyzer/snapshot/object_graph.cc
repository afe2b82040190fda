#include "snapshot/object_graph.h"

#include <algorithm>
#include <chrono>

namespace heapsnap::snapshot {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

ObjectGraph build_object_graph(HeapSnapshot &s, bool follow_interior, bool with_children, bool release_edges) {
  ObjectGraph g;
  auto t0 = std::chrono::steady_clock::now();
  const uint32_t n = s.blocks() + 1;
  g.csr.num_nodes = n;
  g.csr.offsets.assign(size_t(n) + 1, 0);
  g.root_range.assign(n, UINT32_MAX);
  // Super root: each block a root range points at, once.
  std::vector<uint32_t> root_targets;
  for (uint32_t r = 0; r < s.roots.size(); ++r) {
    const RootRange &rr = s.roots[r];
    for (uint32_t k = rr.first; k < rr.first + rr.count; ++k) {
      if (s.root_interior[k] && !follow_interior) continue;
      uint32_t node = ObjectGraph::node_of(s.root_target[k]);
      if (g.root_range[node] == UINT32_MAX) {
        g.root_range[node] = r;
        root_targets.push_back(node);
      }
    }
  }
  std::sort(root_targets.begin(), root_targets.end());
  size_t edges = root_targets.size();
  for (uint32_t b = 0; b < s.blocks(); ++b) {
    g.csr.offsets[b + 1] = uint32_t(edges);
    for (uint64_t k = s.edge_begin[b]; k < s.edge_begin[b + 1]; ++k)
      if (follow_interior || !s.edge_interior[k]) ++edges;
  }
  g.csr.offsets[n] = uint32_t(edges);
  g.csr.targets.resize(edges);
  std::copy(root_targets.begin(), root_targets.end(), g.csr.targets.begin());
  size_t at = root_targets.size();
  for (uint32_t b = 0; b < s.blocks(); ++b)
    for (uint64_t k = s.edge_begin[b]; k < s.edge_begin[b + 1]; ++k)
      if (follow_interior || !s.edge_interior[k]) g.csr.targets[at++] = ObjectGraph::node_of(s.edge_target[k]);
  if (release_edges) {
    std::vector<uint64_t>().swap(s.edge_begin);
    std::vector<uint32_t>().swap(s.edge_target);
    std::vector<uint32_t>().swap(s.edge_offset);
    std::vector<bool>().swap(s.edge_interior);
  }
  g.stats.build_s = seconds_since(t0);
  g.stats.graph_bytes = graph::bytes_used(g.csr) + g.root_range.capacity() * 4;

  t0 = std::chrono::steady_clock::now();
  g.dom = graph::compute_dominators(g.csr, 0);
  g.stats.dominators_s = seconds_since(t0);
  g.stats.dominator_bytes = g.dom.work_peak_bytes;

  t0 = std::chrono::steady_clock::now();
  std::vector<uint64_t> shallow(n, 0);
  for (uint32_t b = 0; b < s.blocks(); ++b) shallow[b + 1] = s.size[b];
  g.retained = graph::compute_retained(g.dom, shallow);
  std::vector<uint64_t>().swap(shallow);
  if (with_children) g.children = graph::dominator_children(g.dom);
  g.stats.retained_s = seconds_since(t0);
  g.stats.retained_bytes = g.retained.bytes.capacity() * 8 + g.retained.count.capacity() * 4 +
                           (with_children ? graph::bytes_used(g.children) : 0);
  g.stats.snapshot_bytes = s.memory_bytes();
  g.stats.nodes = n;
  g.stats.edges = edges;
  g.stats.reachable = g.dom.preorder.size();
  return g;
}

uint32_t top_dominator(const ObjectGraph &g, uint32_t node) {
  uint32_t v = node;
  while (g.dom.idom[v] != graph::kNoIdom && g.dom.idom[v] != 0) v = g.dom.idom[v];
  return v;
}

}  // namespace heapsnap::snapshot
