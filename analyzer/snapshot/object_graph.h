// The object graph of a snapshot and its dominator tree: node 0 is a super root pointing to
// every block a root range points to; node b + 1 is block b. Retained sizes in requested bytes.
#pragma once
#include <cstdint>
#include <vector>

#include "graph/csr_graph.h"
#include "graph/dominators.h"
#include "graph/retained.h"
#include "snapshot/heap_snapshot.h"

namespace heapsnap::snapshot {

struct GraphStats {
  double read_s = 0;  // load_snapshot's time (HeapSnapshot::load_s)
  double build_s = 0, dominators_s = 0, retained_s = 0;
  // graph: the CSR as built (before the dominators, which may consume it); dominators: the
  // computation's peak working set (with keep_csr off, the graph's arrays included); snapshot:
  // the snapshot's columns while the graph work ran.
  size_t graph_bytes = 0, dominator_bytes = 0, retained_bytes = 0, snapshot_bytes = 0;
  size_t target_bytes = 0;  // of graph_bytes, the edge targets'

  uint64_t nodes = 0, edges = 0, reachable = 0;
};

// Per node, the first root range (index into HeapSnapshot::roots) pointing at it directly, or
// UINT32_MAX. Only the few nodes a root points at have one, so they are listed rather than
// stored per node; root_range[node] reads like the per-node array.
class RootRanges {
 public:
  uint32_t operator[](uint32_t node) const;
  size_t size() const { return num_nodes_; }  // nodes
  size_t listed() const { return node_.size(); }
  size_t memory_bytes() const { return (node_.capacity() + range_.capacity()) * 4; }

 private:
  friend struct RootRangesBuilder;
  uint32_t num_nodes_ = 0;
  std::vector<uint32_t> node_, range_;  // by increasing node
};

struct ObjectGraph {
  graph::CsrGraph csr;  // with GraphOptions::keep_csr off, only csr.num_nodes is left
  graph::DominatorTree dom;
  graph::RetainedSizes retained;
  graph::DomChildren children;   // dominator-tree children (filled on demand: see build)
  RootRanges root_range;
  GraphStats stats;

  static uint32_t node_of(uint32_t block) { return block + 1; }
  static uint32_t block_of(uint32_t node) { return node - 1; }
  uint64_t total_bytes() const { return retained.bytes.empty() ? 0 : retained.bytes[0]; }
};

struct GraphOptions {
  bool follow_interior = true;
  bool with_children = false;  // fill ObjectGraph::children
  // The snapshot's edge arrays become the graph's (taken over, not copied) and are gone from
  // the snapshot afterwards. For queries that do not read s.edge_* (path does).
  bool release_edges = false;
  // Keep csr.offsets and csr.targets after the dominators (path, export and the report's paths
  // read them). Off: the dominator computation uses them as working space and frees them, for
  // the lowest peak on a 10^8-block snapshot; csr.num_nodes stays.
  bool keep_csr = true;
};

ObjectGraph build_object_graph(HeapSnapshot &s, const GraphOptions &options);
// The same with the options spelled out; the CSR is kept.
ObjectGraph build_object_graph(HeapSnapshot &s, bool follow_interior, bool with_children, bool release_edges = false);

// The node just below the super root on v's dominator chain (the top-level object holding v).
uint32_t top_dominator(const ObjectGraph &g, uint32_t node);

}  // namespace heapsnap::snapshot
