#include "snapshot/reachability.h"

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
    for (uint64_t k = s.edge_begin[b]; k < s.edge_begin[b + 1]; ++k) push(s.edge_target[k], s.edge_interior[k], definite);
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
        if (s.edge_interior[k] && !follow_interior) continue;
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

}  // namespace heapsnap::snapshot
