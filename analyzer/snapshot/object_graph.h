// The object graph of a snapshot and its dominator tree: node 0 is a super root; node b + 1 is
// block b. Retained sizes in requested bytes.
//
// Without root objects, the super root points to every block a root range points to. With them
// (GraphOptions::roots, snapshot/root_objects.h), each root object (a variable, a thread's stack
// or registers, the rest of a root range) is a node numbered after the blocks, blocks() + 1 + i
// for object i: the super root points to the root objects, and each root object to the blocks
// its words point to. A root object has no bytes of its own (its retained size is the heap it
// keeps alive alone). With GraphOptions::leak_clusters, one more node, the last, holds what no
// root reaches: it points to the leader of every leak clique (memcheck's "definitely lost"
// blocks, snapshot/reachability.h), so an unreachable cycle or structure is a subtree of the
// dominator tree with its retained size, like a reachable one.
#pragma once
#include <cstdint>
#include <vector>

#include "graph/csr_graph.h"
#include "graph/dominators.h"
#include "graph/retained.h"
#include "snapshot/heap_snapshot.h"
#include "snapshot/root_objects.h"

namespace heapsnap::snapshot {

struct GraphStats {
  double read_s = 0;  // load_snapshot's time (HeapSnapshot::load_s)
  double build_s = 0, dominators_s = 0, retained_s = 0;
  // graph: the CSR as built (before the dominators, which may consume it); dominators: the
  // computation's peak working set (with keep_csr off, the graph's arrays included); snapshot:
  // the snapshot's columns while the graph work ran.
  size_t graph_bytes = 0, dominator_bytes = 0, retained_bytes = 0, snapshot_bytes = 0;
  size_t target_bytes = 0;  // of graph_bytes, the edge targets'
  graph::DominatorSteps dominator_steps;  // the dominators' steps (the leak cliques among them)

  uint64_t nodes = 0, edges = 0, reachable = 0;
  // Vector-like headers in the snapshot, the buffers confirmed, and the edges from their spare
  // capacity left out (snapshot/spare_capacity.h).
  uint64_t vector_headers = 0, vector_buffers = 0, spare_edges = 0;
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

// A leak clique of the graph (GraphOptions::leak_clusters): its leader's node and whether a block
// of the clique points back at the leader (a cycle).
struct LeakCluster {
  uint32_t node;
  bool cycle;
};

struct ObjectGraph {
  graph::CsrGraph csr;  // with GraphOptions::keep_csr off, only csr.num_nodes is left
  graph::DominatorTree dom;
  graph::RetainedSizes retained;
  graph::DomChildren children;   // dominator-tree children (filled on demand: see build)
  RootRanges root_range;
  GraphStats stats;
  // Layout: blocks are nodes 1..num_blocks; root objects, when made, first_root ..
  // first_root + num_roots - 1; leak_node (0 when none) holds the leak cliques.
  uint32_t num_blocks = 0, first_root = 0, num_roots = 0, leak_node = 0;
  std::vector<LeakCluster> leaks;  // by leader address

  static uint32_t node_of(uint32_t block) { return block + 1; }
  static uint32_t block_of(uint32_t node) { return node - 1; }
  bool is_block(uint32_t v) const { return v >= 1 && v <= num_blocks; }
  bool is_root(uint32_t v) const { return num_roots && v >= first_root && v < first_root + num_roots; }
  uint32_t root_object(uint32_t v) const { return v - first_root; }  // is_root(v)
  uint32_t root_node(uint32_t object) const { return first_root + object; }
  // All bytes the tree holds: reachable ones, and with leak_clusters unreachable ones too.
  uint64_t total_bytes() const { return retained.bytes.empty() ? 0 : retained.bytes[0]; }
  uint64_t unreachable_bytes() const { return leak_node && dom.reachable(leak_node) ? retained.bytes[leak_node] : 0; }
  uint64_t reachable_bytes() const { return total_bytes() - unreachable_bytes(); }
  // Blocks node v retains (a root object or the leak node is no block itself).
  uint64_t retained_blocks(uint32_t v) const { return retained.count[v] - (is_block(v) ? 0 : 1); }
  bool unreachable(uint32_t v) const;  // a block in a leak clique's subtree (leak_clusters)
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
  // Root objects as nodes (see above); nullptr: the super root points at the blocks directly.
  const RootObjects *roots = nullptr;
  // The leak node and its cliques (see above); needs a pass over the graph before the dominators.
  bool leak_clusters = false;
};

ObjectGraph build_object_graph(HeapSnapshot &s, const GraphOptions &options);
// The same with the options spelled out; the CSR is kept.
ObjectGraph build_object_graph(HeapSnapshot &s, bool follow_interior, bool with_children, bool release_edges = false);

// The node just below the super root on v's dominator chain (the top-level object holding v).
uint32_t top_dominator(const ObjectGraph &g, uint32_t node);

}  // namespace heapsnap::snapshot
