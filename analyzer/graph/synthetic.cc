#include "graph/synthetic.h"

#include <algorithm>
#include <cmath>

namespace heapsnap::graph {

namespace {

// splitmix64: tiny, fast, and fully specified, so graphs are identical everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) by multiply-shift (bias below 2^-32, irrelevant here). n must be > 0.
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(((next() >> 32) * n) >> 32); }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// Mostly small blocks, some medium, a few large: roughly what malloc sees.
uint64_t block_size(Rng& rng) {
  const double u = rng.unit();
  if (u < 0.70) return 16 + 16 * uint64_t{rng.below(8)};
  if (u < 0.95) return 128 + 8 * uint64_t{rng.below(112)};
  if (u < 0.999) return 1024 + uint64_t{rng.below(63 * 1024)};
  return 65536 + uint64_t{rng.below(1 << 20)};
}

SyntheticGraph with_sizes(uint32_t n, Rng& rng) {
  SyntheticGraph g;
  g.num_nodes = n;
  g.shallow_size.resize(n);
  for (uint32_t i = 0; i < n; ++i) g.shallow_size[i] = i == 0 ? 0 : block_size(rng);
  return g;
}

void edge(SyntheticGraph& g, uint32_t from, uint32_t to) {
  g.from.push_back(from);
  g.to.push_back(to);
}

}  // namespace

SyntheticGraph random_graph(uint32_t n, double edges_per_node, uint64_t seed) {
  Rng rng(seed);
  SyntheticGraph g = with_sizes(n, rng);
  if (n == 0) return g;
  const auto m = static_cast<size_t>(std::llround(std::max(0.0, edges_per_node) * n));
  g.from.reserve(m);
  g.to.reserve(m);
  for (size_t i = 0; i < m; ++i) {
    const uint32_t a = rng.below(n);
    edge(g, a, rng.below(n));
  }
  return g;
}

SyntheticGraph linked_list(uint32_t n, uint64_t seed) {
  Rng rng(seed);
  SyntheticGraph g = with_sizes(n, rng);
  if (n < 2) return g;
  g.from.reserve(n - 1);
  g.to.reserve(n - 1);
  for (uint32_t i = 1; i < n; ++i) edge(g, i - 1, i);
  return g;
}

SyntheticGraph doubly_linked_list(uint32_t n, uint64_t seed) {
  Rng rng(seed);
  SyntheticGraph g = with_sizes(n, rng);
  if (n < 2) return g;
  g.from.reserve(2 * size_t{n});
  g.to.reserve(2 * size_t{n});
  edge(g, 0, 1);
  for (uint32_t i = 1; i + 1 < n; ++i) {
    edge(g, i, i + 1);
    edge(g, i + 1, i);
  }
  return g;
}

SyntheticGraph binary_tree(uint32_t n, uint64_t seed) {
  Rng rng(seed);
  SyntheticGraph g = with_sizes(n, rng);
  if (n < 2) return g;
  g.from.reserve(n - 1);
  g.to.reserve(n - 1);
  for (uint32_t i = 1; i < n; ++i) edge(g, (i - 1) / 2, i);
  return g;
}

SyntheticGraph heap_like_graph(uint32_t n, uint64_t seed) {
  Rng rng(seed);
  SyntheticGraph g = with_sizes(n, rng);
  if (n < 2) return g;
  g.from.reserve(2 * size_t{n} + 512);
  g.to.reserve(2 * size_t{n} + 512);

  // Widely shared objects (interned strings, type descriptors, allocator arenas).
  const uint32_t num_shared = std::clamp<uint32_t>(n / 1024, 1, 65536);
  std::vector<uint32_t> shared(num_shared);
  for (uint32_t& s : shared) s = 1 + rng.below(n - 1);

  // Runs of consecutively allocated nodes forming one structure each: a list, a random tree
  // or a balanced tree, with ~35% of nodes pointing back at their owner.
  uint32_t runs = 0;
  for (uint32_t head = 1; head < n; ++runs) {
    const double r = rng.unit();
    const uint32_t len = r < 0.60 ? 1 + rng.below(16)
                         : r < 0.95 ? 16 + rng.below(240)
                                    : 256 + rng.below(8192);
    const uint32_t end = static_cast<uint32_t>(std::min<uint64_t>(n, uint64_t{head} + len));
    const uint32_t kind = rng.below(3);
    // The first few hundred structures hang off roots; the rest are held by some object
    // allocated earlier, except ~1% that nobody references any more (leaks).
    if (runs < 256)
      edge(g, 0, head);
    else if (rng.unit() >= 0.01)
      edge(g, 1 + rng.below(head - 1), head);
    for (uint32_t j = head + 1; j < end; ++j) {
      const uint32_t owner = kind == 0   ? j - 1
                             : kind == 1 ? head + rng.below(j - head)
                                         : head + (j - head - 1) / 2;
      edge(g, owner, j);
      if (rng.unit() < 0.35) edge(g, j, owner);
    }
    head = end;
  }

  // Extra references: to shared objects, to recent neighbours, and rarely far away.
  for (uint32_t j = 1; j < n; ++j) {
    const double u = rng.unit();
    if (u < 0.30)
      edge(g, j, shared[rng.below(num_shared)]);
    else if (u < 0.50 && j > 1)
      edge(g, j, j - 1 - rng.below(std::min<uint32_t>(j - 1, 256)));
    else if (u < 0.60)
      edge(g, j, 1 + rng.below(n - 1));
  }

  // Globals pointing into the middle of the heap.
  for (int i = 0; i < 64; ++i) edge(g, 0, 1 + rng.below(n - 1));
  return g;
}

}  // namespace heapsnap::graph
