// load_snapshot's raw block/edge decoder (snapshot_columns.h, load_snapshot.cc) against the
// libprotobuf path: the same snapshot, outcome and error on valid captures, on hand-made damaged
// records (each check of the loader, and each encoding the raw decoder leaves to libprotobuf), and
// on thousands of randomly damaged ones; with the decode lanes on threads and without.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "capture/capture_file_writer.h"
#include "snapshot/snapshot_columns.h"
#include "snapshot_compare.h"

using namespace heapsnap;
using snapshot::testing::compare_decoders;

namespace {

struct TempPath {
  std::string path;
  explicit TempPath(const std::string &name)
      : path("/tmp/heapsnap_snapshot_decode_test_" + std::to_string(getpid()) + "_" + name + ".hsnap") {
    std::remove(path.c_str());
  }
  ~TempPath() { std::remove(path.c_str()); }
};

// The records of a snapshot of n blocks (serialized), as the shim lays them out, in records of
// `per` blocks and edge records of about `per` sources: random sizes (some of 4 GiB and more),
// sites, far-apart addresses now and then, pools, ids, interior edges, vector headers.
std::vector<std::string> snapshot_records(uint32_t n, uint32_t per, uint64_t seed, uint32_t index = 0) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> out;
  wire::Record r;
  r.mutable_snapshot_begin()->set_index(index);
  r.mutable_snapshot_begin()->mutable_totals()->set_live_blocks(n);
  out.push_back(r.SerializeAsString());
  uint64_t a = 0x10000;
  std::vector<uint64_t> addr;
  for (uint32_t first = 0; first < n; first += per) {
    r.Clear();
    auto *b = r.mutable_snapshot_blocks();
    b->set_index(index);
    b->set_first_block(first);
    uint64_t prev = 0, prev_site = 0;
    for (uint32_t i = first; i < std::min(n, first + per); ++i) {
      a += 16 + rng() % 200 + (rng() % 50 == 0 ? (uint64_t(1) << 33) : 0);
      addr.push_back(a);
      b->add_addr_delta(int64_t(a - prev));
      prev = a;
      b->add_size(rng() % 100 == 0 ? (uint64_t(5) << 30) : rng() % 300);
      uint64_t site = 0x400000 + (rng() % 7) * 0x10 + (rng() % 40 == 0 ? 0 : 0x1000);
      b->add_call_site_delta(int64_t(site - prev_site));
      prev_site = site;
      b->add_stack(uint32_t(rng() % 5));
      b->add_id(rng() % 3 ? 0 : rng());
      b->add_time_ms(uint32_t(rng() % 100000));
      if (rng() % 2) b->add_pool(uint32_t(rng() % 3));  // (a shorter pool column: zeros after it)
    }
    out.push_back(r.SerializeAsString());
  }
  r.Clear();
  auto *e = r.mutable_snapshot_edges();
  uint32_t prev_source = 0, sources = 0;
  uint64_t ordinal = 0, last_interior = 0, last_vector = 0;
  bool open = false;
  for (uint32_t v = 0; v < n; ++v) {
    if (rng() % 3 == 0) continue;
    if (!open) {
      e->set_index(index);
      e->set_base_block(v);
      prev_source = v;
      open = true;
      ordinal = last_interior = last_vector = 0;
    }
    e->add_from_delta(v - prev_source);
    prev_source = v;
    uint32_t k = uint32_t(rng() % 4);
    e->add_count(k);
    for (uint32_t c = 0; c < k; ++c, ++ordinal) {
      e->add_to_delta(int64_t(rng() % n) - int64_t(v));
      e->add_offset(8 * c);
      if (rng() % 5 == 0) {
        e->add_interior_edge(ordinal - last_interior);
        last_interior = ordinal;
      } else if (rng() % 6 == 0) {
        e->add_vector_edge(ordinal - last_vector);
        last_vector = ordinal;
        e->add_vector_size(8 * (rng() % 8));
        e->add_vector_capacity(64 + 8 * (rng() % 8));
      }
    }
    if (++sources % per == 0) {
      out.push_back(r.SerializeAsString());
      r.Clear();
      e = r.mutable_snapshot_edges();
      open = false;
    }
  }
  if (open) out.push_back(r.SerializeAsString());
  r.Clear();
  auto *rt = r.mutable_snapshot_roots();
  rt->set_index(index);
  rt->set_name("globals");
  rt->add_target_delta(0);
  rt->add_root_offset(0);
  out.push_back(r.SerializeAsString());
  r.Clear();
  r.mutable_snapshot_end()->set_index(index);
  r.mutable_snapshot_end()->set_complete(true);
  out.push_back(r.SerializeAsString());
  return out;
}

