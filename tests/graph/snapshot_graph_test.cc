// The snapshot side of the graph engine: narrow block columns (and their side tables for the
// values that do not fit in 32 bits), a capture with such blocks read back, and the object graph
// built each way (snapshot edges copied or taken over, CSR kept or consumed by the dominators).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "capture/capture_file_writer.h"
#include "snapshot/heap_snapshot.h"
#include "snapshot/object_graph.h"
#include "snapshot/reachability.h"

using namespace heapsnap;
using snapshot::HeapSnapshot;
using snapshot::ObjectGraph;

namespace {

constexpr uint64_t GiB = uint64_t(1) << 30;

// A block of the test snapshot and its pointers (block numbers; interior pointers marked).
struct Block {
  uint64_t addr, size, site;
  std::vector<std::pair<uint32_t, bool>> to;
};

struct Capture {
  std::vector<Block> blocks;
  std::vector<std::pair<uint32_t, bool>> roots;  // one global root range
};

// A capture file in /tmp, removed when the test case ends (failed or not).
struct TempCapture {
  std::string path;
  explicit TempCapture(const std::string &name)
      : path("/tmp/heapsnap_snapshot_graph_test_" + std::to_string(getpid()) + "_" + name + ".hsnap") {
    std::remove(path.c_str());
  }
  ~TempCapture() { std::remove(path.c_str()); }
};

// Writes c as a capture holding snapshot 0, blocks and edges split over several records.
void write_capture(const Capture &c, const std::string &path) {
  capture::CaptureFileWriter w(path, 1, 0, 1);
  REQUIRE(w.ok());
  wire::Record r;
  r.mutable_process()->set_pid(1);
  r.mutable_process()->set_executable("test");
  w.add(r);
  r.Clear();
  r.mutable_snapshot_begin()->set_index(0);
  r.mutable_snapshot_begin()->mutable_totals()->set_live_blocks(c.blocks.size());
  w.add(r);
  const uint32_t n = uint32_t(c.blocks.size());
  for (uint32_t first = 0; first < n; first += 3) {
    r.Clear();
    auto *sb = r.mutable_snapshot_blocks();
    sb->set_index(0);
    sb->set_first_block(first);
    uint64_t prev = 0, prev_site = 0;  // each record starts against 0
    for (uint32_t i = first; i < std::min(n, first + 3); ++i) {
      sb->add_addr_delta(int64_t(c.blocks[i].addr - prev));
      sb->add_size(c.blocks[i].size);
      sb->add_call_site_delta(int64_t(c.blocks[i].site - prev_site));
      sb->add_stack(i);
      sb->add_id(i);
      sb->add_time_ms(0);
      prev = c.blocks[i].addr;
      prev_site = c.blocks[i].site;
    }
    w.add(r);
  }
  for (uint32_t first = 0; first < n; first += 4) {
    r.Clear();
    auto *se = r.mutable_snapshot_edges();
    se->set_index(0);
    se->set_base_block(first);
    uint32_t prev = first;
    uint64_t ordinal = 0, last_interior = 0;
    bool any_interior = false;
    for (uint32_t i = first; i < std::min(n, first + 4); ++i) {
      if (c.blocks[i].to.empty()) continue;
      se->add_from_delta(i - prev);
      prev = i;
      se->add_count(uint32_t(c.blocks[i].to.size()));
      for (size_t k = 0; k < c.blocks[i].to.size(); ++k, ++ordinal) {
        se->add_to_delta(int64_t(c.blocks[i].to[k].first) - int64_t(i));
        se->add_offset(uint32_t(8 * k));
        if (c.blocks[i].to[k].second) {
          se->add_interior_edge(any_interior ? ordinal - last_interior : ordinal);
          last_interior = ordinal;
          any_interior = true;
        }
      }
    }
    if (se->count_size()) w.add(r);
  }
  r.Clear();
  auto *rt = r.mutable_snapshot_roots();
  rt->set_index(0);
  rt->set_kind(wire::ROOT_GLOBAL);
  rt->set_name("globals");
  rt->set_start(0x1000);
  rt->set_length(8 * c.roots.size());
  int64_t prev_t = 0;
  uint64_t last_interior = 0;
  bool any_interior = false;
  for (size_t k = 0; k < c.roots.size(); ++k) {
    rt->add_target_delta(int64_t(c.roots[k].first) - prev_t);
    prev_t = c.roots[k].first;
    rt->add_root_offset(k ? 8 : 0);
    if (c.roots[k].second) {
      rt->add_interior_edge(any_interior ? k - last_interior : k);
      last_interior = k;
      any_interior = true;
    }
  }
  w.add(r);
  r.Clear();
  r.mutable_snapshot_end()->set_index(0);
  r.mutable_snapshot_end()->set_blocks(n);
  r.mutable_snapshot_end()->set_complete(true);
  w.add(r);
  REQUIRE(w.close());
}

HeapSnapshot load(const std::string &path) {
  std::string err;
  auto reader = capture::CaptureReader::open(path, &err);
  REQUIRE(reader);
  HeapSnapshot s;
  const bool ok = snapshot::load_snapshot(*reader, 0, &s, &err);
  CAPTURE(err);
  REQUIRE(ok);
  CHECK(err.empty());
  return s;
}

// Retained bytes by brute force: v retains the blocks that no root reaches once v is removed.
std::vector<uint64_t> brute_retained(const Capture &c, bool follow_interior) {
  const uint32_t n = uint32_t(c.blocks.size());
  auto reach = [&](uint32_t removed) {
    std::vector<bool> seen(n, false);
    std::vector<uint32_t> stack;
    for (auto [t, interior] : c.roots)
      if ((follow_interior || !interior) && t != removed && !seen[t]) seen[t] = true, stack.push_back(t);
    while (!stack.empty()) {
      const uint32_t v = stack.back();
      stack.pop_back();
      for (auto [t, interior] : c.blocks[v].to)
        if ((follow_interior || !interior) && t != removed && !seen[t]) seen[t] = true, stack.push_back(t);
    }
    return seen;
  };
  const std::vector<bool> all = reach(UINT32_MAX);
  std::vector<uint64_t> out(n, 0);
  for (uint32_t v = 0; v < n; ++v) {
    if (!all[v]) continue;
    const std::vector<bool> without = reach(v);
    for (uint32_t u = 0; u < n; ++u)
      if (all[u] && !without[u]) out[v] += c.blocks[u].size;
  }
  return out;
}

// A heap with blocks of 4 GiB and more, addresses 4 GiB and more apart inside one 256-block
// chunk and across chunks, call site 0 and the largest one, interior pointers, cycles, a block
// no root reaches, and a block several roots point at.
Capture wide_capture() {
  Capture c;
  std::mt19937_64 rng(7);
  uint64_t a = 0x10000;
  const uint64_t sites[] = {0, 0x401000, 0x401000, 0x402000, UINT64_MAX, 0x401000};
  for (uint32_t i = 0; i < 600; ++i) {
    uint64_t size = 16 + rng() % 512;
    if (i % 97 == 5) size = 5 * GiB + i;                // a side-table size
    if (i == 7) size = uint64_t(UINT32_MAX);            // the first value that does not fit
    if (i == 8) size = uint64_t(UINT32_MAX) - 1;        // the last one that does
    if (i == 9) size = 0;
    Block b{a, size, sites[i % 6], {}};
    c.blocks.push_back(b);
    a += std::max<uint64_t>(size, 1) + 16;
    if (i % 50 == 49) a += 6 * GiB;                     // far apart, mid-chunk
    if (i == 300) a += uint64_t(1) << 44;
  }
  const uint32_t n = uint32_t(c.blocks.size());
  for (uint32_t i = 0; i + 1 < n; ++i) {
    if (i % 40 == 39) continue;                         // runs of lists...
    c.blocks[i].to.push_back({i + 1, i % 7 == 3});      // ...some links interior
    if (i % 5 == 0) c.blocks[i + 1].to.push_back({i, false});  // back pointers
    if (i % 11 == 0) c.blocks[i].to.push_back({uint32_t(rng() % n), false});
  }
  for (Block &b : c.blocks)  // nothing points at block 333: it and what only it holds are garbage
    b.to.erase(std::remove_if(b.to.begin(), b.to.end(), [](auto &e) { return e.first == 333; }), b.to.end());
  for (uint32_t i = 0; i < n; i += 40) c.roots.push_back({i, i % 80 == 40});
  c.roots.push_back({0, false});  // a block two root pointers hold
  c.roots.push_back({120, true});
  std::sort(c.roots.begin(), c.roots.end());
  return c;
}

}  // namespace

