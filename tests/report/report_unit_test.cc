// The report's aggregation on hand-built inputs: the flame tree merges stacks by frame name and
// keeps its totals when cut to a budget; the heap line keeps its extremes and the exact peak;
// the embedded JSON cannot end its <script> element; the page has every slot filled; the
// snapshots analysed are spread in time and keep the at-peak one; the dominator icicle groups
// blocks by the site key it is given, not by their call-site address.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "report/dominator_icicle.h"
#include "report/flame_tree.h"
#include "report/html_page.h"
#include "report/report_data.h"
#include "report/timeline_series.h"
#include "replay_builder.h"
#include "snapshot/object_graph.h"

namespace rp = heapsnap::report;
using heapsnap::replay::ReplayResult;
using heapsnap::replay::StackSymbolizer;
using heapsnap::testing::add_chain;
using heapsnap::testing::set_figures;

namespace {

// Children of every node, and a check that each node's children add up to no more than it.
void check_consistent(const rp::FlameTree &t) {
  REQUIRE(t.nodes() >= 1);
  std::vector<std::array<double, rp::kFlameMetrics>> kids(t.nodes(), {0, 0, 0, 0});
  for (size_t v = 1; v < t.nodes(); ++v) {
    REQUIRE(t.parent[v] < v);  // parents first
    for (int m = 0; m < rp::kFlameMetrics; ++m) kids[t.parent[v]][m] += t.value[v][m];
  }
  for (size_t v = 0; v < t.nodes(); ++v)
    for (int m = 0; m < rp::kFlameMetrics; ++m) CHECK(kids[v][m] <= t.value[v][m] + 1e-6);
}

}  // namespace

TEST_CASE("flame tree: stacks merge by frame name under the same caller; inclusive figures") {
  ReplayResult r;
  r.have_process = true;
  r.modules.push_back({1, "/nonexistent/app", 0x0, "", {{0x1000, 0x2000}}, 0, UINT64_MAX});
  uint32_t mainf = add_chain(r, 0, {0x1100});
  uint32_t a = add_chain(r, mainf, {0x1200});
  uint32_t b = add_chain(r, mainf, {0x1300});
  add_chain(r, mainf, {0x1200});  // a second stack-tree node, same address: the same frame
  set_figures(r, a, 2, 200, 1, 50);
  set_figures(r, b, 1, 100, 0, 0);
  set_figures(r, mainf, 1, 10, 0, 0);  // main allocates itself
  StackSymbolizer sym(r.modules);
  rp::FlameTree t = rp::build_flame_tree(r, sym);
  // root, main, app+0x1200, app+0x1300 (the duplicate merged)
  CHECK(t.nodes() == 4);
  CHECK(t.value[0][rp::kAllocBytes] == 310);
  CHECK(t.value[0][rp::kAllocCalls] == 4);
  CHECK(t.value[0][rp::kLeakedBytes] == 50);
  CHECK(t.names[t.name[1]] == "app+0x1100");
  CHECK(t.value[1][rp::kAllocBytes] == 310);
  check_consistent(t);
}

