// Semi-NCA dominators (Georgiadis, Tarjan, Werneck: "Finding Dominators in Practice", 2006).
//
// Semi-NCA needs, per node w (numbered in DFS preorder, root = 0):
//   semi(w) = min over predecessors v of: v itself if v < w, else the smallest semi on the
//             DFS-tree path from v up to, not including, its first ancestor <= w;
//   idom(w) = nearest common ancestor, in the dominator tree built so far, of parent(w) and
//             semi(w): walk up from parent(w) while the candidate is > semi(w).
//
// The work is bound by cache misses, so the layout does the work:
//  * One DFS relabels reachable nodes into preorder; every later array is indexed by preorder,
//    so the main loops sweep them sequentially and never touch unreachable nodes.
//  * A predecessor v < w needs no forest lookup, so the DFS folds those edges into one number
//    per node; only back and cross edges (v > w) are stored as predecessor lists. (The
//    consuming variant stores them too, to hold less during its DFS: see below.)
//  * Arrays are freed, or their storage given a new job, as soon as a phase ends.
//  * Nothing recurses: the DFS stack is the parent chain itself, and path compression
//    reverses pointers in place instead of keeping a stack.
//  * Where the next random access is known early (edge targets of a node just entered, the
//    predecessors of the coming nodes), it is prefetched.
//
// Working set, for n reachable of N nodes, E edges, b stored predecessors and d the DFS's
// deepest level, counting the preorder list (4n) that becomes part of the result:
//  * compute_dominators (the graph, 4N + 4E, is only read): 4N + 16n + 4d bytes in the DFS,
//    4N + 16n + 4b while the back/cross predecessors are collected, 20n + 4b in the main loop,
//    4N + 12n at the end.
//  * compute_dominators_consuming (the graph's arrays are the working space): graph + 4N + 4n
//    + 8d in the DFS (the offsets become 8-byte node records, offset and preorder number); 4N + 4b + 4N + 4n once the kept edges are compacted (the rest of the
//    targets array is released); + 4n + 4b while they are grouped by target; then the graph
//    and pre[] go, and 20n + 4b in the main loop as above, less the predecessor lists behind the
//    sweep and the forest's entries ahead of it, which are made as it comes to them. b also
//    counts forward edges here.
//    On heap-like graphs (E = 2n, b = 0.95n, d = 0.34n) the peak is 24 bytes per node, graph
//    included, against 35 for the graph next to compute_dominators' working set.

#include "graph/dominators.h"

#include "graph/dominator_work.h"

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <stdexcept>