TEST_CASE("narrow block columns give every 64-bit value back") {
  SUBCASE("addresses") {
    snapshot::AddressColumn col;
    std::vector<uint64_t> plain;
    uint64_t a = 0;
    std::mt19937_64 rng(1);
    for (int i = 0; i < 5000; ++i) {
      a += 1 + rng() % 4096;
      if (i % 300 == 17) a += 5 * GiB;        // a far jump inside a chunk
      if (i == 4000) a = UINT64_MAX - (uint64_t(1) << 40);  // near the top of the address space
      plain.push_back(a);
      col.push_back(a);
    }
    REQUIRE(col.size() == plain.size());
    CHECK(col.wide_count() > 0);
    size_t wrong = 0;
    for (size_t i = 0; i < plain.size(); ++i) wrong += col[i] != plain[i];
    CHECK(wrong == 0);
    CHECK(col.back() == plain.back());
    for (uint64_t probe : {uint64_t(0), plain[0] - 1, plain[0], plain[0] + 1, plain[1234], plain[1234] + 1,
                           plain[4000] - 1, plain[4000], plain.back(), UINT64_MAX}) {
      CAPTURE(probe);
      CHECK(col.upper_bound(probe) == size_t(std::upper_bound(plain.begin(), plain.end(), probe) - plain.begin()));
    }
    for (int i = 0; i < 2000; ++i) {
      const uint64_t probe = plain[rng() % plain.size()] + rng() % 3 - 1;
      CHECK(col.upper_bound(probe) == size_t(std::upper_bound(plain.begin(), plain.end(), probe) - plain.begin()));
    }
  }
  SUBCASE("sizes") {
    snapshot::SizeColumn col;
    const std::vector<uint64_t> plain = {0, 1, UINT32_MAX - 1, UINT32_MAX, uint64_t(UINT32_MAX) + 1, 5 * GiB, 16,
                                         UINT64_MAX, 4096};
    for (uint64_t v : plain) col.push_back(v);
    CHECK(col.wide_count() == 4);
    for (size_t i = 0; i < plain.size(); ++i) CHECK(col[i] == plain[i]);
  }
  SUBCASE("call sites are interned") {
    snapshot::SiteColumn col;
    const std::vector<uint64_t> plain = {0x400, 0x400, 0, 0x500, 0x400, UINT64_MAX, 0, 0x500, 0x600, 0x400};
    for (uint64_t v : plain) col.push_back(v);
    col.done_loading();
    for (size_t i = 0; i < plain.size(); ++i) CHECK(col[i] == plain[i]);
    CHECK(col.sites() == std::vector<uint64_t>{0x400, 0, 0x500, UINT64_MAX, 0x600});
    CHECK(col.index(7) == 2);
  }
}

