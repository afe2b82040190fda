#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <stdexcept>
#include <vector>

#include "graph/csr_graph.h"
#include "graph/dominators.h"
#include "graph/synthetic.h"
#include "reference.h"

using namespace heapsnap::graph;

namespace {

struct Edges {
  uint32_t n = 0;
  std::vector<uint32_t> from, to;
  void add(uint32_t a, uint32_t b) {
    from.push_back(a);
    to.push_back(b);
  }
};

// Structural checks that hold for any correct result: preorder lists exactly the reachable
// nodes once each, starting at the root, and every idom comes earlier in it.
void check_shape(const DominatorTree& t, const ref::Adj& adj, uint32_t root) {
  const uint32_t n = static_cast<uint32_t>(adj.size());
  const std::vector<bool> reach = ref::reachable(adj, root);
  REQUIRE(t.idom.size() == n);
  REQUIRE(!t.preorder.empty());
  CHECK(t.preorder[0] == root);
  CHECK(t.idom[root] == kNoIdom);
  std::vector<uint32_t> pos(n, kNoIdom);
  for (uint32_t i = 0; i < t.preorder.size(); ++i) {
    const uint32_t v = t.preorder[i];
    REQUIRE(v < n);
    CHECK(reach[v]);
    CHECK(pos[v] == kNoIdom);  // listed once
    pos[v] = i;
  }
  CHECK(static_cast<size_t>(std::count(reach.begin(), reach.end(), true)) ==
        t.preorder.size());
  for (uint32_t v = 0; v < n; ++v) {
    CHECK(t.reachable(v) == bool(reach[v]));
    if (reach[v] && v != root) {
      REQUIRE(t.idom[v] < n);
      CHECK(pos[t.idom[v]] < pos[v]);
    }
  }
}

// compute_dominators_consuming must give exactly what compute_dominators gives, and leave the
// graph empty but for its node count.
void check_consuming(const CsrGraph& g, const DominatorTree& t, uint32_t root) {
  CsrGraph scratch = g;
  const DominatorTree c = compute_dominators_consuming(scratch, root);
  CHECK(c.idom == t.idom);
  CHECK(c.preorder == t.preorder);
  CHECK(scratch.num_nodes == g.num_nodes);
  CHECK(scratch.offsets.empty());
  CHECK(scratch.targets.empty());
}

void check_against_reference(const Edges& e, uint32_t root) {
  const ref::Adj adj = ref::adjacency(e.n, e.from, e.to);
  const CsrGraph g = build_csr(e.n, e.from, e.to);
  const DominatorTree t = compute_dominators(g, root);
  check_shape(t, adj, root);
  const std::vector<uint32_t> expect = ref::dataflow_idom(adj, root);
  CHECK(t.idom == expect);
  check_consuming(g, t, root);
}

}  // namespace

