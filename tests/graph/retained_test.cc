#include <doctest/doctest.h>

#include <random>
#include <stdexcept>
#include <vector>

#include "graph/csr_graph.h"
#include "graph/dominators.h"
#include "graph/retained.h"
#include "graph/synthetic.h"
#include "reference.h"

using namespace heapsnap::graph;

namespace {

struct Result {
  DominatorTree tree;
  RetainedSizes retained;
};

Result run(uint32_t n, const std::vector<std::pair<uint32_t, uint32_t>>& edges,
           const std::vector<uint64_t>& shallow) {
  std::vector<uint32_t> from, to;
  for (auto [a, b] : edges) from.push_back(a), to.push_back(b);
  Result r;
  r.tree = compute_dominators(build_csr(n, from, to));
  r.retained = compute_retained(r.tree, shallow);
  return r;
}

std::vector<uint32_t> children(const DomChildren& c, uint32_t v) {
  auto s = c.successors(v);
  return {s.begin(), s.end()};
}

}  // namespace

TEST_CASE("retained sizes of hand-made graphs") {
  SUBCASE("diamond") {
    const Result r = run(5, {{0, 1}, {0, 2}, {1, 3}, {2, 3}, {3, 4}}, {0, 10, 20, 30, 40});
    CHECK(r.retained.bytes == std::vector<uint64_t>{100, 10, 20, 70, 40});
    CHECK(r.retained.count == std::vector<uint32_t>{5, 1, 1, 2, 1});
  }
  SUBCASE("chain") {
    const Result r = run(4, {{0, 1}, {1, 2}, {2, 3}}, {0, 1, 2, 4});
    CHECK(r.retained.bytes == std::vector<uint64_t>{7, 7, 6, 4});
    CHECK(r.retained.count == std::vector<uint32_t>{4, 3, 2, 1});
  }
  SUBCASE("cycle") {
    const Result r = run(4, {{0, 1}, {1, 2}, {2, 3}, {3, 1}}, {5, 1, 2, 4});
    CHECK(r.retained.bytes == std::vector<uint64_t>{12, 7, 6, 4});
  }
  SUBCASE("shared subtree") {
    const Result r = run(7, {{0, 1}, {0, 2}, {1, 3}, {2, 3}, {3, 4}, {3, 5}, {1, 6}},
                         {0, 1, 2, 4, 8, 16, 32});
    CHECK(r.retained.bytes == std::vector<uint64_t>{63, 33, 2, 28, 8, 16, 32});
    CHECK(r.retained.count == std::vector<uint32_t>{7, 2, 1, 3, 1, 1, 1});
    const DomChildren c = dominator_children(r.tree);
    CHECK(c.num_nodes == 7);
    CHECK(children(c, 0).size() == 3);  // 1, 2, 3 in preorder
    CHECK(children(c, 1) == std::vector<uint32_t>{6});
    CHECK(children(c, 3).size() == 2);
    CHECK(children(c, 4).empty());
  }
  SUBCASE("unreachable nodes retain and contribute nothing") {
    const Result r = run(5, {{0, 1}, {1, 2}, {3, 2}, {4, 3}}, {1, 10, 100, 1000, 10000});
    CHECK(r.retained.bytes == std::vector<uint64_t>{111, 110, 100, 0, 0});
    CHECK(r.retained.count == std::vector<uint32_t>{3, 2, 1, 0, 0});
    const DomChildren c = dominator_children(r.tree);
    CHECK(children(c, 3).empty());
    CHECK(c.num_edges() == 2);
  }
  SUBCASE("lone root") {
    const Result r = run(1, {}, {9});
    CHECK(r.retained.bytes == std::vector<uint64_t>{9});
    CHECK(dominator_children(r.tree).num_edges() == 0);
  }
}

TEST_CASE("compute_retained rejects a wrong-length shallow array") {
  const std::vector<uint32_t> none;
  const DominatorTree t = compute_dominators(build_csr(3, none, none));
  const std::vector<uint64_t> shallow(2, 1);
  CHECK_THROWS_AS(compute_retained(t, shallow), std::invalid_argument);
}

TEST_CASE("retained equals what removing the node disconnects, on random graphs") {
  std::mt19937_64 rng(777);
  for (int round = 0; round < 1500; ++round) {
    const uint32_t n = 1 + static_cast<uint32_t>(rng() % 120);
    const uint32_t m = static_cast<uint32_t>(rng() % (3 * n + 1));
    std::vector<uint32_t> from, to;
    for (uint32_t i = 0; i < m; ++i) from.push_back(rng() % n), to.push_back(rng() % n);
    std::vector<uint64_t> shallow(n);
    for (auto& s : shallow) s = rng() % 1000;
    const DominatorTree t = compute_dominators(build_csr(n, from, to));
    const RetainedSizes r = compute_retained(t, shallow);
    const ref::Adj adj = ref::adjacency(n, from, to);
    CAPTURE(round);
    CHECK(r.bytes == ref::removal_retained(adj, 0, shallow));
    // Sizes from a function instead of an array: asked once per reachable node, same result.
    size_t calls = 0;
    const RetainedSizes f = compute_retained_with(t, [&](uint32_t v) {
      ++calls;
      return shallow[v];
    });
    CHECK(f.bytes == r.bytes);
    CHECK(f.count == r.count);
    CHECK(calls == t.preorder.size());

    // The children CSR is the idom relation turned around, listed in preorder.
    const DomChildren c = dominator_children(t);
    std::vector<uint32_t> pos(n, kNoIdom);
    for (uint32_t i = 0; i < t.preorder.size(); ++i) pos[t.preorder[i]] = i;
    uint32_t edges = 0;
    for (uint32_t v = 0; v < n; ++v) {
      uint32_t last = 0;
      for (uint32_t k : c.successors(v)) {
        CHECK(t.idom[k] == v);
        CHECK(pos[k] >= last);
        last = pos[k];
        ++edges;
      }
      // count = 1 + sum of children's counts
      if (t.reachable(v)) {
        uint64_t sum = 1;
        for (uint32_t k : c.successors(v)) sum += r.count[k];
        CHECK(r.count[v] == sum);
      }
    }
    CHECK(edges + 1 == t.preorder.size());
  }
}