namespace heapsnap::graph {
namespace detail {

void add_late_edges(CsrGraph& g, const LateNode& late, const DfsView& dfs, bool counted, Work& w) {
  Lap t0;
  const std::vector<uint32_t> edges = late.edges(dfs);
  if (g.targets.size() + edges.size() > std::numeric_limits<uint32_t>::max())
    throw std::length_error("compute_dominators: the late node's edges make 2^32 edges or more");
  for (uint32_t t : edges)
    if (t >= g.num_nodes) throw std::invalid_argument("compute_dominators: a late edge's node id >= num_nodes");
  const size_t before = g.targets.capacity();
  g.targets.insert(g.targets.end(), edges.begin(), edges.end());
  if (!g.offsets.empty()) g.offsets[g.num_nodes] = static_cast<uint32_t>(g.targets.size());
  if (counted) {
    w.meter.add(g.targets.capacity() * 4);
    w.meter.sub(before * 4);
  }
  w.steps.late = t0.lap();
}
}  // namespace detail

namespace {

using namespace detail;

// The semidominator sweep prefetches a predecessor's forest entry this far ahead, its forest
// parent (the first step of eval's walk) at kStep1Ahead, once the entry has arrived, and the
// grandparent at kStep2Ahead. Measured at 10^8 nodes: a quarter off the sweep.
constexpr uint32_t kPredAhead = 32;
constexpr uint32_t kStep1Ahead = 20;
constexpr uint32_t kStep2Ahead = 10;
// The semidominator sweep makes the consuming variant's forest kForestChunk entries at a time,
// when it comes within kForestAhead nodes of the made ones, and gives back the predecessor
// lists' pages behind it every kPredsRelease entries (1 MiB).
constexpr uint32_t kForestChunk = 16384;
constexpr uint32_t kForestAhead = 64;
constexpr uint32_t kPredsRelease = 262144;

// Iterative DFS from root for compute_dominators. Assigns preorder numbers (pre, order) and
// leaves forest[w] = {parent, min(parent, forward predecessors)} and ends[w] = the number of
// back/cross predecessors of w (collect_predecessors stores them).
// With a late node, 'grow' is g itself, writable, for the late node's edges.
void depth_first(const CsrGraph& g, uint32_t root, Work& w, CsrGraph* grow, const LateNode* late) {
  const uint32_t num = g.num_nodes;
  const uint32_t* off = g.offsets.data();
  const uint32_t* tgt = g.targets.data();
  const uint32_t late_node = late ? late->node : kNone;

  w.pre = uninit<uint32_t>(num);
  uint32_t* pre = w.pre.get();
  std::fill_n(pre, num, kNone);
  w.order.reserve(num);
  // Sized for every node since the reachable count is not known yet; only n get touched.
  w.forest = uninit<Forest>(num);
  w.ends = uninit<uint32_t>(num);
  Forest* forest = w.forest.get();
  uint32_t* count = w.ends.get();
  // The DFS stack is the chain of forest[].anc (= DFS parent) links up from the current node.
  // Each node on it also needs its place in its edge list (cursor, by depth: only as many
  // entries get touched as the DFS goes deep) and the list's end. While a node is on the stack
  // no forward edge can reach it (forward edges go to higher, finished nodes), so its
  // forest[].best slot holds the end until it finishes; then best = parent.
  auto cursor = uninit<uint32_t>(num);
  uint32_t depth = 0, max_depth = 0;

  auto enter = [&](uint32_t v, uint32_t parent, uint32_t id) {
    pre[v] = id;
    w.order.push_back(v);
    forest[id] = {parent, off[v + 1]};
    count[id] = 0;
    prefetch_targets(off, tgt, pre, v);
  };

  enter(root, 0, 0);
  uint32_t n = 1;
  uint32_t cur = 0;
  uint32_t e = off[root];
  uint32_t e_end = off[root + 1];
  for (;;) {
    if (e < e_end) {
      const uint32_t t = tgt[e++];
      const uint32_t pt = pre[t];
      if (pt == kNone) {  // tree edge: descend
        cursor[depth++] = e;
        if (depth > max_depth) max_depth = depth;
        if (t == late_node) {  // its edges are made now; the graph's arrays may move
          add_late_edges(*grow, *late, DfsView::over(g, std::span<const uint32_t>(pre, num)), false, w);
          off = g.offsets.data();
          tgt = g.targets.data();
        }
        enter(t, cur, n);
        cur = n++;
        e = off[t];
        e_end = off[t + 1];
      } else if (pt > cur) {  // forward edge (or a repeated tree edge): v < w, fold it in
        if (cur < forest[pt].best) forest[pt].best = cur;
      } else if (pt < cur && pt != 0) {  // back or cross edge: will need eval, store it
        ++count[pt];
      }
      // pt == cur is a self-edge; predecessors of the root do not matter.
    } else {  // finished cur: back up
      const uint32_t up = forest[cur].anc;
      forest[cur].best = up;
      if (cur == 0) break;
      cur = up;
      e = cursor[--depth];
      e_end = forest[cur].best;
    }
  }
  w.num = num;
  w.n = n;
  // pre, order, forest, counts; the cursor goes on return.
  w.meter.add(size_t{num} * 4 + size_t{n} * (4 + sizeof(Forest) + 4) + size_t{max_depth} * 4);
  w.meter.sub(size_t{max_depth} * 4);
}

// The DFS tree parents must be kept apart from forest[].anc, which path compression is about
// to rewrite.
void copy_parents(Work& w) {
  w.parent = uninit<uint32_t>(w.n);
  w.meter.add(size_t{w.n} * 4);
  for (uint32_t v = 0; v < w.n; ++v) w.parent[v] = w.forest[v].anc;
}

// Stores each back/cross edge v -> t (v > t) in t's predecessor list. Walks the graph in its
// own order rather than preorder: offsets, targets and pre[] are then read sequentially and
// the targets' lookups are mostly near the source's. Afterwards t's list is
// preds[ends[t - 1] .. ends[t]) (ends[0] = 0: the root stores none).
void collect_predecessors(const CsrGraph& g, Work& w) {
  const uint32_t n = w.n;
  uint32_t* ends = w.ends.get();
  uint32_t total = 0;
  for (uint32_t t = 0; t < n; ++t) {
    const uint32_t c = ends[t];
    ends[t] = total;
    total += c;
  }
  w.num_preds = total;
  w.preds = uninit<uint32_t>(total);
  w.meter.add(size_t{total} * 4);

  const uint32_t* off = g.offsets.data();
  const uint32_t* tgt = g.targets.data();
  const uint32_t* pre = w.pre.get();
  uint32_t* preds = w.preds.get();
  const uint32_t num_edges = off[w.num];
  for (uint32_t o = 0; o < w.num; ++o) {
    const uint32_t v = pre[o];
    if (v == kNone) continue;
    for (uint32_t e = off[o], e_end = off[o + 1]; e < e_end; ++e) {
      if (e + kEdgeAhead < num_edges) {
        __builtin_prefetch(&pre[tgt[e + kEdgeAhead]]);
        const uint32_t next = pre[tgt[e + kEdgeAhead / 2]];
        if (next != kNone) __builtin_prefetch(&ends[next], 1);
      }
      const uint32_t t = pre[tgt[e]];
      if (t < v && t != 0) preds[ends[t]++] = v;
    }
  }

  // Original ids are not needed in this direction any more.
  w.pre.reset();
  w.meter.sub(size_t{w.num} * 4);
  copy_parents(w);
}

// Tarjan's eval for a node v > w (so v is linked): the smallest semi on the forest path from v
// up to, not including, its first ancestor <= w (nodes <= w are not linked yet). Compresses
// the path by reversing its pointers on the way up and repointing them on the way down, so
// long paths need no stack.
inline uint32_t eval(Forest* forest, uint32_t v, uint32_t w) {
  uint32_t up = forest[v].anc;
  if (up <= w) return forest[v].best;
  uint32_t x = v;
  uint32_t down = kNone;
  do {
    forest[x].anc = down;
    down = x;
    x = up;
    up = forest[x].anc;
  } while (up > w);
  // x is the topmost linked node; 'up' is the unlinked root of the path.
  uint32_t best = forest[x].best;
  while (down != kNone) {
    Forest& f = forest[down];
    const uint32_t next = f.anc;
    f.anc = up;
    if (best < f.best)
      f.best = best;
    else
      best = f.best;
    down = next;
  }
  return best;
}

// semi(w) for w = n-1 .. 1. Step w reads ends[w-1] and ends[w] and no later step reads
// ends[w], so semi(w) overwrites it in place. The lists are walked backwards, so the whole
// predecessor array is read in one descending sweep and can be prefetched from.
//
// The consuming variant's forest is made here, {parent, parent}, a chunk at a time just ahead of
// the sweep (only made entries are read, prefetches included), and the predecessor lists' pages
// behind the sweep are given back: made up front, the forest's 8 bytes a node came on top of the
// lists, and that was the peak of the whole computation (10^8 nodes: 3.83 GiB, 3.81 without).
void semidominators(Work& w) {
  Forest* forest = w.forest.get();
  uint32_t* ends = w.ends.get();
  uint32_t* preds = w.preds.get();
  const uint32_t* parent = w.parent.get();
  uint32_t made = w.forest_from;  // forest[made ..] are made
  uint32_t kept_preds = w.num_preds;  // preds[kept_preds ..] are given back
  for (uint32_t t = w.n - 1; t >= 1; --t) {
    if (t < made + kForestAhead) {
      const uint32_t from = t > kForestChunk ? t - kForestChunk : 0;
      for (uint32_t u = from; u < made; ++u) forest[u] = {parent[u], parent[u]};
      w.meter.add(size_t{made - from} * sizeof(Forest));
      made = from;
    }
    // min(parent, forward predecessors) from the DFS; the consuming variant has just the
    // parent here and its forward predecessors in the list.
    uint32_t semi = forest[t].best;
    const uint32_t begin = ends[t - 1];
    for (uint32_t i = ends[t]; i-- > begin;) {
      if (i >= kPredAhead) {
        __builtin_prefetch(&forest[preds[i - kPredAhead]]);
        const uint32_t p1 = preds[i - kStep1Ahead];
        if (p1 >= made) __builtin_prefetch(&forest[forest[p1].anc]);
        const uint32_t p2 = preds[i - kStep2Ahead];
        if (p2 >= made) {
          const uint32_t a2 = forest[p2].anc;
          if (a2 >= made) __builtin_prefetch(&forest[forest[a2].anc]);
        }
      }
      // A predecessor v < t (a forward edge, stored by the consuming variant only) is itself
      // the candidate; one after t needs eval.
      const uint32_t v = preds[i];
      const uint32_t c = v < t ? v : eval(forest, v, t);
      if (c < semi) semi = c;
    }
    ends[t] = semi;
    forest[t].best = semi;  // t is now linked to its parent (forest[t].anc)
    if (kept_preds - begin >= kPredsRelease) {  // the lists from t on are done
      release_pages(preds + begin, preds + kept_preds);
      w.meter.sub(size_t{kept_preds - begin} * 4);
      kept_preds = begin;
    }
  }
  w.forest.reset();
  w.meter.sub(size_t{w.n - made} * sizeof(Forest));
  w.preds.reset();
  w.meter.sub(size_t{kept_preds} * 4);
}

// idom(w) for w = 1 .. n-1 in increasing preorder, so every ancestor is final before it is
// used; written over semi(w), and translated back to original ids on the way.
void nearest_common_ancestors(Work& w, std::vector<uint32_t>& idom_out) {
  uint32_t* idom = w.ends.get();  // holds semi until overwritten
  const uint32_t* parent = w.parent.get();
  const uint32_t* order = w.order.data();
  for (uint32_t t = 1; t < w.n; ++t) {
    const uint32_t semi = idom[t];
    uint32_t x = parent[t];
    while (x > semi) x = idom[x];
    idom[t] = x;
    idom_out[order[t]] = order[x];
  }
  w.parent.reset();
  w.ends.reset();
}

void check_graph(const CsrGraph& g, uint32_t root) {
  if (root >= g.num_nodes) throw std::invalid_argument("compute_dominators: root out of range");
  if (g.offsets.size() != size_t{g.num_nodes} + 1 || g.offsets.back() != g.targets.size())
    throw std::invalid_argument("compute_dominators: inconsistent CSR arrays");
}

void check_late(const CsrGraph& g, uint32_t root, const LateNode* late) {
  if (!late) return;
  if (late->node != g.num_nodes - 1 || late->node == root)
    throw std::invalid_argument("compute_dominators: the late node is not the last node, or is the root");
  if (g.offsets[late->node] != g.offsets[late->node + 1])
    throw std::invalid_argument("compute_dominators: the late node has edges already");
  if (!late->edges) throw std::invalid_argument("compute_dominators: the late node has no edge maker");
}

DominatorTree finish(Work& w, Lap& t0) {
  semidominators(w);
  w.steps.semi = t0.lap();
  DominatorTree tree;
  tree.idom.assign(w.num, kNoIdom);
  w.meter.add(size_t{w.num} * 4);
  nearest_common_ancestors(w, tree.idom);

  tree.preorder = std::move(w.order);
  // Reserved for every node; give the slack back if many nodes were unreachable.
  if (tree.preorder.capacity() - tree.preorder.size() > tree.preorder.size() / 8)
    tree.preorder.shrink_to_fit();
  tree.work_peak_bytes = w.meter.peak();
  w.steps.idom = t0.lap();
  tree.steps = w.steps;
  return tree;
}

DominatorTree dominators_of(const CsrGraph& g, uint32_t root, CsrGraph* grow, const LateNode* late) {
  check_graph(g, root);
  check_late(g, root, late);
  Work w;
  Lap t0;
  depth_first(g, root, w, grow, late);
  w.steps.dfs = t0.lap();
  collect_predecessors(g, w);
  w.steps.preds = t0.lap();
  return finish(w, t0);
}

}  // namespace

DominatorTree compute_dominators(const CsrGraph& g, uint32_t root) { return dominators_of(g, root, nullptr, nullptr); }

DominatorTree compute_dominators(CsrGraph& g, uint32_t root, const LateNode& late) {
  return dominators_of(g, root, &g, &late);
}

DominatorTree compute_dominators_consuming(CsrGraph& g, uint32_t root, const LateNode* late) {
  check_graph(g, root);
  check_late(g, root, late);
  Work w;
  w.meter.add(bytes_used(g));
  Lap t0;
  depth_first_marking(g, root, w, late);
  w.steps.dfs = t0.lap();
  compact_marked_edges(g, w);
  distribute_marked_edges(g, w);
  w.steps.preds = t0.lap();
  return finish(w, t0);
}

size_t bytes_used(const DominatorTree& t) {
  return t.idom.capacity() * sizeof(uint32_t) + t.preorder.capacity() * sizeof(uint32_t);
}

}  // namespace heapsnap::graph
