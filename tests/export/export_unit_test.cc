// The exporters on a replay result built by hand: collapsed-stack names and lines, and the
// structure pprof readers rely on (string_table[0] "", ids that resolve, leaf-first locations
// shared between stacks, one Location per address), and a gzip that inflates back.
#include <doctest/doctest.h>
#include <zlib.h>

#include <set>
#include <string>
#include <vector>

#include "export/collapsed.h"
#include "export/gzip.h"
#include "export/pprof.h"
#include "replay_builder.h"

namespace ex = heapsnap::exporter;
namespace pp = perftools::profiles;
using heapsnap::replay::DisplayFrame;
using heapsnap::replay::ReplayResult;
using heapsnap::replay::StackSymbolizer;
using heapsnap::testing::add_chain;
using heapsnap::testing::set_figures;

namespace {

// Three stacks: main -> f -> leaf A, main -> f -> leaf B (sharing main and f), and a stack cut at
// the maximum depth (the 0 marker outermost). Module "app" (a file that does not exist, so
// frames are "app+0x...") covers 0x1000..0x2000; 0x9000 is in no module.
struct Fixture {
  ReplayResult r;
  uint32_t leaf_a, leaf_b, leaf_cut;
  Fixture() {
    r.have_process = true;
    r.process.set_sample_bytes(1);
    r.process.set_executable("/nonexistent/app");
    r.modules.push_back({1, "/nonexistent/app", 0x0, std::string("\xab\xcd", 2), {{0x1000, 0x2000}}, 0, UINT64_MAX});
    uint32_t f = add_chain(r, 0, {0x1100, 0x1200});  // main, f
    leaf_a = add_chain(r, f, {0x1300});
    leaf_b = add_chain(r, f, {0x9000});
    leaf_cut = add_chain(r, 0, {0, 0x1400});
    set_figures(r, leaf_a, 3, 300, 1, 100);
    set_figures(r, leaf_b, 2.4, 20.6, 0, 1e-9);  // float noise in "live" rounds to nothing
    set_figures(r, leaf_cut, 1, 8, 0, 0);
    set_figures(r, f, 0, 0, 0, 0);  // an interior node with no figures of its own
  }
};

std::string inflate_gzip(const std::string &gz, size_t max_size) {
  z_stream zs{};
  REQUIRE(inflateInit2(&zs, 15 + 16) == Z_OK);
  std::string out(max_size + 1, '\0');
  zs.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(gz.data()));
  zs.avail_in = uInt(gz.size());
  zs.next_out = reinterpret_cast<Bytef *>(out.data());
  zs.avail_out = uInt(out.size());
  int rc = inflate(&zs, Z_FINISH);
  inflateEnd(&zs);
  REQUIRE(rc == Z_STREAM_END);
  out.resize(zs.total_out);
  return out;
}

}  // namespace

TEST_CASE("collapsed frame names: separators and line breaks replaced, spaces kept") {
  DisplayFrame f;
  f.module = "app";
  f.address = 0x1234;
  f.function = "ns::f<a;b>(int, char const*)";
  CHECK(ex::collapsed_frame_name(f) == "ns::f<a:b>(int, char const*)");
  f.function = "weird\nname\twith\rbreaks";
  CHECK(ex::collapsed_frame_name(f) == "weird name with breaks");
  f.function = "";
  f.module_offset = 0x34;
  CHECK(ex::collapsed_frame_name(f) == "app+0x34");
  CHECK(ex::collapsed_frame_name(DisplayFrame{}) == "[truncated]");
}

TEST_CASE("metric names") {
  CHECK(ex::parse_metric("alloc-bytes") == ex::Metric::alloc_bytes);
  CHECK(ex::parse_metric("alloc-calls") == ex::Metric::alloc_calls);
  CHECK(ex::parse_metric("leaked") == ex::Metric::leaked);
  CHECK(ex::parse_metric("peak") == ex::Metric::peak);
  CHECK(!ex::parse_metric("bytes"));
}

TEST_CASE("collapsed lines: outermost first, summed, rounded, zeros left out, sorted") {
  Fixture fx;
  StackSymbolizer sym(fx.r.modules);
  CHECK(ex::collapsed_text(ex::collapse_stacks(fx.r, sym, {})) ==
        "[truncated];app+0x1400 8\n"
        "app+0x1100;app+0x1200;?+0x9000 21\n"
        "app+0x1100;app+0x1200;app+0x1300 300\n");
  CHECK(ex::collapsed_text(ex::collapse_stacks(fx.r, sym, {ex::Metric::leaked, ""})) ==
        "app+0x1100;app+0x1200;app+0x1300 100\n");
  CHECK(ex::collapsed_text(ex::collapse_stacks(fx.r, sym, {ex::Metric::alloc_calls, "?"})) ==
        "app+0x1100;app+0x1200;?+0x9000 2\n");
}

TEST_CASE("collapsed lines: leaves that name the same frames are one line") {
  Fixture fx;
  // Another chain of nodes with the same addresses: a different leaf id, the same text.
  uint32_t again = add_chain(fx.r, 0, {0x1100, 0x1200, 0x1300});
  set_figures(fx.r, again, 1, 0.4, 0, 0);
  StackSymbolizer sym(fx.r.modules);
  auto stacks = ex::collapse_stacks(fx.r, sym, {});
  CHECK(stacks.at("app+0x1100;app+0x1200;app+0x1300") == doctest::Approx(300.4));
}