void write_records(const std::string &path, const std::vector<std::string> &records, size_t frame_bytes = 4096) {
  capture::CaptureFileWriter w(path, 3, 0, 1);
  REQUIRE(w.ok());
  w.set_auto_frame_bytes(frame_bytes);
  for (const auto &r : records) w.add_bytes(r);
  REQUIRE(w.close());
}

// Protobuf wire pieces, for records libprotobuf's writer would not make.
std::string varint(uint64_t v) {
  std::string s;
  for (; v >= 0x80; v >>= 7) s.push_back(char(uint8_t(v) | 0x80));
  s.push_back(char(v));
  return s;
}
std::string field(uint32_t f, uint32_t wt, const std::string &payload) {
  std::string s = varint(uint64_t(f) << 3 | wt);
  if (wt == 2) s += varint(payload.size());
  return s + payload;
}
std::string record(uint32_t f, const std::string &msg) { return field(f, 2, msg); }
std::string packed(std::initializer_list<uint64_t> values) {
  std::string s;
  for (uint64_t v : values) s += varint(v);
  return s;
}

// The decoders agree on path's snapshot 0; returns the protobuf path's error.
std::string agree(const std::string &path) {
  auto c = compare_decoders(path, 0);
  CHECK_MESSAGE(c.difference.empty(), c.difference);
  return c.error;
}

}  // namespace

TEST_CASE("raw and protobuf decoders give the same snapshot on valid captures") {
  TempPath t("valid");
  for (uint64_t seed : {1, 2, 3}) {
    auto records = snapshot_records(5000, 300 + 200 * uint32_t(seed), seed);
    // Records of another snapshot in between: skipped by both.
    auto other = snapshot_records(300, 100, seed + 10, 1);
    records.insert(records.begin() + 2, other.begin() + 1, other.end() - 1);
    write_records(t.path, records, seed == 3 ? (8u << 20) : 4096);
    CHECK(agree(t.path).empty());
    auto reader = capture::CaptureReader::open(t.path, nullptr);
    REQUIRE(reader);
    snapshot::HeapSnapshot s;
    std::string err;
    REQUIRE(snapshot::load_snapshot(*reader, 0, &s, &err));
    CHECK(s.blocks() == 5000);
    CHECK(s.edges() > 4000);
    CHECK(s.addr.wide_count() > 0);
    CHECK(s.size.wide_count() > 0);
    CHECK(std::count(s.edge_interior.begin(), s.edge_interior.end(), true) > 100);
  }
}

