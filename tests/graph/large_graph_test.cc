// Big inputs that break recursive implementations (stack depth = list length) and quadratic
// ones (long doubly-linked lists).
#include <doctest/doctest.h>

#include <numeric>
#include <vector>

#include "graph/csr_graph.h"
#include "graph/dominators.h"
#include "graph/retained.h"
#include "graph/synthetic.h"

using namespace heapsnap::graph;

namespace {

void check_list(const SyntheticGraph& s) {
  const uint32_t n = s.num_nodes;
  DominatorTree t;
  {
    CsrGraph g = build_csr(n, s.from, s.to);
    t = compute_dominators(g);
    const DominatorTree c = compute_dominators_consuming(g);  // a DFS n levels deep
    CHECK(c.idom == t.idom);
    CHECK(c.preorder == t.preorder);
  }
  REQUIRE(t.idom.size() == n);
  REQUIRE(t.preorder.size() == n);
  CHECK(t.idom[0] == kNoIdom);
  uint32_t wrong = 0;
  for (uint32_t i = 1; i < n; ++i) wrong += t.idom[i] != i - 1 || t.preorder[i] != i;
  CHECK(wrong == 0);

  const RetainedSizes r = compute_retained(t, s.shallow_size);
  const uint64_t total = std::accumulate(s.shallow_size.begin(), s.shallow_size.end(), uint64_t{0});
  CHECK(s.shallow_size[0] == 0);
  CHECK(r.bytes[1] == total);  // the head retains everything
  CHECK(r.bytes[0] == total);
  CHECK(r.count[1] == n - 1);
  CHECK(r.bytes[n - 1] == s.shallow_size[n - 1]);
}

}  // namespace

TEST_CASE("10-million-node singly linked list") { check_list(linked_list(10'000'000, 1)); }

TEST_CASE("1-million-node doubly linked list") { check_list(doubly_linked_list(1'000'000, 2)); }

TEST_CASE("1-million-node complete binary tree") {
  const SyntheticGraph s = binary_tree(1'000'000, 3);
  const DominatorTree t = compute_dominators(build_csr(s.num_nodes, s.from, s.to));
  uint32_t wrong = 0;
  for (uint32_t i = 1; i < s.num_nodes; ++i) wrong += t.idom[i] != (i - 1) / 2;
  CHECK(wrong == 0);
  const RetainedSizes r = compute_retained(t, s.shallow_size);
  CHECK(r.count[0] == s.num_nodes);
  CHECK(r.count[1] + r.count[2] + 1 == s.num_nodes);
}

TEST_CASE("path compression over a million-node path") {
  // 0 -> 1 -> ... -> n-1, plus edges from the tail back to every 1000th node and a shortcut
  // 0 -> n/2. The first eval walks the whole linked path; later ones must find it compressed.
  // Back-edge targets before n/2 can be reached around the tail, avoiding every chain node
  // before them, so the root is their idom; so is it for n/2. Every other node: its chain
  // predecessor.
  const uint32_t n = 1'000'000;
  std::vector<uint32_t> from, to;
  for (uint32_t i = 1; i < n; ++i) from.push_back(i - 1), to.push_back(i);
  for (uint32_t i = 1; i < n; i += 1000) from.push_back(n - 1), to.push_back(i);
  from.push_back(0), to.push_back(n / 2);
  const DominatorTree t = compute_dominators(build_csr(n, from, to));
  uint32_t wrong = 0;
  for (uint32_t i = 1; i < n; ++i) {
    const bool around = i == n / 2 || (i < n / 2 && i % 1000 == 1);
    const uint32_t expect = around ? 0 : i - 1;
    wrong += t.idom[i] != expect;
  }
  CHECK(wrong == 0);
}
