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
    const CsrGraph g = build_csr(n, s.from, s.to);
    t = compute_dominators(g);
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
