// Dominator tree of a heap object graph (semi-NCA, fully iterative).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "graph/csr_graph.h"

namespace heapsnap::graph {

inline constexpr uint32_t kNoIdom = UINT32_MAX;

// What a late node's maker may read while the DFS runs (LateNode): which nodes the DFS has
// entered, with their preorder numbers, and the edges of the nodes it has not (the consuming
// variant has rewritten the others'). A view over the DFS's own arrays, whatever their layout.
class DfsView {
 public:
  // Over a graph and a preorder array (kNoIdom: not reached), as compute_dominators keeps them.
  static DfsView over(const CsrGraph& g, std::span<const uint32_t> pre) {
    return DfsView(g.num_nodes, g.offsets.data(), 1, g.targets.data(), pre.data(), 1, nullptr);
  }
  // Over interleaved arrays (stride in uint32_t), with reached nodes told by a bitmap.
  DfsView(uint32_t num_nodes, const uint32_t* off, uint32_t off_stride, const uint32_t* tgt, const uint32_t* pre,
          uint32_t pre_stride, const uint64_t* seen)
      : num_(num_nodes), off_(off), off_stride_(off_stride), tgt_(tgt), pre_(pre), pre_stride_(pre_stride),
        seen_(seen) {}

  uint32_t num_nodes() const { return num_; }
  bool reached(uint32_t v) const {
    return seen_ ? (seen_[v >> 6] >> (v & 63)) & 1 : pre_[size_t{v} * pre_stride_] != UINT32_MAX;
  }
  // v's preorder number, or UINT32_MAX if the DFS has not entered v.
  uint32_t preorder(uint32_t v) const { return reached(v) ? pre_[size_t{v} * pre_stride_] : UINT32_MAX; }
  // v's successors; v must not be reached.
  std::span<const uint32_t> successors(uint32_t v) const {
    return {tgt_ + off_[size_t{v} * off_stride_], tgt_ + off_[size_t{v + 1} * off_stride_]};
  }

 private:
  uint32_t num_;
  const uint32_t* off_;
  uint32_t off_stride_;
  const uint32_t* tgt_;
  const uint32_t* pre_;
  uint32_t pre_stride_;
  const uint64_t* seen_;
};

// A node whose edges are made only when the DFS enters it, from what the DFS has reached by
// then: the leak node of snapshot/object_graph.h, last among the super root's successors, points
// at the leaders of what the roots do not reach. The DFS already knows what it reached, so no
// separate reachability pass over the graph is needed first. The node must be the graph's last
// one, have no edges yet, and not be the root.
struct LateNode {
  uint32_t node = UINT32_MAX;
  // Called once, on entering node, with what the DFS has reached by then. Returns node's
  // successors, which are appended to the graph's targets (the node's list is the last).
  std::function<std::vector<uint32_t>(const DfsView& dfs)> edges;
};

// Seconds spent in each step (for --stats and the benchmarks): wall time, and the CPU time of
// the calling thread (the steadier figure on a shared machine; the steps run on it alone).
struct StepTime {
  double wall_s = 0, cpu_s = 0;
};
struct DominatorSteps {
  StepTime dfs;    // the DFS (and the late node's edges, late, inside it)
  StepTime late;   // LateNode::edges
  StepTime preds;  // predecessor lists (the consuming variant: compacting and grouping edges)
  StepTime semi;   // semidominators
  StepTime idom;   // nearest common ancestors, and the result in original ids
};

struct DominatorTree {
  // Immediate dominator per original node id; kNoIdom for the root and for unreachable nodes.
  std::vector<uint32_t> idom;
  // Reachable nodes in DFS preorder (original ids); preorder[0] is the root. A node's idom
  // always comes before it, so sweeping this backwards visits children before parents.
  std::vector<uint32_t> preorder;
  // Peak bytes of the arrays compute_dominators held at once (working set and result, not the
  // input graph): what a caller reports as the engine's bytes per node. For
  // compute_dominators_consuming, the graph's own arrays count too while they are held.
  size_t work_peak_bytes = 0;
  DominatorSteps steps;

  bool reachable(uint32_t v) const {
    return idom[v] != kNoIdom || (!preorder.empty() && preorder[0] == v);
  }
};

// Throws std::invalid_argument if root >= g.num_nodes or the CSR arrays are inconsistent.
DominatorTree compute_dominators(const CsrGraph& g, uint32_t root = 0);
// The same with a late node (see LateNode), whose edges g gains. Throws std::invalid_argument
// also if late.node is not g's last node, has edges, or is the root.
DominatorTree compute_dominators(CsrGraph& g, uint32_t root, const LateNode& late);

// The same result, for a caller that does not need the graph afterwards: its arrays become
// the working space and are freed as soon as they are used up. On heap-like graphs the peak is
// about 24 bytes per node, graph included, against 35 for the graph plus compute_dominators'
// working set, and the graph is gone after the first half of the work. On return g.offsets and
// g.targets are empty; g.num_nodes is kept. Throws as compute_dominators does, before touching g.
DominatorTree compute_dominators_consuming(CsrGraph& g, uint32_t root = 0, const LateNode* late = nullptr);

// Bytes held by the result arrays.
size_t bytes_used(const DominatorTree& t);

}  // namespace heapsnap::graph
