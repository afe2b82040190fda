// compute_dominators_consuming's first steps: the DFS, the compaction of the edges it kept, and
// the predecessor lists made from them, all over the graph's own arrays (dominators.cc has the
// rest and the working set's accounting).
#include "graph/dominator_work.h"

namespace heapsnap::graph::detail {

// The DFS keeps the node records (NodeRec: offsets and preorder numbers in one array, built
// from the graph's offsets, which go) and the parents, and tells visited nodes by a bit each (a
// 12 MB bitmap stays in the cache where the preorder numbers, 400 MB at 10^8 nodes, made every
// edge a miss on the DFS's critical path). It marks tree edges kNone; then compaction looks up
// every other edge's target's preorder number in a sequential, prefetched sweep and keeps it (but
// for self-edges and edges into the root), so that forward edges are stored as predecessors like
// back and cross edges (semidominators takes v itself for a predecessor v < w) instead of being
// folded into forest[].best during the DFS. Then the kept edges are compacted, the rest of the
// targets array released, and the predecessor lists built from the compacted edges; the graph
// goes, and only then is order[] made and the forest allocated (semidominators makes its entries).
//
// The records gave the DFS at 3x10^7 heap-like nodes 4.3 -> 2.6 s (bench_dominators, CPU):
// entering a node is one miss (its record) instead of two in a row (offset, then targets), and
// the next edge's target's record is prefetched while the current one is looked at.

// The view of the DFS the late node's maker gets: records for offsets and preorder numbers, the
// bitmap for what is reached.
DfsView marking_view(const CsrGraph& g, const Work& w) {
  const NodeRec* rec = w.rec.get();
  return DfsView(g.num_nodes, &rec[0].off, 2, g.targets.data(), &rec[0].x, 2, w.seen.data());
}

// Iterative DFS from root: preorder numbers (in the records), parent[] (by preorder number), the
// bits of the nodes entered, and the tree edges marked.
void depth_first_marking(CsrGraph& g, uint32_t root, Work& w, const LateNode* late) {
  const uint32_t num = g.num_nodes;
  const uint32_t late_node = late ? late->node : kNone;

  w.rec = uninit<NodeRec>(size_t{num} + 1);
  w.meter.add((size_t{num} + 1) * sizeof(NodeRec));
  NodeRec* rec = w.rec.get();
  {
    const uint32_t* off = g.offsets.data();
    const uint32_t* tgt = g.targets.data();
    for (uint32_t v = 0; v < num; ++v) rec[v] = {off[v], off[v] < off[v + 1] ? tgt[off[v]] : kNone};
    rec[num] = {off[num], kNone};
  }
  w.meter.sub(g.offsets.capacity() * 4);
  free_vector(g.offsets);

  uint32_t* tgt = g.targets.data();
  w.parent = uninit<uint32_t>(num);  // only n entries get touched
  uint32_t* parent = w.parent.get();
  w.seen.assign((size_t{num} + 63) / 64, 0);
  uint64_t* seen = w.seen.data();
  auto is_seen = [seen](uint32_t v) { return (seen[v >> 6] >> (v & 63)) & 1; };
  // The DFS stack is the chain of parent links up from the current node; each node on it also
  // needs its place in its edge list and the list's end, kept by depth (only as many entries
  // get touched as the DFS goes deep).
  struct Resume {
    uint32_t e, e_end;
  };
  auto stack = uninit<Resume>(num);
  uint32_t depth = 0, max_depth = 0;

  // The current node (by preorder number) and its place in its edge list.
  uint32_t n = 0, cur = 0, e = 0, e_end = 0;
  // Entering v: its record gives its edges and its first target (returned), and takes its
  // preorder number; what the descent reads next (the first target's record and bit, the rest
  // of the list) is asked for at once.
  auto enter = [&](uint32_t v, uint32_t up) {
    const uint32_t first = rec[v].x;
    rec[v].x = n;
    seen[v >> 6] |= uint64_t(1) << (v & 63);
    parent[n] = up;
    cur = n++;
    e = rec[v].off;
    e_end = rec[v + 1].off;
    if (e < e_end) {
      __builtin_prefetch(&rec[first]);
      __builtin_prefetch(&seen[first >> 6]);
      if (e + 1 < e_end) __builtin_prefetch(&tgt[e + 1]);
    }
    return first;
  };

  uint32_t t = enter(root, 0);
  bool known = e < e_end;  // t is tgt[e], from the record: the targets need not be read for it
  for (;;) {
    if (e < e_end) {
      if (!known) {
        t = tgt[e];
        if (e + 1 < e_end) {
          const uint32_t next = tgt[e + 1];
          __builtin_prefetch(&rec[next]);
          __builtin_prefetch(&seen[next >> 6]);
        }
      }
      known = false;
      if (!is_seen(t)) {  // tree edge: descend
        tgt[e] = kNone;
        stack[depth++] = {e + 1, e_end};
        if (depth > max_depth) max_depth = depth;
        if (t == late_node) {  // its edges are made now; the targets array may move
          add_late_edges(g, *late, marking_view(g, w), true, w);
          tgt = g.targets.data();
          const uint32_t end = static_cast<uint32_t>(g.targets.size());
          rec[t].x = rec[t].off < end ? tgt[rec[t].off] : kNone;  // the late node is the last one
          rec[num].off = end;
        }
        t = enter(t, cur);
        known = e < e_end;
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
  // The records, parent and the bits stay (compaction frees the bits); the stack goes on return.
  w.meter.add(size_t{n} * 4 + size_t{max_depth} * sizeof(Resume) + w.seen.size() * 8);
  w.meter.sub(size_t{max_depth} * sizeof(Resume));
}

// Moves the kept edges of reachable sources, as their targets' preorder numbers, to the front
// of the targets array, in the graph's order, and rewrites the offsets to match, in place:
// source o's kept edges are then tgt[off[o] .. off[o + 1]). Kept: all but tree edges (kNone),
// self-edges and edges into the root. The rest of the array is released. Unreachable sources
// are skipped (their edges do not count). Every target of a reachable source is reachable.
void compact_marked_edges(CsrGraph& g, Work& w) {
  NodeRec* rec = w.rec.get();
  uint32_t* tgt = g.targets.data();
  const uint64_t* seen = w.seen.data();
  const uint32_t num_edges = rec[w.num].off;
  uint32_t out = 0;
  uint32_t begin = rec[0].off;
  for (uint32_t o = 0; o < w.num; ++o) {
    const uint32_t end = rec[o + 1].off;
    rec[o].off = out;
    if (!((seen[o >> 6] >> (o & 63)) & 1)) {
      rec[o].x = kNone;  // from here on the records tell what was reached, and the bits go
    } else {
      const uint32_t v = rec[o].x;
      for (uint32_t e = begin; e < end; ++e) {
        if (e + kEdgeAhead < num_edges && tgt[e + kEdgeAhead] != kNone) __builtin_prefetch(&rec[tgt[e + kEdgeAhead]]);
        const uint32_t t = tgt[e];
        if (t == kNone) continue;  // a tree edge
        const uint32_t pt = rec[t].x;  // t is reached: its record holds its preorder number
        if (pt != v && pt != 0) tgt[out++] = pt;
      }
    }
    begin = end;
  }
  rec[w.num].off = out;
  w.num_preds = out;
  release_pages(tgt + out, tgt + g.targets.capacity());
  w.meter.sub((g.targets.capacity() - out) * 4);
  // The bits' pages go back to the kernel before the vector goes: malloc may keep a freed block of
  // this size in its heap, resident, through the peak that comes later (10^8 nodes: 12.5 MB).
  release_pages(w.seen.data(), w.seen.data() + w.seen.size());
  w.meter.sub(w.seen.size() * 8);
  free_vector(w.seen);
}

// Counts each target's predecessors, then stores them grouped by target: t's list is
// preds[ends[t - 1] .. ends[t]), sources in the graph's order (back and cross edges in the
// same order as collect_predecessors). Frees the graph, makes order[] from the records'
// preorder numbers (the inverse permutation) and frees the records, and sets up the forest:
// {parent, parent} for every node.
void distribute_marked_edges(CsrGraph& g, Work& w) {
  const uint32_t n = w.n, b = w.num_preds;
  const NodeRec* rec = w.rec.get();
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
  uint32_t j = 0;
  for (uint32_t o = 0; o < w.num; ++o) {
    const uint32_t v = rec[o].x;  // kNone for unreachable sources, which have no entries left
    for (const uint32_t j_end = rec[o + 1].off; j < j_end; ++j) {
      if (j + kEdgeAhead < b) {
        __builtin_prefetch(&ends[tgt[j + kEdgeAhead]]);
        __builtin_prefetch(&preds[ends[tgt[j + kEdgeAhead / 2]]], 1);
      }
      preds[ends[tgt[j]]++] = v;
    }
  }
  w.meter.sub(size_t{b} * 4);
  free_vector(g.targets);

  // The offsets are done with: the preorder numbers (kNone for what was not reached) move to the
  // front of the records' array, in a forward sweep (each is written at or before the place it
  // is read from), and the back half's pages go before order[] is made beside them.
  uint32_t* pre = &w.rec[0].off;
  for (uint32_t o = 0; o < w.num; ++o) pre[o] = rec[o].x;
  release_pages(pre + w.num, pre + 2 * (size_t{w.num} + 1));
  w.meter.sub((size_t{w.num} + 2) * 4);

  w.order.resize(n);
  w.meter.add(size_t{n} * 4);
  uint32_t* order = w.order.data();
  for (uint32_t o = 0; o < w.num; ++o)
    if (pre[o] != kNone) order[pre[o]] = o;
  w.rec.reset();
  w.meter.sub(size_t{w.num} * 4);

  // The forest's entries, {parent, parent}, are made by semidominators as its sweep comes to
  // them (see there).
  w.forest = uninit<Forest>(n);
  w.forest_from = n;
}

}  // namespace heapsnap::graph::detail