TEST_CASE("raw and protobuf decoders fail alike on each check") {
  TempPath t("checks");
  const auto base = snapshot_records(2000, 250, 7);
  auto with = [&](const std::function<void(std::vector<std::string> &)> &change) {
    auto records = base;
    change(records);
    write_records(t.path, records);
    return agree(t.path);
  };
  auto blocks_msg = [](uint32_t first, std::initializer_list<uint64_t> addr) {
    std::string m = field(1, 0, varint(0)) + field(2, 2, packed(addr));
    std::string n = packed(std::initializer_list<uint64_t>{});
    for (size_t i = 0; i < addr.size(); ++i) n += varint(1);
    for (uint32_t f = 3; f <= 7; ++f) m += field(f, 2, n);
    return m + field(9, 0, varint(first));
  };
  // The blocks are records 1..8, the edges 9.. (see snapshot_records).
  CHECK(with([](auto &) {}).empty());
  CHECK(with([&](auto &r) { r.insert(r.begin() + 3, record(13, blocks_msg(500, {2}))); })
            .find("block addresses not ascending") != std::string::npos);
  CHECK(with([&](auto &r) { r.insert(r.begin() + 3, record(13, blocks_msg(7, {2}))); })
            .find("out of order or of unequal length") != std::string::npos);
  CHECK(with([&](auto &r) { r.insert(r.begin() + 10, record(13, blocks_msg(2000, {1ull << 40}))); })
            .find("block records after edge records") != std::string::npos);
  // Edges: a source past the blocks, a source going back, a target out of range, targets short,
  // unequal columns.
  auto edges_msg = [](uint32_t base_block, std::initializer_list<uint64_t> from, std::initializer_list<uint64_t> count,
                      std::initializer_list<uint64_t> to, std::initializer_list<uint64_t> off) {
    return field(1, 0, varint(0)) + field(2, 2, packed(from)) + field(3, 2, packed(count)) + field(4, 2, packed(to)) +
           field(6, 2, packed(off)) + field(7, 0, varint(base_block));
  };
  // (In place of the edge records, records 9 to the last two.)
  auto edges_only = [&](const std::string &msg) {
    return with([&](auto &r) {
      r.erase(r.begin() + 9, r.end() - 2);
      r.insert(r.begin() + 9, record(14, msg));
    });
  };
  CHECK(edges_only(edges_msg(1, {0, 2}, {1, 1}, {2, 3}, {0, 8})).empty());
  CHECK(edges_only(edges_msg(5000, {0}, {0}, {}, {})).find("edge source 5000 out of range or order") != std::string::npos);
  CHECK(edges_only(edges_msg(3, {0, 0}, {0, 0}, {}, {})).find("edge source 3 out of range or order") != std::string::npos);
  CHECK(edges_only(edges_msg(1990, {0}, {1}, {2 * 20}, {0})).find("edge target out of range") != std::string::npos);
  CHECK(edges_only(edges_msg(1990, {0}, {2}, {1}, {0})).find("edge targets run short") != std::string::npos);
  CHECK(edges_only(edges_msg(1990, {0}, {2}, {1, 1}, {0})).find("edge targets run short") != std::string::npos);
  CHECK(edges_only(edges_msg(1990, {0, 1}, {0}, {}, {})).find("edge columns of unequal length") != std::string::npos);
  // Vector headers (format 3.5): columns of unequal length, an ordinal past the record's edges, one twice.
  const std::string two = edges_msg(1, {0, 2}, {1, 1}, {2, 3}, {0, 8});
  CHECK(edges_only(two + field(8, 2, packed({1})) + field(9, 2, packed({8})) + field(10, 2, packed({16}))).empty());
  CHECK(edges_only(two + field(8, 2, packed({1})) + field(9, 2, packed({8}))).find("vector columns of unequal length") !=
        std::string::npos);
  CHECK(edges_only(two + field(8, 2, packed({2})) + field(9, 2, packed({8})) + field(10, 2, packed({16})))
            .find("vector edge 2 out of range or order") != std::string::npos);
  CHECK(edges_only(two + field(8, 2, packed({1, 0})) + field(9, 2, packed({8, 8})) + field(10, 2, packed({16, 16})))
            .find("vector edge 1 out of range or order") != std::string::npos);
  // Encodings the raw decoder leaves to libprotobuf: a varint of 11 bytes and one cut by its
  // column's end (the record does not parse: skipped, so the next block record is out of order),
  // a column in two chunks and an unpacked one (valid: the same blocks), field 0, a group.
  std::string eleven(10, char(0x81));
  eleven.push_back(0x01);
  wire::Record first_blocks;
  REQUIRE(first_blocks.ParseFromString(base[1]));
  const std::string good = first_blocks.snapshot_blocks().SerializeAsString();
  auto blocks_with_addr = [&](const std::string &column) {
    wire::SnapshotBlocks b;
    REQUIRE(b.ParseFromString(good));
    b.clear_addr_delta();
    return record(13, b.SerializeAsString() + column);
  };
  CHECK(with([&](auto &r) { r[1] = blocks_with_addr(field(2, 2, eleven)); }).find("out of order") != std::string::npos);
  CHECK(with([&](auto &r) { r[1] = blocks_with_addr(field(2, 2, std::string(1, char(0x81)))); })
            .find("out of order") != std::string::npos);
  CHECK(with([&](auto &r) { r[1] = blocks_with_addr(field(2, 2, eleven.substr(1))); }).empty() == false);  // 10 bytes: valid, then unequal
  {
    wire::SnapshotBlocks b;
    REQUIRE(b.ParseFromString(good));
    std::string first, rest;
    for (int i = 0; i < b.addr_delta_size(); ++i)
      (i < 10 ? first : rest) += varint(uint64_t((b.addr_delta(i) << 1) ^ (b.addr_delta(i) >> 63)));
    CHECK(with([&](auto &r) { r[1] = blocks_with_addr(field(2, 2, first) + field(2, 2, rest)); }).empty());
    std::string unpacked;
    for (int i = 0; i < b.addr_delta_size(); ++i)
      unpacked += field(2, 0, varint(uint64_t((b.addr_delta(i) << 1) ^ (b.addr_delta(i) >> 63))));
    CHECK(with([&](auto &r) { r[1] = blocks_with_addr(unpacked); }).empty());
  }
  with([&](auto &r) { r[1] = blocks_with_addr(field(0, 0, varint(1))); });
  with([&](auto &r) { r[1] = blocks_with_addr(field(15, 3, "") + field(15, 4, "")); });
  with([&](auto &r) { r[1] = blocks_with_addr(field(15, 1, "12345678") + field(16, 5, "1234") + field(17, 2, "xyz")); });
}