TEST_CASE("flame tree budget: at most N nodes, totals kept, the tail merged into [other]") {
  ReplayResult r;
  r.have_process = true;
  r.modules.push_back({1, "/nonexistent/app", 0x0, "", {{0x1000, 0x100000}}, 0, UINT64_MAX});
  uint32_t root = add_chain(r, 0, {0x1000});
  // 50 callers with 20 callees each, figures falling off geometrically; one small caller leaks.
  double total_bytes = 0, total_calls = 0, total_leak = 0;
  for (int i = 0; i < 50; ++i) {
    uint32_t caller = add_chain(r, root, {0x2000 + uint64_t(i) * 0x100});
    for (int j = 0; j < 20; ++j) {
      uint32_t leaf = add_chain(r, caller, {0x80000 + uint64_t(i) * 0x1000 + uint64_t(j) * 0x10});
      double bytes = 1e6 / (1 + i * 20 + j), leak = (i == 49 && j == 0) ? 5000 : 0;
      set_figures(r, leaf, 1, bytes, leak > 0 ? 1 : 0, leak);
      total_bytes += bytes;
      total_calls += 1;
      total_leak += leak;
    }
  }
  StackSymbolizer sym(r.modules);
  rp::FlameTree full = rp::build_flame_tree(r, sym);
  CHECK(full.nodes() == 1 + 1 + 50 + 50 * 20);
  for (size_t budget : {2u, 3u, 10u, 57u, 200u, 5000u}) {
    CAPTURE(budget);
    rp::FlameTree t = rp::prune_flame_tree(full, {budget, 300});
    CHECK(t.nodes() <= std::max<size_t>(budget, 2));
    CHECK(t.value[0][rp::kAllocBytes] == doctest::Approx(total_bytes));
    CHECK(t.value[0][rp::kAllocCalls] == total_calls);
    CHECK(t.value[0][rp::kLeakedBytes] == total_leak);
    check_consistent(t);
    // The children of every kept node add up to it again ([other] holds the rest).
    std::vector<double> kids(t.nodes(), 0);
    for (size_t v = 1; v < t.nodes(); ++v) kids[t.parent[v]] += t.value[v][rp::kAllocCalls];
    for (size_t v = 0; v < t.nodes(); ++v)
      if (kids[v] > 0) CHECK(kids[v] == doctest::Approx(t.value[v][rp::kAllocCalls]));
    if (budget >= full.nodes()) {
      CHECK(t.nodes() == full.nodes());
      CHECK(std::none_of(t.other.begin(), t.other.end(), [](bool o) { return o; }));
    }
  }
  // With room for a few dozen nodes, the one leaking stack is still its own node: the budget
  // ranks by every metric, not bytes alone.
  rp::FlameTree t = rp::prune_flame_tree(full, {60, 300});
  bool leak_named = false;
  for (size_t v = 0; v < t.nodes(); ++v)
    if (!t.other[v] && t.value[v][rp::kLeakedBytes] == 5000 && t.names[t.name[v]] == "app+0xb1000") leak_named = true;
  CHECK(leak_named);
}

TEST_CASE("flame tree: long names are cut at a character boundary") {
  rp::FlameTree full;
  full.names = {"all", std::string(10, 'x') + "\xc3\xa9\xc3\xa9"};  // "é" is two bytes
  full.add(0, 0);
  full.add(0, 1);
  full.value[0] = {1, 1, 0, 0};
  full.value[1] = {1, 1, 0, 0};
  rp::FlameTree t = rp::prune_flame_tree(full, {10, 11});
  REQUIRE(t.nodes() == 2);
  CHECK(t.names[t.name[1]] == std::string(10, 'x') + "...");
}

TEST_CASE("heap line: extremes of every bucket and the exact peak survive thinning") {
  std::vector<heapsnap::replay::TimePoint> pts;
  for (uint64_t i = 0; i < 100000; ++i) {
    int64_t heap = int64_t(i % 1000);             // a saw tooth
    if (i == 77777) heap = 5000000;                // one spike
    pts.push_back({i * 1000, heap, 4096 + i, i, 0});
  }
  auto out = rp::thin_timeline(pts, 77777500, 6000000, 100);
  CHECK(out.size() <= 3 * 100 + 2);
  CHECK(out.front().time_ns == 0);
  bool spike = false, peak = false;
  for (size_t i = 0; i < out.size(); ++i) {
    if (i) CHECK(out[i - 1].time_ns <= out[i].time_ns);
    spike |= out[i].heap_bytes == 5000000;
    peak |= out[i].time_ns == 77777500 && out[i].heap_bytes == 6000000;
  }
  CHECK(spike);
  CHECK(peak);
  CHECK(out.back().rss_bytes == 4096 + 99999);  // the last bucket's highest RSS
  auto few = rp::thin_timeline({pts.begin(), pts.begin() + 10}, 0, 0, 100);
  CHECK(few.size() == 10);  // the first point is at time 0 already
}

