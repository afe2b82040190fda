// Slow, obviously-correct references for checking the graph engine. Test-only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "graph/dominators.h"

namespace heapsnap::graph::ref {

using Adj = std::vector<std::vector<uint32_t>>;

inline Adj adjacency(uint32_t n, std::span<const uint32_t> from, std::span<const uint32_t> to) {
  Adj adj(n);
  for (size_t i = 0; i < from.size(); ++i) adj[from[i]].push_back(to[i]);
  return adj;
}

// Nodes reachable from root without passing through 'removed' (kNoIdom: remove nothing).
inline std::vector<bool> reachable(const Adj& succ, uint32_t root, uint32_t removed = kNoIdom) {
  std::vector<bool> seen(succ.size(), false);
  if (root == removed) return seen;
  std::vector<uint32_t> stack{root};
  seen[root] = true;
  while (!stack.empty()) {
    const uint32_t v = stack.back();
    stack.pop_back();
    for (uint32_t w : succ[v])
      if (!seen[w] && w != removed) {
        seen[w] = true;
        stack.push_back(w);
      }
  }
  return seen;
}

// Dominator sets by the textbook data-flow fixpoint (bitsets), then idom(v) = the strict
// dominator of v with the most dominators itself. O(n^2 e / 64): small graphs only.
inline std::vector<uint32_t> dataflow_idom(const Adj& succ, uint32_t root) {
  const uint32_t n = static_cast<uint32_t>(succ.size());
  const size_t words = (n + 63) / 64;
  const std::vector<bool> reach = reachable(succ, root);
  Adj pred(n);
  for (uint32_t v = 0; v < n; ++v)
    if (reach[v])
      for (uint32_t w : succ[v]) pred[w].push_back(v);

  std::vector<std::vector<uint64_t>> dom(n, std::vector<uint64_t>(words, 0));
  std::vector<uint64_t> all(words, 0);
  for (uint32_t v = 0; v < n; ++v)
    if (reach[v]) all[v / 64] |= uint64_t{1} << (v % 64);
  for (uint32_t v = 0; v < n; ++v)
    if (reach[v]) dom[v] = all;
  dom[root].assign(words, 0);
  dom[root][root / 64] |= uint64_t{1} << (root % 64);

  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t v = 0; v < n; ++v) {
      if (!reach[v] || v == root) continue;
      std::vector<uint64_t> d = all;
      for (uint32_t p : pred[v])
        for (size_t k = 0; k < words; ++k) d[k] &= dom[p][k];
      d[v / 64] |= uint64_t{1} << (v % 64);
      if (d != dom[v]) {
        dom[v] = std::move(d);
        changed = true;
      }
    }
  }

  auto popcount = [](const std::vector<uint64_t>& s) {
    size_t c = 0;
    for (uint64_t x : s) c += static_cast<size_t>(__builtin_popcountll(x));
    return c;
  };
  std::vector<uint32_t> idom(n, kNoIdom);
  for (uint32_t v = 0; v < n; ++v) {
    if (!reach[v] || v == root) continue;
    size_t best_size = 0;
    for (uint32_t d = 0; d < n; ++d) {
      if (d == v || !(dom[v][d / 64] >> (d % 64) & 1)) continue;
      const size_t s = popcount(dom[d]);
      if (s > best_size) {
        best_size = s;
        idom[v] = d;
      }
    }
  }
  return idom;
}

// Cooper-Harvey-Kennedy "A Simple, Fast Dominance Algorithm" over reverse postorder, computed
// iteratively. Fine on random and tree-like graphs of moderate size (quadratic on long
// doubly-linked lists, which is why the engine does not use it).
inline std::vector<uint32_t> chk_idom(const Adj& succ, uint32_t root) {
  const uint32_t n = static_cast<uint32_t>(succ.size());
  constexpr uint32_t kUnset = kNoIdom;
  std::vector<uint32_t> post(n, kUnset);  // postorder number
  std::vector<uint32_t> order;            // nodes by postorder
  std::vector<bool> seen(n, false);
  std::vector<std::pair<uint32_t, size_t>> stack{{root, 0}};
  seen[root] = true;
  while (!stack.empty()) {
    auto& [v, i] = stack.back();
    if (i < succ[v].size()) {
      const uint32_t w = succ[v][i++];
      if (!seen[w]) {
        seen[w] = true;
        stack.emplace_back(w, 0);
      }
    } else {
      post[v] = static_cast<uint32_t>(order.size());
      order.push_back(v);
      stack.pop_back();
    }
  }
  Adj pred(n);
  for (uint32_t v = 0; v < n; ++v)
    if (seen[v])
      for (uint32_t w : succ[v]) pred[w].push_back(v);

  std::vector<uint32_t> idom(n, kUnset);
  idom[root] = root;
  auto intersect = [&](uint32_t a, uint32_t b) {
    while (a != b) {
      while (post[a] < post[b]) a = idom[a];
      while (post[b] < post[a]) b = idom[b];
    }
    return a;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t k = order.size(); k-- > 0;) {
      const uint32_t v = order[k];
      if (v == root) continue;
      uint32_t nd = kUnset;
      for (uint32_t p : pred[v]) {
        if (idom[p] == kUnset) continue;
        nd = nd == kUnset ? p : intersect(p, nd);
      }
      if (nd != idom[v]) {
        idom[v] = nd;
        changed = true;
      }
    }
  }
  idom[root] = kNoIdom;
  return idom;
}

// Retained size by definition: what becomes unreachable from root when v is removed.
inline std::vector<uint64_t> removal_retained(const Adj& succ, uint32_t root,
                                              std::span<const uint64_t> shallow) {
  const uint32_t n = static_cast<uint32_t>(succ.size());
  const std::vector<bool> reach = reachable(succ, root);
  std::vector<uint64_t> out(n, 0);
  for (uint32_t v = 0; v < n; ++v) {
    if (!reach[v]) continue;
    const std::vector<bool> still = reachable(succ, root, v);
    for (uint32_t u = 0; u < n; ++u)
      if (reach[u] && !still[u]) out[v] += shallow[u];
  }
  return out;
}

}  // namespace heapsnap::graph::ref