TEST_CASE("idoms of hand-made graphs") {
  auto idoms = [](uint32_t n, std::vector<std::pair<uint32_t, uint32_t>> edges) {
    Edges e{n, {}, {}};
    for (auto [a, b] : edges) e.add(a, b);
    return compute_dominators(build_csr(e.n, e.from, e.to)).idom;
  };
  constexpr uint32_t X = kNoIdom;

  SUBCASE("single node") { CHECK(idoms(1, {}) == std::vector<uint32_t>{X}); }
  SUBCASE("chain") {
    CHECK(idoms(4, {{0, 1}, {1, 2}, {2, 3}}) == std::vector<uint32_t>{X, 0, 1, 2});
  }
  SUBCASE("diamond") {
    CHECK(idoms(5, {{0, 1}, {0, 2}, {1, 3}, {2, 3}, {3, 4}}) ==
          std::vector<uint32_t>{X, 0, 0, 0, 3});
  }
  SUBCASE("cycle") {
    CHECK(idoms(4, {{0, 1}, {1, 2}, {2, 3}, {3, 1}}) == std::vector<uint32_t>{X, 0, 1, 2});
  }
  SUBCASE("cycle entered twice") {
    CHECK(idoms(4, {{0, 1}, {0, 3}, {1, 2}, {2, 3}, {3, 1}}) ==
          std::vector<uint32_t>{X, 0, 1, 0});
  }
  SUBCASE("shared subtree") {
    CHECK(idoms(7, {{0, 1}, {0, 2}, {1, 3}, {2, 3}, {3, 4}, {3, 5}, {1, 6}}) ==
          std::vector<uint32_t>{X, 0, 0, 0, 3, 3, 1});
  }
  SUBCASE("self-edges and duplicates change nothing") {
    CHECK(idoms(3, {{0, 1}, {1, 1}, {1, 2}, {1, 2}, {2, 2}, {0, 1}}) ==
          std::vector<uint32_t>{X, 0, 1});
  }
  SUBCASE("edges back into the root") {
    CHECK(idoms(3, {{0, 1}, {1, 0}, {1, 2}, {2, 0}}) == std::vector<uint32_t>{X, 0, 1});
  }
  SUBCASE("Lengauer-Tarjan paper example") {
    // R=0 A=1 B=2 C=3 D=4 E=5 F=6 G=7 H=8 I=9 J=10 K=11 L=12
    const std::vector<uint32_t> got =
        idoms(13, {{0, 1}, {0, 2}, {0, 3}, {1, 4}, {2, 1}, {2, 4}, {2, 5}, {3, 6}, {3, 7},
                   {4, 12}, {5, 8}, {6, 9}, {7, 9}, {7, 10}, {8, 5}, {8, 11}, {9, 11},
                   {10, 9}, {11, 9}, {11, 0}, {12, 8}});
    CHECK(got == std::vector<uint32_t>{X, 0, 0, 0, 0, 0, 3, 3, 0, 0, 7, 0, 4});
  }
}

TEST_CASE("unreachable nodes get kNoIdom and are left out of preorder") {
  Edges e{6, {}, {}};
  e.add(0, 1);
  e.add(1, 2);
  e.add(3, 2);  // 3 and 4 are unreachable but point into the reachable part
  e.add(4, 3);
  e.add(3, 4);
  e.add(5, 5);
  const DominatorTree t = compute_dominators(build_csr(e.n, e.from, e.to));
  CHECK(t.idom == std::vector<uint32_t>{kNoIdom, 0, 1, kNoIdom, kNoIdom, kNoIdom});
  CHECK(t.preorder == std::vector<uint32_t>{0, 1, 2});
  CHECK_FALSE(t.reachable(3));
  CHECK(t.reachable(0));
  CHECK(t.reachable(2));
}

TEST_CASE("root other than 0") {
  Edges e{4, {}, {}};
  e.add(0, 1);
  e.add(2, 0);
  e.add(2, 3);
  e.add(3, 0);
  check_against_reference(e, 2);
  const DominatorTree t = compute_dominators(build_csr(e.n, e.from, e.to), 2);
  CHECK(t.idom == std::vector<uint32_t>{2, 0, kNoIdom, 2});
}

TEST_CASE("bad arguments are rejected") {
  const std::vector<uint32_t> none;
  const CsrGraph g = build_csr(2, none, none);
  CHECK_THROWS_AS(compute_dominators(g, 2), std::invalid_argument);
  CHECK_THROWS_AS(compute_dominators(CsrGraph{}), std::invalid_argument);
  CsrGraph broken = g;
  broken.offsets.pop_back();
  CHECK_THROWS_AS(compute_dominators(broken), std::invalid_argument);
  CsrGraph scratch = g;
  CHECK_THROWS_AS(compute_dominators_consuming(scratch, 2), std::invalid_argument);
  CHECK(scratch.offsets == g.offsets);  // untouched
  CHECK_THROWS_AS(compute_dominators_consuming(broken), std::invalid_argument);
}