TEST_CASE("heap line between the totals records: the events' changes, exact or corrected to the records") {
  namespace rpl = heapsnap::replay;
  const uint64_t ms = 1000000;
  // Totals at 100 ms and 200 ms; the events: +1000 at 10 ms, +500 at 50 ms, -300 at 150 ms.
  std::vector<rpl::TimePoint> totals = {{100 * ms, 1200, 8000, 0, 0}, {200 * ms, 1200, 9000, 0, 0}};
  rpl::HeapCells cells;
  cells.shift = 20;  // ~1 ms cells
  cells.delta.assign(151 * ms >> 20, 0.0);
  cells.delta[(10 * ms) >> 20] += 1000;
  cells.delta[(50 * ms) >> 20] += 500;
  cells.delta[(150 * ms) >> 20] -= 300;
  auto at = [](const std::vector<rpl::TimePoint> &pts, uint64_t t) {  // the last point at or before t
    const rpl::TimePoint *p = nullptr;
    for (const auto &x : pts)
      if (x.time_ns <= t) p = &x;
    return p;
  };
  // Every allocation recorded: the events are the heap, at the records too (theirs lag).
  auto exact = rp::heap_points(totals, cells, true, 210 * ms, 1500);
  for (size_t i = 1; i < exact.size(); ++i) CHECK(exact[i - 1].time_ns <= exact[i].time_ns);
  CHECK(at(exact, 12 * ms)->heap_bytes == 1000);
  CHECK(at(exact, 60 * ms)->heap_bytes == 1500);
  CHECK(at(exact, 100 * ms)->heap_bytes == 1500);  // the record said 1200
  CHECK(at(exact, 100 * ms)->rss_bytes == 8000);   // its RSS stays
  CHECK(at(exact, 160 * ms)->heap_bytes == 1200);
  // A level held 40 ms, then a change: a step (a point where the level ends), not a slope.
  const rpl::TimePoint *held = at(exact, 50 * ms - 1);  // (the 50 ms cell starts at 49.3 ms)
  CHECK(held->heap_bytes == 1000);
  CHECK(held->time_ns >= 45 * ms);
  // Sampled: the events' shape, corrected to pass through the records.
  auto sampled = rp::heap_points(totals, cells, false, 210 * ms, 1500);
  CHECK(at(sampled, 100 * ms)->heap_bytes == 1200);
  CHECK(at(sampled, 200 * ms)->heap_bytes == 1200);
  // Between them, the correction goes from -300 (at 100 ms: 1200 - 1500) to 0 (at 200 ms).
  const rpl::TimePoint *p = at(sampled, 160 * ms);
  CHECK(p->time_ns > 150 * ms);
  CHECK(p->heap_bytes == std::llround(1200 - 300 + 300 * double(p->time_ns - 100 * ms) / double(100 * ms)));
  for (const auto &p : sampled) CHECK(p.heap_bytes >= 0);
  for (const auto &p : sampled) CHECK(p.heap_bytes <= 1500);
  // No cells (another command's replay): the records alone.
  CHECK(rp::heap_points(totals, {}, true, 210 * ms, 1500).size() == totals.size());
}

TEST_CASE("frame kinds: the program's, a library's, the allocator's, unknown") {
  heapsnap::replay::DisplayFrame f;
  f.function = "make_entry";
  f.module = "app";
  CHECK(rp::frame_kind(f, "/usr/bin/app") == rp::kProgramFrame);
  f.module = "libfoo.so.1";
  CHECK(rp::frame_kind(f, "/usr/bin/app") == rp::kLibraryFrame);
  f.module = "app";
  f.library = true;  // the frame filter says so (--hide-frames, the C run time)
  CHECK(rp::frame_kind(f, "/usr/bin/app") == rp::kLibraryFrame);
  f.library = false;
  for (const char *fn : {"malloc", "operator new(unsigned long)", "Arena::operator new[](unsigned long)",
                         "std::__new_allocator<int>::allocate(unsigned long, void const*)"}) {
    f.function = fn;
    CAPTURE(fn);
    CHECK(rp::frame_kind(f, "/usr/bin/app") == rp::kAllocatorFrame);
  }
  f.function = "work";
  f.module = "libjemalloc.so.2";
  CHECK(rp::frame_kind(f, "/usr/bin/app") == rp::kAllocatorFrame);
  f.function = "";
  CHECK(rp::frame_kind(f, "/usr/bin/app") == rp::kUnknownFrame);
  f.file = "/src/app/main.cc";
  f.line = 12;
  CHECK(rp::frame_location(f) == "main.cc:12");
}

