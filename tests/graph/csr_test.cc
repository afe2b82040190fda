#include <doctest/doctest.h>

#include <random>
#include <stdexcept>
#include <vector>

#include "graph/csr_graph.h"

using namespace heapsnap::graph;

namespace {
std::vector<uint32_t> succ(const CsrGraph& g, uint32_t v) {
  auto s = g.successors(v);
  return {s.begin(), s.end()};
}
}  // namespace

TEST_CASE("build_csr groups edges by source and keeps input order") {
  const std::vector<uint32_t> from{2, 0, 2, 1, 0, 2, 2};
  const std::vector<uint32_t> to{0, 3, 2, 1, 1, 0, 3};  // self-edges and a duplicate 2->0
  const CsrGraph g = build_csr(4, from, to);
  CHECK(g.num_nodes == 4);
  CHECK(g.num_edges() == 7);
  CHECK(g.offsets == std::vector<uint32_t>{0, 2, 3, 7, 7});
  CHECK(succ(g, 0) == std::vector<uint32_t>{3, 1});
  CHECK(succ(g, 1) == std::vector<uint32_t>{1});
  CHECK(succ(g, 2) == std::vector<uint32_t>{0, 2, 0, 3});
  CHECK(succ(g, 3).empty());
  CHECK(bytes_used(g) >= (5 + 7) * sizeof(uint32_t));
}

TEST_CASE("reverse flips every edge, predecessors in increasing id order") {
  const std::vector<uint32_t> from{2, 0, 2, 1, 0, 2, 2};
  const std::vector<uint32_t> to{0, 3, 2, 1, 1, 0, 3};
  const CsrGraph r = reverse(build_csr(4, from, to));
  CHECK(r.num_nodes == 4);
  CHECK(r.num_edges() == 7);
  CHECK(succ(r, 0) == std::vector<uint32_t>{2, 2});
  CHECK(succ(r, 1) == std::vector<uint32_t>{0, 1});
  CHECK(succ(r, 2) == std::vector<uint32_t>{2});
  CHECK(succ(r, 3) == std::vector<uint32_t>{0, 2});
  const CsrGraph rr = reverse(r);
  CHECK(rr.offsets == build_csr(4, from, to).offsets);
}

TEST_CASE("build_csr edge cases") {
  const std::vector<uint32_t> none;
  const CsrGraph empty = build_csr(0, none, none);
  CHECK(empty.offsets == std::vector<uint32_t>{0});
  CHECK(empty.targets.empty());
  CHECK(reverse(empty).offsets == std::vector<uint32_t>{0});

  const CsrGraph isolated = build_csr(3, none, none);
  CHECK(isolated.offsets == std::vector<uint32_t>{0, 0, 0, 0});
  CHECK(isolated.successors(1).empty());
}

TEST_CASE("build_csr rejects bad input") {
  const std::vector<uint32_t> a{0, 1};
  const std::vector<uint32_t> b{1};
  CHECK_THROWS_AS(build_csr(2, a, b), std::invalid_argument);
  const std::vector<uint32_t> c{1, 2};
  CHECK_THROWS_AS(build_csr(2, a, c), std::invalid_argument);
  CHECK_THROWS_AS(build_csr(2, c, a), std::invalid_argument);
}

TEST_CASE("build_csr and reverse agree with naive adjacency lists on random edges") {
  std::mt19937 rng(42);
  for (int round = 0; round < 200; ++round) {
    const uint32_t n = 1 + rng() % 300;
    const uint32_t m = rng() % (4 * n);
    std::vector<uint32_t> from(m), to(m);
    std::vector<std::vector<uint32_t>> out(n), in(n);
    for (uint32_t i = 0; i < m; ++i) {
      from[i] = rng() % n;
      to[i] = rng() % n;
      out[from[i]].push_back(to[i]);
    }
    for (uint32_t v = 0; v < n; ++v)
      for (uint32_t t : out[v]) in[t].push_back(v);  // increasing source order
    const CsrGraph g = build_csr(n, from, to);
    const CsrGraph r = reverse(g);
    CAPTURE(round);
    REQUIRE(g.offsets.size() == n + 1);
    REQUIRE(r.offsets.size() == n + 1);
    for (uint32_t v = 0; v < n; ++v) {
      CHECK(succ(g, v) == out[v]);
      CHECK(succ(r, v) == in[v]);
    }
  }
}
