// The working state the dominator computation's steps share (dominators.cc, the steps over a
// caller's graph and the rest; dominators_marking.cc, compute_dominators_consuming's steps over
// the graph's own arrays). Internal to the graph engine.
#pragma once

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "graph/csr_graph.h"
#include "graph/dominators.h"

namespace heapsnap::graph::detail {

constexpr uint32_t kNone = UINT32_MAX;

// How many of a newly entered node's edges get their target's lookups prefetched. Enough for
// typical objects; a node with a million pointers should not issue a million prefetches.
constexpr uint32_t kEdgePrefetch = 8;
// Prefetch distance, in edges, of the predecessor-collecting sweep. Its random lookups are
// prefetched in two stages: the target's preorder number this far ahead, and at half the
// distance (when that number has arrived) the target's counter.
constexpr uint32_t kEdgeAhead = 16;
// Every slot is written before it is read; skipping the zero-fill also leaves pages past the
// reachable count untouched, so they cost no memory.
template <class T>
std::unique_ptr<T[]> uninit(size_t n) {
  return std::make_unique_for_overwrite<T[]>(n);
}

// The link-eval forest. 'anc' is the (compressed) forest parent; 'best' is the smallest semi
// on the compressed path (Tarjan's label, stored as its semi since only that is compared).
// eval reads both for the same node at every step, so they share a cache line.
struct Forest {
  uint32_t anc;
  uint32_t best;
};

// The consuming variant's DFS keeps, per node, where its edge list starts and, until the DFS
// enters it, its first target; from then on its preorder number. Entering a node then takes one
// miss (this record) before the descent into its first successor can go on, where separate
// offsets[] and targets[] took two in a row (the targets' line could only be asked for once the
// offset had come); and the preorder numbers take no array of their own. The list of v ends at
// rec[v + 1].off.
struct NodeRec {
  uint32_t off;
  uint32_t x;
};
static_assert(sizeof(NodeRec) == 2 * sizeof(uint32_t));

// Accounts for the arrays alive at once, for DominatorTree::work_peak_bytes.
class Meter {
 public:
  void add(size_t bytes) { peak_ = std::max(peak_, cur_ += bytes); }
  void sub(size_t bytes) { cur_ -= bytes; }
  size_t peak() const { return peak_; }

 private:
  size_t cur_ = 0;
  size_t peak_ = 0;
};

struct Work {
  uint32_t num = 0;                   // all nodes
  uint32_t n = 0;                     // reachable nodes
  uint32_t num_preds = 0;             // stored predecessors
  std::vector<uint32_t> order;        // preorder -> original id; becomes the result
  std::unique_ptr<uint32_t[]> pre;    // original id -> preorder, kNone if unreachable
  std::unique_ptr<Forest[]> forest;   // per preorder number
  std::unique_ptr<uint32_t[]> ends;   // predecessor counts, then predecessor list ends, then
                                      // semi, then idom: one array, four jobs
  std::unique_ptr<uint32_t[]> preds;  // stored predecessors, grouped by target
  std::unique_ptr<uint32_t[]> parent; // DFS tree parent
  std::unique_ptr<NodeRec[]> rec;     // consuming variant: offsets and preorder numbers (NodeRec)
  std::vector<uint64_t> seen;         // consuming variant: a bit per node the DFS entered
  uint32_t forest_from = 0;           // forest[forest_from ..] are made; the rest is not yet
  Meter meter;
  DominatorSteps steps;
};

// Wall and thread CPU time since the last lap.
class Lap {
 public:
  StepTime lap() {
    const StepTime now = read();
    const StepTime d{now.wall_s - last_.wall_s, now.cpu_s - last_.cpu_s};
    last_ = now;
    return d;
  }

 private:
  static StepTime read() {
    timespec cpu{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
    return {std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(),
            double(cpu.tv_sec) + double(cpu.tv_nsec) * 1e-9};
  }
  StepTime last_ = read();
};

// The late node's edges, made now that the DFS enters it, go at the end of g's targets (its
// list is the last; g.offsets, unless the caller holds the offsets elsewhere, is updated).
// 'counted': the graph's arrays are part of the meter (consuming variant).
void add_late_edges(CsrGraph& g, const LateNode& late, const DfsView& dfs, bool counted, Work& w);

// Gives the physical pages wholly inside [begin, end) back to the kernel. The range stays
// allocated to its owner (and would read as zeros); for the dead tail of an array that is
// freed later as a whole, so that its pages do not count until then.
inline void release_pages(void* begin, void* end) {
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t b = (uintptr_t(begin) + page - 1) & ~(page - 1);
  const uintptr_t e = uintptr_t(end) & ~(page - 1);
  if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
}

template <class T>
inline void free_vector(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

// Prefetches what the DFS reads next about a node just entered: its targets' entries.
inline void prefetch_targets(const uint32_t* off, const uint32_t* tgt, const uint32_t* pre, uint32_t v) {
  const uint32_t first = off[v];
  const uint32_t last = first + std::min(off[v + 1] - first, kEdgePrefetch);
  for (uint32_t k = first; k < last; ++k) {
    __builtin_prefetch(&pre[tgt[k]]);
    __builtin_prefetch(&off[tgt[k]]);
  }
}

// compute_dominators_consuming's first steps (dominators_marking.cc).
void depth_first_marking(CsrGraph& g, uint32_t root, Work& w, const LateNode* late);
void compact_marked_edges(CsrGraph& g, Work& w);
void distribute_marked_edges(CsrGraph& g, Work& w);

}  // namespace heapsnap::graph::detail
