// compute_dominators_consuming's first steps: the DFS, the compaction of the edges it kept, and
// the predecessor lists made from them, all over the graph's own arrays (dominators.cc has the
// rest and the working set's accounting).
#include "graph/dominator_work.h"

namespace heapsnap::graph::detail {

// The DFS keeps only pre[] and the parents, and tells visited nodes by a bit each (a 12 MB
// bitmap stays in the cache where pre[], 400 MB at 10^8 nodes, made every edge a miss on the
// DFS's critical path). It marks tree edges kNone; then compaction looks up every other edge's
// target's preorder number in a sequential, prefetched sweep and keeps it (but for self-edges
// and edges into the root), so that forward edges are stored as predecessors like back and cross edges
// (semidominators takes v itself for a predecessor v < w) instead of being folded into
// forest[].best during the DFS. Then the kept edges are compacted, the rest of the targets
// array released, and the predecessor lists built from the compacted edges; the graph goes,
// and only then is order[] made and the forest allocated (semidominators makes its entries).

// Iterative DFS from root: pre[], parent[] (by preorder number), and the tree edges marked.
void depth_first_marking(CsrGraph& g, uint32_t root, Work& w, const LateNode* late) {
  const uint32_t num = g.num_nodes;
  const uint32_t* off = g.offsets.data();
  uint32_t* tgt = g.targets.data();
  const uint32_t late_node = late ? late->node : kNone;

  w.pre = uninit<uint32_t>(num);
  uint32_t* pre = w.pre.get();
  std::fill_n(pre, num, kNone);
  w.parent = uninit<uint32_t>(num);  // only n entries get touched
  uint32_t* parent = w.parent.get();
  std::vector<uint64_t> seen((size_t{num} + 63) / 64, 0);
  // The DFS stack is the chain of parent links up from the current node; each node on it also
  // needs its place in its edge list and the list's end, kept by depth (only as many entries
  // get touched as the DFS goes deep).
  struct Resume {
    uint32_t e, e_end;
  };
  auto stack = uninit<Resume>(num);
  uint32_t depth = 0, max_depth = 0;

  // Entering v: what the DFS reads next about v's first targets, their bits and edge lists.
  auto enter = [&](uint32_t v, uint32_t up, uint32_t id) {
    pre[v] = id;
    seen[v >> 6] |= uint64_t(1) << (v & 63);
    parent[id] = up;
    const uint32_t first = off[v];
    const uint32_t last = first + std::min(off[v + 1] - first, kEdgePrefetch);
    for (uint32_t k = first; k < last; ++k) {
      __builtin_prefetch(&seen[tgt[k] >> 6]);
      __builtin_prefetch(&off[tgt[k]]);
    }
  };

  enter(root, 0, 0);
  uint32_t n = 1;
  uint32_t cur = 0;
  uint32_t e = off[root];
  uint32_t e_end = off[root + 1];
  for (;;) {
    if (e < e_end) {
      const uint32_t t = tgt[e];
      if (!(seen[t >> 6] & (uint64_t(1) << (t & 63)))) {  // tree edge: descend
        tgt[e] = kNone;
        stack[depth++] = {e + 1, e_end};
        if (depth > max_depth) max_depth = depth;
        if (t == late_node) {  // its edges are made now; the graph's arrays may move
          add_late_edges(g, *late, pre, true, w);
          off = g.offsets.data();
          tgt = g.targets.data();
        }
        enter(t, cur, n);
        cur = n++;
        e = off[t];
        e_end = off[t + 1];
        continue;
      }
      ++e;  // any other edge: compact_marked_edges looks it up
    } else {  // finished cur: back up
      if (cur == 0) break;
      cur = parent[cur];
      --depth;
      e = stack[depth].e;
      e_end = stack[depth].e_end;
    }
  }
  w.num = num;
  w.n = n;
  // The bits' pages go back to the kernel before the vector goes: malloc may keep a freed block of
  // this size in its heap, resident, through the peak that comes later (10^8 nodes: 12.5 MB).
  release_pages(seen.data(), seen.data() + seen.size());
  // pre and parent stay; the stack and the bits go on return. The graph was counted by the caller.
  w.meter.add(size_t{num} * 4 + size_t{n} * 4 + size_t{max_depth} * sizeof(Resume) + seen.size() * 8);
  w.meter.sub(size_t{max_depth} * sizeof(Resume) + seen.size() * 8);
}

// Moves the kept edges of reachable sources, as their targets' preorder numbers, to the front
// of the targets array, in the graph's order, and rewrites the offsets to match, in place:
// source o's kept edges are then tgt[off[o] .. off[o + 1]). Kept: all but tree edges (kNone),
// self-edges and edges into the root. The rest of the array is released. Unreachable sources
// are skipped (their edges do not count). Every target of a reachable source is reachable.
void compact_marked_edges(CsrGraph& g, Work& w) {
  uint32_t* off = g.offsets.data();
  uint32_t* tgt = g.targets.data();
  const uint32_t* pre = w.pre.get();
  const uint32_t num_edges = off[w.num];
  uint32_t out = 0;
  uint32_t begin = off[0];
  for (uint32_t o = 0; o < w.num; ++o) {
    const uint32_t end = off[o + 1];
    off[o] = out;
    const uint32_t v = pre[o];
    if (v != kNone)
      for (uint32_t e = begin; e < end; ++e) {
        if (e + kEdgeAhead < num_edges && tgt[e + kEdgeAhead] != kNone) __builtin_prefetch(&pre[tgt[e + kEdgeAhead]]);
        const uint32_t t = tgt[e];
        if (t == kNone) continue;  // a tree edge
        const uint32_t pt = pre[t];
        if (pt != v && pt != 0) tgt[out++] = pt;
      }
    begin = end;
  }
  off[w.num] = out;
  w.num_preds = out;
  release_pages(tgt + out, tgt + g.targets.capacity());
  w.meter.sub((g.targets.capacity() - out) * 4);
}

// Counts each target's predecessors, then stores them grouped by target: t's list is
// preds[ends[t - 1] .. ends[t]), sources in the graph's order (back and cross edges in the
// same order as collect_predecessors). Frees the graph, makes order[] from pre[] (the inverse
// permutation) and frees pre[], and sets up the forest: {parent, parent} for every node.
void distribute_marked_edges(CsrGraph& g, Work& w) {
  const uint32_t n = w.n, b = w.num_preds;
  const uint32_t* off = g.offsets.data();
  const uint32_t* tgt = g.targets.data();
  w.ends = uninit<uint32_t>(n);
  w.meter.add(size_t{n} * 4);
  uint32_t* ends = w.ends.get();
  std::fill_n(ends, n, 0);
  for (uint32_t j = 0; j < b; ++j) {
    if (j + kEdgeAhead < b) __builtin_prefetch(&ends[tgt[j + kEdgeAhead]], 1);
    ++ends[tgt[j]];
  }
  uint32_t total = 0;
  for (uint32_t t = 0; t < n; ++t) {
    const uint32_t c = ends[t];
    ends[t] = total;
    total += c;
  }

  w.preds = uninit<uint32_t>(b);
  w.meter.add(size_t{b} * 4);
  uint32_t* preds = w.preds.get();
  const uint32_t* pre = w.pre.get();
  uint32_t j = 0;
  for (uint32_t o = 0; o < w.num; ++o) {
    const uint32_t v = pre[o];  // kNone for unreachable sources, which have no entries left
    for (const uint32_t j_end = off[o + 1]; j < j_end; ++j) {
      if (j + kEdgeAhead < b) {
        __builtin_prefetch(&ends[tgt[j + kEdgeAhead]]);
        __builtin_prefetch(&preds[ends[tgt[j + kEdgeAhead / 2]]], 1);
      }
      preds[ends[tgt[j]]++] = v;
    }
  }
  w.meter.sub(g.offsets.capacity() * 4 + size_t{b} * 4);
  free_vector(g.offsets);
  free_vector(g.targets);

  w.order.resize(n);
  w.meter.add(size_t{n} * 4);
  uint32_t* order = w.order.data();
  for (uint32_t o = 0; o < w.num; ++o)
    if (pre[o] != kNone) order[pre[o]] = o;
  w.pre.reset();
  w.meter.sub(size_t{w.num} * 4);

  // The forest's entries, {parent, parent}, are made by semidominators as its sweep comes to
  // them (see there).
  w.forest = uninit<Forest>(n);
  w.forest_from = n;
}

}  // namespace heapsnap::graph::detail