TEST_CASE("JSON in a script element: no way out of it, invalid UTF-8 replaced") {
  nlohmann::ordered_json j;
  j["title"] = "</script><script>alert(1)</script><!-- & \xff";
  std::string s = rp::json_for_script(j);
  CHECK(s.find('<') == std::string::npos);
  CHECK(s.find('>') == std::string::npos);
  CHECK(s.find('&') == std::string::npos);
  auto back = nlohmann::json::parse(s);
  CHECK(back["title"].get<std::string>() == "</script><script>alert(1)</script><!-- & \xef\xbf\xbd");
  CHECK(rp::html_escape("<a href=\"x\">'&'</a>") == "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
}

TEST_CASE("page: every slot filled, data and title inlined once") {
  nlohmann::ordered_json j;
  j["title"] = "app </title> @@DATA@@";
  std::string page = rp::render_html(j);
  CHECK(page.find("@@TITLE@@") == std::string::npos);
  CHECK(page.find("/*@@CSS@@*/") == std::string::npos);
  CHECK(page.find("/*@@JS@@*/") == std::string::npos);
  CHECK(page.find("<title>heapsnap report: app &lt;/title&gt; @@DATA@@</title>") != std::string::npos);
  CHECK(page.find("id=\"heapsnap-data\">{\"title\":\"app \\u003c/title\\u003e @@DATA@@\"}</script>") != std::string::npos);
  CHECK(page.find("Content-Security-Policy") != std::string::npos);
  // Nothing that would fetch: no external scripts, styles or images.
  CHECK(page.find("<script src") == std::string::npos);
  CHECK(page.find("<link") == std::string::npos);
}

TEST_CASE("snapshots analysed: spread in time, the at-peak one always kept") {
  using heapsnap::snapshot::SnapshotInfo;
  // Six complete snapshots taken at 10..60 ms, one incomplete; the at-peak snapshot (index 7,
  // appended at the end) was taken at 35 ms.
  std::vector<SnapshotInfo> list;
  auto add = [&](uint32_t index, uint64_t ms, int trigger, bool complete) {
    SnapshotInfo s;
    s.index = index;
    s.have_begin = s.have_end = true;
    s.time_ns = ms * 1000000;
    s.trigger = trigger;
    s.end.set_complete(complete);
    list.push_back(s);
  };
  for (uint32_t i = 1; i <= 5; ++i) add(i, 10 * i, heapsnap::wire::TRIGGER_PERIODIC, true);
  add(6, 60, heapsnap::wire::TRIGGER_EXIT, true);
  add(7, 35, heapsnap::wire::TRIGGER_PEAK, true);
  add(8, 70, heapsnap::wire::TRIGGER_EXIT, false);
  CHECK(rp::choose_snapshots(list, 10) == std::vector<uint32_t>{1, 2, 3, 7, 4, 5, 6});
  CHECK(rp::choose_snapshots(list, 1) == std::vector<uint32_t>{7});
  CHECK(rp::choose_snapshots(list, 0).empty());
  // Four: first and last kept; the at-peak one in place of the pick nearest it in time (3 or 4,
  // both 5 ms away: the earlier).
  CHECK(rp::choose_snapshots(list, 4) == std::vector<uint32_t>{1, 7, 4, 6});
  // Two: first and last, then the at-peak one too (one more than asked, rather than no answer).
  CHECK(rp::choose_snapshots(list, 2) == std::vector<uint32_t>{1, 7, 6});
  list.pop_back();
  list.erase(list.begin() + 6);  // no at-peak snapshot
  CHECK(rp::choose_snapshots(list, 4) == std::vector<uint32_t>{1, 3, 4, 6});
}

namespace {

// A snapshot whose six blocks share one call site (the library's allocate(), as every
// std::vector of a program does) and come from three program sites: roots -> 0, 1, 2; 0 -> 3,
// 1 -> 4, 2 -> 5.
heapsnap::snapshot::HeapSnapshot one_call_site_snapshot() {
  heapsnap::snapshot::HeapSnapshot s;
  const uint64_t sizes[6] = {100, 100, 50, 10, 10, 1000};
  for (uint32_t b = 0; b < 6; ++b) {
    s.addr.push_back(0x10000 + 0x1000 * b);
    s.size.push_back(sizes[b]);
    s.call_site.push_back(0x4000);
  }
  s.edge_begin = {0, 1, 2, 3, 3, 3, 3};
  s.edge_target = {3, 4, 5};
  s.edge_offset = {0, 0, 8};
  s.edge_interior = {false, false, false};
  heapsnap::snapshot::RootRange rr{};
  rr.kind = heapsnap::snapshot::kGlobal;
  rr.start = 0x1000;
  rr.length = 24;
  rr.first = 0;
  rr.count = 3;
  s.roots.push_back(rr);
  s.root_target = {0, 1, 2};
  s.root_offset = {0, 8, 16};
  s.root_interior = {false, false, false};
  return s;
}

}  // namespace

TEST_CASE("dominator icicle: one group per site key, whatever the call-site address") {
  auto s = one_call_site_snapshot();
  heapsnap::snapshot::ObjectGraph g = heapsnap::snapshot::build_object_graph(s, true, true);
  // Blocks 0 and 1 from one program line (site 1), block 2 from another (2), their children from a third (3).
  const std::vector<uint32_t> site_of = {1, 1, 2, 3, 3, 3};
  rp::IcicleBudget budget;
  budget.min_share = 0;
  const rp::SiteIcicle ic = rp::dominator_icicle(s, g, site_of, budget);
  REQUIRE(ic.nodes() == 5);  // root; sites 2 and 1; site 3 under each
  CHECK(ic.site[0] == rp::kNoSite);
  CHECK(ic.retained[0] == 1270);
  // The root's children, biggest first: site 2 (block 2 and its 1000-byte child), then site 1.
  CHECK(ic.parent[1] == 0);
  CHECK(ic.site[1] == 2);
  CHECK(ic.retained[1] == 1050);
  CHECK(ic.objects[1] == 1);
  CHECK(ic.parent[2] == 0);
  CHECK(ic.site[2] == 1);
  CHECK(ic.retained[2] == 220);
  CHECK(ic.objects[2] == 2);
  CHECK(ic.shallow[2] == 200);
  // Site 3 under each: the children of site 2's block, and those of site 1's two blocks, in one group.
  CHECK(ic.site[3] == 3);
  CHECK(ic.parent[3] == 1);
  CHECK(ic.retained[3] == 1000);
  CHECK(ic.site[4] == 3);
  CHECK(ic.parent[4] == 2);
  CHECK(ic.objects[4] == 2);
  CHECK(ic.retained[4] == 20);
  for (size_t v = 0; v < ic.nodes(); ++v) CHECK(!ic.other[v]);
}

TEST_CASE("dominator icicle: blocks without a site key are grouped apart, never read past the keys") {
  auto s = one_call_site_snapshot();
  heapsnap::snapshot::ObjectGraph g = heapsnap::snapshot::build_object_graph(s, true, true);
  const std::vector<uint32_t> site_of = {5, 5};  // blocks 2..5 have none (a short or damaged key column)
  rp::IcicleBudget budget;
  budget.min_share = 0;
  const rp::SiteIcicle ic = rp::dominator_icicle(s, g, site_of, budget);
  REQUIRE(ic.nodes() >= 3);
  CHECK(ic.site[1] == rp::kNoSite);  // block 2: 1050 bytes, no key
  CHECK(ic.retained[1] == 1050);
  CHECK(ic.site[2] == 5);
  CHECK(ic.objects[2] == 2);
}