TEST_CASE("a snapshot with blocks of 4 GiB and more, far apart, reads back exactly") {
  const Capture c = wide_capture();
  const TempCapture file("wide");
  write_capture(c, file.path);
  const HeapSnapshot s = load(file.path);
  REQUIRE(s.blocks() == c.blocks.size());
  CHECK(s.size.wide_count() >= 5);
  CHECK(s.addr.wide_count() > 0);
  size_t wrong = 0;
  for (uint32_t b = 0; b < s.blocks(); ++b)
    wrong += s.addr[b] != c.blocks[b].addr || s.size[b] != c.blocks[b].size || s.call_site[b] != c.blocks[b].site ||
             s.stack[b] != b;
  CHECK(wrong == 0);
  // find: start and interior addresses, and addresses between blocks.
  for (uint32_t b = 0; b < s.blocks(); b += 7) {
    CHECK(s.find(c.blocks[b].addr) == b);
    CHECK(s.find(c.blocks[b].addr + std::max<uint64_t>(c.blocks[b].size, 1) - 1) == b);
    CHECK(s.find(c.blocks[b].addr + std::max<uint64_t>(c.blocks[b].size, 1) + 8) == UINT32_MAX);
  }
  CHECK(s.find(0) == UINT32_MAX);
}

TEST_CASE("the object graph is the same whichever way it is built") {
  const Capture c = wide_capture();
  const TempCapture file("graph");
  write_capture(c, file.path);
  const std::string &path = file.path;
  for (bool follow_interior : {true, false}) {
    CAPTURE(follow_interior);
    const std::vector<uint64_t> expect = brute_retained(c, follow_interior);
    // Reference: snapshot edges copied, CSR kept.
    HeapSnapshot s0 = load(path);
    const ObjectGraph g0 = snapshot::build_object_graph(s0, follow_interior, true, false);
    REQUIRE(g0.csr.num_nodes == c.blocks.size() + 1);
    size_t wrong = 0;
    for (uint32_t b = 0; b < c.blocks.size(); ++b) wrong += g0.retained.bytes[ObjectGraph::node_of(b)] != expect[b];
    CHECK(wrong == 0);
    if (follow_interior) CHECK(g0.retained.bytes[1] > 10 * GiB);  // block 0 holds 5 GiB blocks
    CHECK(s0.edge_target.size() > 0);        // still there
    // Root ranges: the only range, for exactly the blocks a followed root pointer holds.
    for (uint32_t b = 0; b < c.blocks.size(); ++b) {
      bool rooted = false;
      for (auto [t, interior] : c.roots) rooted |= t == b && (follow_interior || !interior);
      CHECK(g0.root_range[ObjectGraph::node_of(b)] == (rooted ? 0u : UINT32_MAX));
    }
    CHECK(g0.root_range[0] == UINT32_MAX);
    CHECK(g0.root_range.size() == g0.csr.num_nodes);

    for (bool release : {false, true})
      for (bool keep_csr : {false, true}) {
        CAPTURE(release);
        CAPTURE(keep_csr);
        HeapSnapshot s = load(path);
        snapshot::GraphOptions o;
        o.follow_interior = follow_interior;
        o.with_children = true;
        o.release_edges = release;
        o.keep_csr = keep_csr;
        const ObjectGraph g = snapshot::build_object_graph(s, o);
        CHECK(g.csr.num_nodes == g0.csr.num_nodes);
        CHECK(g.dom.idom == g0.dom.idom);
        CHECK(g.dom.preorder == g0.dom.preorder);
        CHECK(g.retained.bytes == g0.retained.bytes);
        CHECK(g.retained.count == g0.retained.count);
        CHECK(g.children.offsets == g0.children.offsets);
        CHECK(g.children.targets == g0.children.targets);
        CHECK(g.stats.edges == g0.stats.edges);
        if (keep_csr) {
          CHECK(g.csr.offsets == g0.csr.offsets);
          CHECK(g.csr.targets == g0.csr.targets);
        } else {
          CHECK(g.csr.targets.empty());
        }
        CHECK(s.edge_target.empty() == release);
        CHECK(s.edge_begin.empty() == release);
      }
  }
}