TEST_CASE("random graphs match the data-flow reference") {
  std::mt19937_64 rng(12345);
  auto below = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  const double densities[] = {0.3, 0.8, 1.0, 1.3, 2.0, 3.0, 6.0};
  int graphs = 0;
  for (int round = 0; round < 4000; ++round) {
    Edges e;
    e.n = 1 + below(round < 2000 ? 24 : 200);  // many tiny graphs catch corner cases
    const double d = densities[below(7)];
    const auto m = static_cast<uint32_t>(d * e.n);
    const int shape = static_cast<int>(below(4));
    for (uint32_t i = 0; i < m; ++i) {
      uint32_t a = below(e.n), b = below(e.n);
      if (shape == 1 && a > b) std::swap(a, b);  // mostly forward: deep trees and DAGs
      if (shape == 2 && b > 0 && below(3) == 0) a = b - 1;  // long chains with back edges
      e.add(a, b);
      if (shape == 2 && a > 0 && below(2) == 0) e.add(b, a);
    }
    if (shape == 3) {  // self-loops and duplicates
      for (uint32_t i = 0; i < e.n / 4 + 1; ++i) e.add(below(e.n), 0), e.add(below(e.n), below(e.n));
      for (uint32_t i = 0, k = static_cast<uint32_t>(e.from.size()); i < k && i < 20; ++i) {
        const uint32_t v = below(e.n);
        e.add(v, v);
        e.add(e.from[i], e.to[i]);
      }
    }
    const uint32_t root = below(3) == 0 ? below(e.n) : 0;
    CAPTURE(round);
    CAPTURE(e.n);
    check_against_reference(e, root);
    ++graphs;
  }
  CHECK(graphs == 4000);
}

TEST_CASE("synthetic graphs match Cooper-Harvey-Kennedy") {
  auto check = [](const SyntheticGraph& s) {
    const ref::Adj adj = ref::adjacency(s.num_nodes, s.from, s.to);
    const CsrGraph g = build_csr(s.num_nodes, s.from, s.to);
    const DominatorTree t = compute_dominators(g);
    check_shape(t, adj, 0);
    CHECK(t.idom == ref::chk_idom(adj, 0));
    check_consuming(g, t, 0);
  };
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    CAPTURE(seed);
    check(heap_like_graph(200000, seed));
    check(random_graph(50000, 1.5, seed));
    check(random_graph(50000, 4.0, seed));
  }
  // Big enough for the consuming variant's forest to be made in many chunks and for its
  // predecessor lists to be given back part by part behind the sweep.
  check(heap_like_graph(1500000, 4));
  check(heap_like_graph(2, 9));
  check(heap_like_graph(300, 9));
  check(binary_tree(100000, 1));
  check(doubly_linked_list(5000, 1));
}

TEST_CASE("work_peak_bytes reports the working set") {
  const SyntheticGraph s = heap_like_graph(1000000, 7);
  const CsrGraph g = build_csr(s.num_nodes, s.from, s.to);
  const DominatorTree t = compute_dominators(g);
  CHECK(t.work_peak_bytes >= bytes_used(t));
  // Engine memory (graph + working set) stays under 40 bytes per node on heap-like graphs.
  CHECK(double(t.work_peak_bytes + bytes_used(g)) / s.num_nodes < 40.0);
  // Consuming the graph: the peak counts the graph while it is held, and stays lower.
  CsrGraph scratch = g;
  const DominatorTree c = compute_dominators_consuming(scratch);
  CHECK(c.work_peak_bytes >= bytes_used(c));
  CHECK(double(c.work_peak_bytes) / s.num_nodes < 30.0);
  CHECK(c.work_peak_bytes < t.work_peak_bytes + bytes_used(g));
}