TEST_CASE("pprof: strings, ids and order as readers expect") {
  Fixture fx;
  StackSymbolizer sym(fx.r.modules);
  pp::Profile p = ex::build_pprof(fx.r, sym, {});
  const auto &st = p.string_table();
  REQUIRE(st.size() > 0);
  CHECK(st[0] == "");
  auto s = [&](int64_t i) {
    REQUIRE(i >= 0);
    REQUIRE(i < st.size());
    return st[int(i)];
  };
  REQUIRE(p.sample_type_size() == 4);
  CHECK(s(p.sample_type(0).type()) == "alloc_objects");
  CHECK(s(p.sample_type(0).unit()) == "count");
  CHECK(s(p.sample_type(1).type()) == "alloc_space");
  CHECK(s(p.sample_type(1).unit()) == "bytes");
  CHECK(s(p.sample_type(2).type()) == "inuse_objects");
  CHECK(s(p.sample_type(3).type()) == "inuse_space");
  CHECK(s(p.default_sample_type()) == "alloc_space");
  CHECK(s(p.period_type().type()) == "space");
  CHECK(p.period() == 1);

  REQUIRE(p.mapping_size() == 1);
  CHECK(p.mapping(0).id() == 1);
  CHECK(s(p.mapping(0).build_id()) == "abcd");
  CHECK(s(p.mapping(0).filename()) == "/nonexistent/app");
  CHECK(p.mapping(0).memory_start() == 0x1000);
  CHECK(p.mapping(0).memory_limit() == 0x2000);

  std::set<uint64_t> fn_ids, loc_ids, addrs;
  for (const auto &f : p.function()) {
    CHECK(fn_ids.insert(f.id()).second);
    CHECK(!s(f.name()).empty());
    s(f.filename());
  }
  for (const auto &l : p.location()) {
    CHECK(loc_ids.insert(l.id()).second);
    CHECK(addrs.insert(l.address()).second);  // one Location per address
    CHECK((l.mapping_id() == 0 || l.mapping_id() <= uint64_t(p.mapping_size())));
    CHECK(l.line_size() >= 1);  // speedscope drops locations without a function
    for (const auto &line : l.line()) CHECK(fn_ids.count(line.function_id()));
    if (l.address() >= 0x1000 && l.address() < 0x2000) CHECK(l.mapping_id() == 1);
    else CHECK(l.mapping_id() == 0);
  }
  // main, f, A, B, marker, the cut stack's frame: shared callers are one Location each.
  CHECK(p.location_size() == 6);

  auto address_of = [&](uint64_t id) {
    for (const auto &l : p.location())
      if (l.id() == id) return l.address();
    FAIL("no location " << id);
    return uint64_t(0);
  };
  REQUIRE(p.sample_size() == 3);  // the interior node without figures has no sample
  bool saw_a = false;
  for (const auto &smp : p.sample()) {
    REQUIRE(smp.value_size() == 4);
    for (uint64_t id : smp.location_id()) CHECK(loc_ids.count(id));
    if (address_of(smp.location_id(0)) == 0x1300) {
      saw_a = true;
      REQUIRE(smp.location_id_size() == 3);
      CHECK(address_of(smp.location_id(1)) == 0x1200);  // leaf first
      CHECK(address_of(smp.location_id(2)) == 0x1100);
      CHECK(smp.value(0) == 3);
      CHECK(smp.value(1) == 300);
      CHECK(smp.value(2) == 1);
      CHECK(smp.value(3) == 100);
    }
    if (address_of(smp.location_id(0)) == 0x9000) {
      CHECK(smp.value(0) == 2);   // 2.4 rounded
      CHECK(smp.value(1) == 21);  // 20.6 rounded
      CHECK(smp.value(3) == 0);
    }
  }
  CHECK(saw_a);
}

TEST_CASE("pprof: --match keeps only stacks with a matching frame") {
  Fixture fx;
  StackSymbolizer sym(fx.r.modules);
  pp::Profile p = ex::build_pprof(fx.r, sym, {"?", ""});  // "?": the unmapped frame's module
  CHECK(p.sample_size() == 1);
}

TEST_CASE("gzip inflates back to the input") {
  std::string data;  // over 2 MiB: more than one of gzip()'s 1 MiB input chunks
  for (uint64_t i = 0; data.size() < (5u << 20) / 2; ++i) data += std::to_string(i * 7919 % 100003);
  std::string gz = "prefix", err;
  REQUIRE(ex::gzip(data, &gz, &err));
  REQUIRE(gz.substr(0, 6) == "prefix");
  gz.erase(0, 6);
  CHECK(uint8_t(gz[0]) == 0x1f);
  CHECK(uint8_t(gz[1]) == 0x8b);
  CHECK(inflate_gzip(gz, data.size()) == data);
  std::string empty_gz;
  REQUIRE(ex::gzip("", &empty_gz, &err));
  CHECK(inflate_gzip(empty_gz, 0).empty());
}
