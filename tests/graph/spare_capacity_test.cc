// The spare capacity of vectors (snapshot/spare_capacity.h): which edges a vector header lets the
// graph drop, and each rule that keeps a buffer's edges because a drop could be wrong.
#include <doctest/doctest.h>

#include <vector>

#include "snapshot/heap_snapshot.h"
#include "snapshot/object_graph.h"
#include "snapshot/reachability.h"
#include "snapshot/spare_capacity.h"

using namespace heapsnap;
using snapshot::HeapSnapshot;

namespace {

struct Edge {
  uint32_t to, offset;
};

// Blocks of the given sizes 0x100 apart, each with its edges (start pointers), and one root
// range pointing at the given blocks.
HeapSnapshot make(const std::vector<uint64_t> &sizes, const std::vector<std::vector<Edge>> &edges,
                  const std::vector<uint32_t> &roots) {
  HeapSnapshot s;
  for (size_t b = 0; b < sizes.size(); ++b) {
    s.addr.push_back(0x10000 + 0x100 * b);
    s.size.push_back(sizes[b]);
    s.call_site.push_back(0x400000);
  }
  for (size_t b = 0; b < sizes.size(); ++b) {
    s.edge_begin.push_back(uint32_t(s.edge_target.size()));
    for (const Edge &e : edges[b]) {
      s.edge_target.push_back(e.to);
      s.edge_offset.push_back(e.offset);
      s.edge_interior.push_back(false);
    }
  }
  s.edge_begin.push_back(uint32_t(s.edge_target.size()));
  snapshot::RootRange rr{};
  rr.first = 0;
  rr.count = uint32_t(roots.size());
  s.roots.push_back(rr);
  for (size_t i = 0; i < roots.size(); ++i) {
    s.root_target.push_back(roots[i]);
    s.root_offset.push_back(8 * i);
    s.root_interior.push_back(false);
  }
  return s;
}

// Block 0 (an owner, from the root) holds a vector header for block 1 (capacity 64 bytes, 8
// pointers, size 16: two live); block 1 points at 2 and 3 (live words) and at 4 and 5 (past its
// size). Nothing else points at 4 or 5.
HeapSnapshot vector_heap() {
  return make({24, 64, 8, 8, 8, 8}, {{{1, 0}}, {{2, 0}, {3, 8}, {4, 16}, {5, 56}}, {}, {}, {}, {}}, {0});
}

}  // namespace

TEST_CASE("a vector header drops the edges from its buffer's spare capacity, and only those") {
  HeapSnapshot s = vector_heap();
  s.vectors.push_back({0, false, 16, 64});  // edge 0: block 0 -> block 1
  auto sc = snapshot::spare_capacity_edges(s);
  CHECK(sc.buffers == 1);
  CHECK(sc.dropped == 2);
  REQUIRE(sc.drop.size() == s.edge_target.size());
  CHECK(std::vector<bool>(sc.drop) == std::vector<bool>{false, false, false, true, true});
  // The graph and memcheck's classes agree: 4 and 5 are unreachable, 2 and 3 reachable.
  auto g = snapshot::build_object_graph(s, true, false, false);
  CHECK(g.stats.spare_edges == 2);
  CHECK(g.dom.reachable(snapshot::ObjectGraph::node_of(3)));
  CHECK(!g.dom.reachable(snapshot::ObjectGraph::node_of(4)));
  auto r = snapshot::classify(s, true);
  CHECK(r.state[3] == snapshot::Reach::kReachable);
  CHECK(r.state[4] == snapshot::Reach::kDefinite);
  CHECK(r.state[5] == snapshot::Reach::kDefinite);
}

TEST_CASE("a header from a root counts as one from a block") {
  HeapSnapshot s = make({64, 8, 8}, {{{1, 0}, {2, 8}}, {}, {}}, {0});
  s.vectors.push_back({0, true, 8, 64});  // root pointer 0 -> block 0: size one word
  auto sc = snapshot::spare_capacity_edges(s);
  CHECK(sc.dropped == 1);
  CHECK(sc.drop[1]);
}

TEST_CASE("a buffer's edges stay when a drop could be wrong") {
  auto dropped = [](HeapSnapshot s) { return snapshot::spare_capacity_edges(s).dropped; };
  SUBCASE("capacity other than the buffer's requested size") {
    HeapSnapshot s = vector_heap();
    s.vectors.push_back({0, false, 16, 72});
    CHECK(dropped(s) == 0);
  }
  SUBCASE("size at capacity (no spare room) or past it") {
    HeapSnapshot s = vector_heap();
    s.vectors.push_back({0, false, 64, 64});
    CHECK(dropped(s) == 0);
    s.vectors[0].size = 80;
    CHECK(dropped(s) == 0);
  }
  SUBCASE("size 0: a std::deque's start iterator (cur == first, last) looks like an empty vector") {
    HeapSnapshot s = vector_heap();
    s.vectors.push_back({0, false, 0, 64});
    CHECK(dropped(s) == 0);
  }
  SUBCASE("two headers name the buffer (not one owner), even with the same size") {
    HeapSnapshot s = vector_heap();
    s.vectors.push_back({0, false, 16, 64});
    s.vectors.push_back({0, true, 16, 64});  // the root word points at block 0, not 1: no buffer
    CHECK(dropped(s) == 2);
    s.root_target[0] = 1;  // now the root's header names block 1 too
    CHECK(dropped(s) == 0);
  }
  SUBCASE("an interior pointer is no begin") {
    HeapSnapshot s = vector_heap();
    s.edge_interior[0] = true;
    s.vectors.push_back({0, false, 16, 64});
    CHECK(dropped(s) == 0);
  }
  SUBCASE("a polymorphic buffer (a vtable in its first word)") {
    HeapSnapshot s = vector_heap();
    s.vectors.push_back({0, false, 16, 64});
    s.type.assign(s.blocks(), 0);
    s.type[1] = 1;
    s.type_names.push_back("7Session");
    CHECK(dropped(s) == 0);
  }
  SUBCASE("a stale header in another vector's spare capacity") {
    // Block 1's word at 16 is a header for block 4 (a vector<vector<T>>'s popped element): it
    // names nothing, since it lies past block 1's size.
    HeapSnapshot s = make({24, 64, 8, 8, 64, 8}, {{{1, 0}}, {{2, 0}, {3, 8}, {4, 16}}, {}, {}, {{5, 32}}, {}}, {0});
    s.vectors.push_back({0, false, 16, 64});
    s.vectors.push_back({3, false, 8, 64});  // edge 3: block 1 -> block 4
    auto sc = snapshot::spare_capacity_edges(s);
    CHECK(sc.buffers == 1);
    CHECK(sc.dropped == 1);  // block 1's edge to 4; block 4's own edge stays
    CHECK(sc.drop[3]);
    CHECK(!sc.drop[4]);
  }
  SUBCASE("edge offsets not loaded") {
    HeapSnapshot s = vector_heap();
    s.vectors.push_back({0, false, 16, 64});
    s.edge_offset.clear();
    CHECK(dropped(s) == 0);
  }
  SUBCASE("an offset the child saturated (past 4 GiB)") {
    HeapSnapshot s = vector_heap();
    s.vectors.push_back({0, false, 16, 64});
    s.edge_offset[4] = 0xffffffffu;
    CHECK(dropped(s) == 1);
  }
}