// The leak node's cliques are made from what the dominators' DFS reached (leak_cliques_unreached)
// instead of a reachability pass of their own (leak_cliques): the same leaders, cycles and counts.
TEST_CASE("leak cliques from a given reached set equal those of leak_cliques' own pass") {
  std::mt19937_64 rng(4242);
  auto below = [&](uint32_t n) { return uint32_t(rng() % n); };
  for (int round = 0; round < 2000; ++round) {
    CAPTURE(round);
    const uint32_t blocks = 1 + below(round < 1500 ? 40 : 2000);
    const uint32_t n = blocks + 2;  // super root 0, blocks 1 .. blocks, one more node after them
    std::vector<uint32_t> from, to;
    const uint32_t m = uint32_t((0.3 + double(below(30)) / 10) * blocks);
    for (uint32_t i = 0; i < m; ++i) {
      from.push_back(below(n));
      to.push_back(below(n));
    }
    for (uint32_t i = 0, roots = below(4); i < roots; ++i) {
      from.push_back(0);
      to.push_back(1 + below(blocks));
    }
    const graph::CsrGraph g = graph::build_csr(n, from, to);
    std::vector<uint32_t> reached(n, UINT32_MAX);
    std::vector<uint32_t> stack{0};
    reached[0] = 0;
    while (!stack.empty()) {
      const uint32_t v = stack.back();
      stack.pop_back();
      for (uint32_t t : g.successors(v))
        if (reached[t] == UINT32_MAX) reached[t] = 1, stack.push_back(t);
    }
    const snapshot::LeakCliques a = snapshot::leak_cliques(g, 1, blocks, 0);
    const snapshot::LeakCliques b = snapshot::leak_cliques_unreached(graph::DfsView::over(g, reached), 1, blocks);
    CHECK(a.leader == b.leader);
    CHECK(a.cycle == b.cycle);
    CHECK(a.unreachable == b.unreachable);
  }
}
