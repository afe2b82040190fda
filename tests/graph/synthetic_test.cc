#include <doctest/doctest.h>

#include <cstddef>
#include <vector>

#include "graph/synthetic.h"

using namespace heapsnap::graph;

namespace {
void check_well_formed(const SyntheticGraph& g) {
  REQUIRE(g.from.size() == g.to.size());
  REQUIRE(g.shallow_size.size() == g.num_nodes);
  uint32_t bad = 0;
  for (size_t i = 0; i < g.from.size(); ++i) bad += g.from[i] >= g.num_nodes || g.to[i] >= g.num_nodes;
  CHECK(bad == 0);
  if (g.num_nodes > 0) CHECK(g.shallow_size[0] == 0);
}
}  // namespace

TEST_CASE("generators are deterministic and well formed") {
  for (uint32_t n : {0u, 1u, 2u, 3u, 1000u, 100000u}) {
    CAPTURE(n);
    const SyntheticGraph a = heap_like_graph(n, 5), b = heap_like_graph(n, 5);
    CHECK(a.from == b.from);
    CHECK(a.to == b.to);
    CHECK(a.shallow_size == b.shallow_size);
    check_well_formed(a);
    check_well_formed(random_graph(n, 2.5, 5));
    check_well_formed(linked_list(n, 5));
    check_well_formed(doubly_linked_list(n, 5));
    check_well_formed(binary_tree(n, 5));
  }
  CHECK(heap_like_graph(1000, 1).to != heap_like_graph(1000, 2).to);
}

TEST_CASE("generator shapes") {
  CHECK(linked_list(10, 1).from.size() == 9);
  CHECK(doubly_linked_list(10, 1).from.size() == 17);
  CHECK(binary_tree(10, 1).from.size() == 9);
  CHECK(random_graph(1000, 3.0, 1).from.size() == 3000);

  const SyntheticGraph h = heap_like_graph(1'000'000, 1);
  const double per_node = double(h.from.size()) / h.num_nodes;
  CHECK(per_node > 1.8);
  CHECK(per_node < 2.2);
  uint32_t root_edges = 0;
  for (uint32_t f : h.from) root_edges += f == 0;
  CHECK(root_edges >= 200);
  CHECK(root_edges <= 400);
}
