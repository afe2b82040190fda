#include "snapshot/reachability.h"

#include <stdexcept>

#include "snapshot/spare_capacity.h"

namespace heapsnap::snapshot {

const char *reach_name(Reach r) {
  switch (r) {
    case Reach::kReachable: return "reachable";
    case Reach::kPossible: return "possibly lost";
    case Reach::kIndirect: return "indirectly lost";
    case Reach::kDefinite: return "definitely lost";
    default: return "unreached";
  }
}

Reachability classify(const HeapSnapshot &s, bool follow_interior) {
  const uint32_t n = s.blocks();
  Reachability r;
  r.state.assign(n, Reach::kUnreached);
  r.leader.assign(n, UINT32_MAX);
  std::vector<uint32_t> stack;
  // A vector's spare capacity holds stale words, no pointers (snapshot/spare_capacity.h).
  const std::vector<bool> drop = spare_capacity_edges(s).drop;
  auto stale = [&](uint64_t k) { return !drop.empty() && drop[k]; };
  // A pointer from a definite source (a root or a reachable block) to a block's start makes it
  // reachable; any other pointer makes an unreached block possible. Upgrades push the block again.
  auto push = [&](uint32_t to, bool interior, bool definite_source) {
    if (interior && !follow_interior) return;
    Reach &st = r.state[to];
    if (st == Reach::kReachable) return;
    if (!interior && definite_source) {
      st = Reach::kReachable;
      stack.push_back(to);
    } else if (st == Reach::kUnreached) {
      st = Reach::kPossible;
      stack.push_back(to);
    }
  };
  for (size_t k = 0; k < s.root_target.size(); ++k) push(s.root_target[k], s.root_interior[k], true);
  while (!stack.empty()) {
    uint32_t b = stack.back();
    stack.pop_back();
    bool definite = r.state[b] == Reach::kReachable;
    for (uint64_t k = s.edge_begin[b]; k < s.edge_begin[b + 1]; ++k)
      if (!stale(k)) push(s.edge_target[k], s.edge_interior[k], definite);
  }
  // Leak cliques, in address order as memcheck does: every unreached block still unclaimed leads
  // a clique of what it reaches; an earlier leader reached later joins the later clique.
  for (uint32_t b = 0; b < n; ++b) {
    if (r.state[b] != Reach::kUnreached) continue;
    r.state[b] = Reach::kDefinite;
    stack.push_back(b);
    while (!stack.empty()) {
      uint32_t x = stack.back();
      stack.pop_back();
      for (uint64_t k = s.edge_begin[x]; k < s.edge_begin[x + 1]; ++k) {
        if ((s.edge_interior[k] && !follow_interior) || stale(k)) continue;
        uint32_t t = s.edge_target[k];
        if (t == b) continue;
        Reach &st = r.state[t];
        if (st == Reach::kUnreached) {
          st = Reach::kIndirect;  // newly claimed: its own targets follow
          r.leader[t] = b;
          stack.push_back(t);
        } else if (st == Reach::kDefinite) {
          st = Reach::kIndirect;  // an earlier leader joins this clique (what it reaches is claimed)
          r.leader[t] = b;
        }
      }
    }
  }
  for (uint32_t b = 0; b < n; ++b) {
    int k = int(r.state[b]);
    r.totals.blocks[k] += 1;
    r.totals.bytes[k] += s.size[b];
  }
  return r;
}

namespace {

inline bool bit(const std::vector<uint64_t> &bits, uint32_t v) { return bits[v >> 6] & (uint64_t(1) << (v & 63)); }

// Sets v's bit; whether it was set before.
inline bool test_set(std::vector<uint64_t> &bits, uint32_t v) {
  uint64_t &w = bits[v >> 6];
  const uint64_t b = uint64_t(1) << (v & 63);
  const bool was = w & b;
  w |= b;
  return was;
}

// Cliques, in address order, over what reached(v) says was not reached: as classify() makes
// them. 'claimed' has a bit per node, set for the reached ones or clear (reached() tells).
template <class Graph, class Reached>
LeakCliques cliques_among(const Graph &g, uint32_t first_block, uint32_t num_blocks, Reached reached,
                          std::vector<uint64_t> &claimed) {
  LeakCliques out;
  std::vector<uint32_t> stack;
  std::vector<uint64_t> leading(claimed.size(), 0);
  const uint32_t end = first_block + num_blocks;
  for (uint32_t b = first_block; b < end; ++b) {
    if (reached(b) || bit(claimed, b)) continue;
    ++out.unreachable;
    test_set(claimed, b);
    test_set(leading, b);
    out.leader.push_back(b);
    out.cycle.push_back(false);
    stack.push_back(b);
    while (!stack.empty()) {
      const uint32_t x = stack.back();
      stack.pop_back();
      for (uint32_t t : g.successors(x)) {
        if (t == b) {
          out.cycle.back() = true;
          continue;
        }
        if (t < first_block || t >= end || reached(t)) continue;
        if (!test_set(claimed, t)) {
          ++out.unreachable;
          stack.push_back(t);
        } else if (bit(leading, t)) {
          leading[t >> 6] &= ~(uint64_t(1) << (t & 63));  // an earlier leader joins this clique
        }
      }
    }
  }
  size_t k = 0;
  for (size_t i = 0; i < out.leader.size(); ++i) {
    const uint32_t b = out.leader[i];
    if (!bit(leading, b)) continue;
    out.leader[k] = b;
    out.cycle[k] = out.cycle[i];
    ++k;
  }
  out.leader.resize(k);
  out.cycle.resize(k);
  return out;
}

}  // namespace

LeakCliques leak_cliques(const graph::CsrGraph &g, uint32_t first_block, uint32_t num_blocks, uint32_t root) {
  const uint32_t n = g.num_nodes;
  std::vector<uint64_t> seen((size_t(n) + 63) / 64, 0);  // reached, then also claimed by a clique
  std::vector<uint32_t> stack;
  if (root < n) {
    test_set(seen, root);
    stack.push_back(root);
  }
  while (!stack.empty()) {
    const uint32_t v = stack.back();
    stack.pop_back();
    for (uint32_t t : g.successors(v))
      if (!test_set(seen, t)) stack.push_back(t);
  }
  return cliques_among(g, first_block, num_blocks, [](uint32_t) { return false; }, seen);
}

LeakCliques leak_cliques_unreached(const graph::DfsView &dfs, uint32_t first_block, uint32_t num_blocks) {
  if (uint64_t(first_block) + num_blocks > dfs.num_nodes())
    throw std::invalid_argument("leak_cliques_unreached: the blocks go past the graph's nodes");
  std::vector<uint64_t> claimed((size_t(dfs.num_nodes()) + 63) / 64, 0);
  return cliques_among(dfs, first_block, num_blocks, [&](uint32_t v) { return dfs.reached(v); }, claimed);
}

}  // namespace heapsnap::snapshot
