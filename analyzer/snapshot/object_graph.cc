#include "snapshot/object_graph.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "snapshot/reachability.h"
#include "snapshot/spare_capacity.h"

namespace heapsnap::snapshot {

struct RootRangesBuilder {
  // pairs: (node, root range) for every root edge followed, in any order.
  static RootRanges build(uint32_t num_nodes, std::vector<std::pair<uint32_t, uint32_t>> &pairs) {
    // By node, then range: the first of a node's pairs is its first range.
    std::sort(pairs.begin(), pairs.end());
    RootRanges r;
    r.num_nodes_ = num_nodes;
    for (size_t i = 0; i < pairs.size(); ++i)
      if (i == 0 || pairs[i].first != pairs[i - 1].first) {
        r.node_.push_back(pairs[i].first);
        r.range_.push_back(pairs[i].second);
      }
    return r;
  }
  static const std::vector<uint32_t> &nodes(const RootRanges &r) { return r.node_; }
};

uint32_t RootRanges::operator[](uint32_t node) const {
  auto it = std::lower_bound(node_.begin(), node_.end(), node);
  return it != node_.end() && *it == node ? range_[size_t(it - node_.begin())] : UINT32_MAX;
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

template <class T>
void free_vector(std::vector<T> &v) {
  std::vector<T>().swap(v);
}

// The CSR of the object graph, built over the snapshot's own edge layout: the blocks' offsets
// shift by one node and by the super root's edges (`front`), which go in front of the targets;
// targets become node ids (block + 1). The nodes after the blocks (root objects, the leak node)
// have their edges (`extra_off`, relative, and `extra_tgt`, node ids) after the blocks'.
// `off` and `tgt` hold a copy of (or are) s.edge_begin and s.edge_target. Edges `drop` marks (when
// not empty: a vector's spare capacity) are left out.
void to_object_csr(const HeapSnapshot &s, bool follow_interior, const std::vector<bool> &drop, const std::vector<uint32_t> &front,
                   const std::vector<uint32_t> &extra_off, const std::vector<uint32_t> &extra_tgt,
                   std::vector<uint32_t> &off, std::vector<uint32_t> &tgt, graph::CsrGraph &csr) {
  const uint32_t blocks = s.blocks();
  if (off.empty() && tgt.empty()) off.assign(size_t(blocks) + 1, 0);  // a snapshot without edge arrays
  if (off.size() != size_t(blocks) + 1 || off.back() != tgt.size())
    throw std::invalid_argument("object graph: inconsistent snapshot edge arrays");
  if (!follow_interior || !drop.empty()) {  // drop the interior edges (or the stale ones), in place
    uint32_t out = 0, begin = off[0];
    for (uint32_t b = 0; b < blocks; ++b) {
      const uint32_t end = off[b + 1];
      off[b] = out;
      for (uint32_t k = begin; k < end; ++k)
        if ((follow_interior || !s.edge_interior[k]) && (drop.empty() || !drop[k])) tgt[out++] = tgt[k];
      begin = end;
    }
    off[blocks] = out;
    tgt.resize(out);
  }
  const size_t e = tgt.size(), r = front.size(), x = extra_tgt.size();
  const size_t extra_nodes = extra_off.empty() ? 0 : extra_off.size() - 1;
  if (e + r + x > UINT32_MAX) throw std::length_error("object graph: 2^32 edges or more");
  tgt.resize(e + r + x);  // within the loader's reserve, usually: no copy
  for (size_t k = e; k-- > 0;) tgt[k + r] = ObjectGraph::node_of(tgt[k]);
  std::copy(front.begin(), front.end(), tgt.begin());
  std::copy(extra_tgt.begin(), extra_tgt.end(), tgt.begin() + long(e + r));
  off.resize(size_t(blocks) + 2 + extra_nodes);
  for (size_t b = blocks + 1; b-- > 0;) off[b + 1] = off[b] + uint32_t(r);
  off[0] = 0;
  for (size_t i = 1; i <= extra_nodes; ++i) off[blocks + 1 + i] = uint32_t(e + r) + extra_off[i];
  csr.num_nodes = uint32_t(blocks + 1 + extra_nodes);
  csr.offsets = std::move(off);
  csr.targets = std::move(tgt);
}

}  // namespace

ObjectGraph build_object_graph(HeapSnapshot &s, const GraphOptions &o) {
  ObjectGraph g;
  g.stats.read_s = s.load_s;
  auto t0 = std::chrono::steady_clock::now();
  const uint32_t blocks = s.blocks();
  g.num_blocks = blocks;
  const RootObjects *ro = o.roots;
  if (ro && ro->object_of_word.size() != s.root_target.size())
    throw std::invalid_argument("object graph: root objects of another snapshot");
  const uint32_t num_roots = ro ? uint32_t(ro->objects.size()) : 0;
  if (ro) {
    g.first_root = blocks + 1;
    g.num_roots = num_roots;
  }
  if (o.leak_clusters) g.leak_node = blocks + 1 + num_roots;
  const uint32_t n = blocks + 1 + num_roots + (o.leak_clusters ? 1 : 0);
  // Super root: each block a root range points at, once, in increasing order (or the root
  // objects and the leak node); root objects: the blocks their words point at.
  std::vector<uint32_t> front, extra_off, extra_tgt;
  {
    std::vector<std::pair<uint32_t, uint32_t>> pairs;
    std::vector<std::pair<uint32_t, uint32_t>> object_edges;  // (object, node)
    for (uint32_t r = 0; r < s.roots.size(); ++r) {
      const RootRange &rr = s.roots[r];
      for (uint32_t k = rr.first; k < rr.first + rr.count; ++k)
        if (o.follow_interior || !s.root_interior[k]) {
          pairs.push_back({ObjectGraph::node_of(s.root_target[k]), r});
          if (ro) object_edges.push_back({ro->object_of_word[k], ObjectGraph::node_of(s.root_target[k])});
        }
    }
    g.root_range = RootRangesBuilder::build(n, pairs);
    if (ro || o.leak_clusters) {
      for (uint32_t i = 0; i < num_roots; ++i) front.push_back(g.first_root + i);
      if (o.leak_clusters) front.push_back(g.leak_node);
      std::sort(object_edges.begin(), object_edges.end());
      object_edges.erase(std::unique(object_edges.begin(), object_edges.end()), object_edges.end());
      extra_off.assign(size_t(num_roots) + (o.leak_clusters ? 1 : 0) + 1, 0);
      extra_tgt.reserve(object_edges.size());
      for (auto [obj, node] : object_edges) {
        ++extra_off[size_t(obj) + 1];
        extra_tgt.push_back(node);
      }
      for (size_t i = 1; i < extra_off.size(); ++i) extra_off[i] += extra_off[i - 1];
    } else {
      front = RootRangesBuilder::nodes(g.root_range);
    }
  }
  SpareCapacity spare = spare_capacity_edges(s);
  g.stats.vector_headers = spare.triples;
  g.stats.vector_buffers = spare.buffers;
  g.stats.spare_edges = spare.dropped;
  if (o.release_edges) {
    to_object_csr(s, o.follow_interior, spare.drop, front, extra_off, extra_tgt, s.edge_begin, s.edge_target, g.csr);
    free_vector(s.edge_begin);
    free_vector(s.edge_target);
    free_vector(s.edge_offset);
    free_vector(s.edge_interior);
  } else {
    std::vector<uint32_t> off, tgt;
    off.reserve(size_t(blocks) + 2 + extra_off.size());
    off.assign(s.edge_begin.begin(), s.edge_begin.end());
    tgt.reserve(s.edge_target.size() + front.size() + extra_tgt.size());
    tgt.assign(s.edge_target.begin(), s.edge_target.end());
    to_object_csr(s, o.follow_interior, spare.drop, front, extra_off, extra_tgt, off, tgt, g.csr);
  }
  free_vector(spare.drop);
  free_vector(front);
  free_vector(extra_off);
  free_vector(extra_tgt);
  // The leak node is the last node and the super root's last successor: when the dominators'
  // DFS enters it, what it has reached is what the roots reach, and the leak cliques are made
  // from the rest (no reachability pass of its own). Its edges, the cliques' leaders, go at the
  // end of the targets.
  graph::LateNode late;
  if (o.leak_clusters) {
    late.node = g.leak_node;
    late.edges = [&g, blocks](const graph::DfsView &dfs) {
      LeakCliques lc = leak_cliques_unreached(dfs, 1, blocks);
      g.leaks.reserve(lc.leader.size());
      for (size_t i = 0; i < lc.leader.size(); ++i) g.leaks.push_back({lc.leader[i], bool(lc.cycle[i])});
      return std::move(lc.leader);
    };
  }
  g.stats.build_s = seconds_since(t0);
  g.stats.graph_bytes = graph::bytes_used(g.csr) + g.root_range.memory_bytes() + (ro ? ro->memory_bytes() : 0);
  g.stats.target_bytes = g.csr.targets.capacity() * 4;
  g.stats.edges = g.csr.num_edges();
  g.stats.snapshot_bytes = s.memory_bytes();

  t0 = std::chrono::steady_clock::now();
  const graph::LateNode *late_node = o.leak_clusters ? &late : nullptr;
  if (o.keep_csr)
    g.dom = late_node ? graph::compute_dominators(g.csr, 0, late) : graph::compute_dominators(g.csr, 0);
  else
    g.dom = graph::compute_dominators_consuming(g.csr, 0, late_node);
  g.stats.dominators_s = seconds_since(t0);
  g.stats.edges += g.leaks.size();
  g.stats.dominator_bytes = g.dom.work_peak_bytes;
  g.stats.dominator_steps = g.dom.steps;

  t0 = std::chrono::steady_clock::now();
  // Shallow sizes straight from the snapshot's column: node 0 (the super root) has none.
  g.retained = graph::compute_retained_with(g.dom, [&](uint32_t v) { return v && v <= blocks ? s.size[v - 1] : uint64_t(0); });
  if (o.with_children) g.children = graph::dominator_children(g.dom);
  g.stats.retained_s = seconds_since(t0);
  g.stats.retained_bytes = g.retained.bytes.capacity() * 8 + g.retained.count.capacity() * 4 +
                           (o.with_children ? graph::bytes_used(g.children) : 0);
  g.stats.nodes = n;
  g.stats.reachable = g.dom.preorder.size();
  return g;
}

ObjectGraph build_object_graph(HeapSnapshot &s, bool follow_interior, bool with_children, bool release_edges) {
  GraphOptions o;
  o.follow_interior = follow_interior;
  o.with_children = with_children;
  o.release_edges = release_edges;
  return build_object_graph(s, o);
}

bool ObjectGraph::unreachable(uint32_t v) const {
  return leak_node && is_block(v) && dom.reachable(v) && top_dominator(*this, v) == leak_node;
}

uint32_t top_dominator(const ObjectGraph &g, uint32_t node) {
  uint32_t v = node;
  while (g.dom.idom[v] != graph::kNoIdom && g.dom.idom[v] != 0) v = g.dom.idom[v];
  return v;
}

}  // namespace heapsnap::snapshot