TEST_CASE("PackedColumn counts and checks varints as libprotobuf reads them") {
  std::mt19937_64 rng(5);
  for (int round = 0; round < 2000; ++round) {
    std::string s;
    size_t n = rng() % 300;
    for (size_t i = 0; i < n; ++i) {
      uint64_t v = rng() >> (rng() % 64);
      s += varint(v);
    }
    // Damage now and then: runs of continuation bytes of 9, 10 or 11, or a cut end.
    if (round % 3 == 0 && !s.empty()) s.insert(rng() % s.size(), std::string(9 + rng() % 3, char(0x80)));
    if (round % 7 == 0 && !s.empty()) s.pop_back();
    wire::SnapshotBlocks ref;
    bool pb = ref.ParseFromString(field(3, 2, s));
    snapshot::PackedColumn c;
    bool ok = c.check(reinterpret_cast<const uint8_t *>(s.data()), reinterpret_cast<const uint8_t *>(s.data() + s.size()));
    REQUIRE(ok == pb);
    if (!ok) continue;
    REQUIRE(c.count() == size_t(ref.size_size()));
    for (int i = 0; i < ref.size_size(); ++i) REQUIRE(c.u() == ref.size(i));
  }
}

TEST_CASE("raw and protobuf decoders agree on randomly damaged block and edge records") {
  TempPath t("random");
  const auto base = snapshot_records(600, 80, 11);
  std::mt19937_64 rng(12);
  int failures = 0;
  for (int round = 0; round < 400; ++round) {
    auto records = base;
    for (int k = 0, edits = 1 + int(rng() % 4); k < edits; ++k) {
      std::string &r = records[1 + rng() % (records.size() - 3)];  // a block or edge record
      size_t at = rng() % r.size();
      switch (rng() % 4) {
        case 0: r[at] = char(rng()); break;
        case 1: r[at] ^= char(0x80); break;
        case 2: r.insert(at, 1, char(rng())); break;
        default: r.erase(at, 1 + rng() % 3); break;
      }
    }
    write_records(t.path, records, round % 2 ? 4096 : (8u << 20));
    if (!agree(t.path).empty()) ++failures;
  }
  CHECK(failures > 50);  // (the damage reaches the checks, not only the framing)
}
