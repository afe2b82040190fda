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
  double build_s = 0, dominators_s = 0, retained_s = 0;
  size_t graph_bytes = 0, dominator_bytes = 0, retained_bytes = 0, snapshot_bytes = 0;
  uint64_t nodes = 0, edges = 0, reachable = 0;
};

struct ObjectGraph {
  graph::CsrGraph csr;
  graph::DominatorTree dom;
  graph::RetainedSizes retained;
  graph::DomChildren children;   // dominator-tree children (filled on demand: see build)
  std::vector<uint32_t> root_range;  // per node: a root range pointing at it directly, or UINT32_MAX
  GraphStats stats;

  static uint32_t node_of(uint32_t block) { return block + 1; }
  static uint32_t block_of(uint32_t node) { return node - 1; }
  uint64_t total_bytes() const { return retained.bytes.empty() ? 0 : retained.bytes[0]; }
};

// With release_edges, the snapshot's own edge arrays are freed once copied into the graph (the
// queries that need them, like path, keep them).
ObjectGraph build_object_graph(HeapSnapshot &s, bool follow_interior, bool with_children, bool release_edges = false);

// The node just below the super root on v's dominator chain (the top-level object holding v).
uint32_t top_dominator(const ObjectGraph &g, uint32_t node);

}  // namespace heapsnap::snapshot