// A late node (LateNode) must give exactly what the same graph gives with the late node's edges
// there from the start, in both variants; the maker sees what is reached without the late node
// (it is the root's last successor), numbered as in the final preorder.
TEST_CASE("a late node's edges made during the DFS give the same tree as edges given up front") {
  std::mt19937_64 rng(777);
  auto below = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  for (int round = 0; round < 1500; ++round) {
    CAPTURE(round);
    const uint32_t n = 2 + below(round < 1000 ? 30 : 400);  // nodes 0 .. n-1, late node n
    const uint32_t late_id = n;
    Edges e;
    e.n = n + 1;
    const auto m = static_cast<uint32_t>((0.5 + double(below(5))) * n);
    for (uint32_t i = 0; i < m; ++i) e.add(below(n), below(n));
    e.add(0, late_id);  // the root's last successor: the edges are grouped stably by source
    // The late edges: every second node the others do not reach, and some reached ones (edges
    // from the leak node into reachable nodes change their dominators).
    const ref::Adj adj = ref::adjacency(e.n, e.from, e.to);
    const std::vector<bool> reach = ref::reachable(adj, 0, late_id);
    std::vector<uint32_t> late_edges;
    for (uint32_t v = 1, k = 0; v < n; ++v)
      if ((!reach[v] && k++ % 2 == 0) || (reach[v] && below(8) == 0)) late_edges.push_back(v);

    Edges full = e;
    for (uint32_t t : late_edges) full.add(late_id, t);
    const CsrGraph expect_graph = build_csr(full.n, full.from, full.to);
    const DominatorTree expect = compute_dominators(expect_graph, 0);
    CHECK(expect.idom == ref::dataflow_idom(ref::adjacency(full.n, full.from, full.to), 0));

    int calls = 0;
    LateNode late;
    late.node = late_id;
    const CsrGraph given = build_csr(e.n, e.from, e.to);
    late.edges = [&](const DfsView& dfs) {
      ++calls;
      REQUIRE(dfs.num_nodes() == e.n);
      for (uint32_t v = 0; v < n; ++v) {
        CHECK(dfs.reached(v) == bool(reach[v]));
        if (dfs.reached(v)) {
          REQUIRE(dfs.preorder(v) < expect.preorder.size());
          CHECK(expect.preorder[dfs.preorder(v)] == v);
        } else {  // the edges of what is not reached are read as the graph has them
          CHECK(dfs.preorder(v) == kNoIdom);
          const std::span<const uint32_t> got = dfs.successors(v), want = given.successors(v);
          CHECK(std::vector<uint32_t>(got.begin(), got.end()) == std::vector<uint32_t>(want.begin(), want.end()));
        }
      }
      return late_edges;
    };
    CsrGraph kept = build_csr(e.n, e.from, e.to);
    const DominatorTree t = compute_dominators(kept, 0, late);
    CHECK(calls == 1);
    CHECK(t.idom == expect.idom);
    CHECK(t.preorder == expect.preorder);
    CHECK(kept.offsets == expect_graph.offsets);  // the graph gained the late edges
    CHECK(kept.targets == expect_graph.targets);

    CsrGraph consumed = build_csr(e.n, e.from, e.to);
    const DominatorTree c = compute_dominators_consuming(consumed, 0, &late);
    CHECK(calls == 2);
    CHECK(c.idom == expect.idom);
    CHECK(c.preorder == expect.preorder);
    CHECK(consumed.targets.empty());
  }
}

TEST_CASE("a late node that is not the last node, or has edges, is refused") {
  Edges e{3, {}, {}};
  e.add(0, 1);
  e.add(1, 2);
  LateNode late;
  late.edges = [](const DfsView&) { return std::vector<uint32_t>{}; };
  CsrGraph g = build_csr(e.n, e.from, e.to);
  late.node = 1;
  CHECK_THROWS_AS(compute_dominators(g, 0, late), std::invalid_argument);
  late.node = 0;
  CHECK_THROWS_AS(compute_dominators(g, 0, late), std::invalid_argument);
  e.add(2, 1);
  CsrGraph with_edges = build_csr(e.n, e.from, e.to);
  late.node = 2;
  CHECK_THROWS_AS(compute_dominators_consuming(with_edges, 0, &late), std::invalid_argument);
  CHECK(with_edges.targets.size() == 3);  // refused before it was touched
}
