// The shim's hand-written encoder and libprotobuf agree: records built by preload/src are parsed
// by the generated classes and decoded by the analyzer's EventDecoder into the same events.
#include <doctest/doctest.h>

#include <memory>
#include <random>
#include <vector>

#include "capture/event_decoder.h"
#include "event_batch.h"
#include "heapsnap.pb.h"
#include "private_heap.h"
#include "wire_encoder.h"

namespace {

// Splits the shim's outbox bytes into records (varint length + Record).
std::vector<heapsnap::wire::Record> parse_all(const hs::wire::Buf &b) {
  std::vector<heapsnap::wire::Record> out;
  const uint8_t *p = b.data(), *end = p + b.size();
  while (p < end) {
    uint64_t len = 0;
    int shift = 0;
    while (*p & 0x80) len |= uint64_t(*p++ & 0x7f) << (shift += 7, shift - 7);
    len |= uint64_t(*p++) << shift;
    heapsnap::wire::Record r;
    REQUIRE(r.ParseFromArray(p, int(len)));
    out.push_back(r);
    p += len;
  }
  return out;
}

struct Expected {
  heapsnap::wire::EventKind kind;  // as EventDecoder gives it (format 1's kinds)
  uint64_t time, id, addr, size;
  uint32_t stack, fn, pool;
  bool moved;
};

}  // namespace

TEST_CASE("wire: EventBatch columns round-trip through libprotobuf and EventDecoder") {
  REQUIRE(hs::heap::init());
  std::mt19937_64 rng(12345);
  auto batch = std::make_unique<hs::EventBatch>();
  hs::wire::Buf out;
  std::vector<Expected> expected;
  std::vector<std::pair<uint64_t, uint32_t>> live;  // (id, stack)
  uint64_t next_id = 1000, t = 5'000'000;
  batch->last_id = 999;
  int batches = 0;
  for (int i = 0; i < 20000; ++i) {
    t += rng() % 3 == 0 ? rng() % 4'000'000 : 0;
    int what = int(rng() % 10);
    Expected e{};
    e.time = t;
    if (what < 5 || live.empty()) {
      e.kind = heapsnap::wire::ALLOC;
      e.id = next_id += 1 + (rng() % 50 == 0 ? rng() % 5000 : 0);  // new id blocks now and then
      e.size = rng() % 5 == 0 ? rng() : rng() % 300;
      e.stack = uint32_t(1 + rng() % 3000);
      e.fn = uint32_t(rng() % 6);
      batch->begin(hs::alloc_kind(uint8_t(e.fn)), t);
      batch->new_id(e.id);
      batch->block_size(e.size);
      batch->stack_id(e.stack);
      live.push_back({e.id, e.stack});
    } else if (what < 8) {
      size_t k = rng() % 4 == 0 ? rng() % live.size() : live.size() - 1;  // mostly LIFO
      e.kind = heapsnap::wire::FREE;
      e.id = live[k].first;
      e.stack = live[k].second;
      batch->begin(hs::kFree, t);
      batch->freed_block(e.id, e.stack);
      live.erase(live.begin() + long(k));
    } else if (what < 9) {
      size_t k = rng() % live.size();
      e.kind = heapsnap::wire::REALLOC;
      e.id = live[k].first;
      e.size = rng() % 100000;
      e.stack = uint32_t(1 + rng() % 3000);
      e.fn = 2;
      e.moved = rng() % 2;
      batch->begin(e.moved ? hs::kReallocMoved : hs::kReallocInPlace, t);
      batch->block_ref(e.id);
      batch->block_size(e.size);
      batch->stack_id(e.stack);
    } else {
      e.kind = heapsnap::wire::POOL_ALLOC;
      e.id = ++next_id;
      e.addr = rng() & 0x7ffffffffff0ull;
      e.size = rng() % 1000;
      e.stack = uint32_t(1 + rng() % 3000);
      e.pool = uint32_t(1 + rng() % 4);
      batch->begin(hs::kPoolAlloc, t);
      batch->new_id(e.id);
      batch->address(e.addr);
      batch->block_size(e.size);
      batch->stack_id(e.stack);
      batch->pool_id(e.pool);
    }
    expected.push_back(e);
    if (batch->full()) {
      batch->serialize_to(out, 77);
      ++batches;
    }
  }
  batch->serialize_to(out, 77);
  ++batches;
  REQUIRE(!out.failed());

  auto records = parse_all(out);
  REQUIRE(int(records.size()) == batches);
  size_t at = 0;
  for (const auto &r : records) {
    REQUIRE(r.has_events());
    CHECK(r.events().tid() == 77);
    heapsnap::capture::EventDecoder dec(r.events());
    heapsnap::capture::Event ev;
    while (dec.next(&ev)) {
      REQUIRE(at < expected.size());
      const Expected &x = expected[at++];
      CHECK(int(ev.kind) == int(x.kind));
      CHECK(ev.time_ns == x.time);
      CHECK(ev.id == x.id);
      if (x.kind == heapsnap::wire::ALLOC || x.kind == heapsnap::wire::REALLOC || x.kind == heapsnap::wire::POOL_ALLOC) {
        CHECK(ev.size == x.size);
        CHECK(ev.stack == x.stack);
      }
      if (x.kind == heapsnap::wire::FREE) CHECK(ev.stack == x.stack);
      if (x.kind == heapsnap::wire::ALLOC || x.kind == heapsnap::wire::REALLOC) CHECK(ev.alloc_fn == x.fn);
      if (x.kind == heapsnap::wire::REALLOC) CHECK(ev.moved == x.moved);
      if (x.kind == heapsnap::wire::POOL_ALLOC) {
        CHECK(ev.addr == x.addr);
        CHECK(ev.pool == x.pool);
      }
    }
    CHECK(dec.error().empty());
  }
  CHECK(at == expected.size());
}

TEST_CASE("wire: nested messages and scalar fields match libprotobuf") {
  REQUIRE(hs::heap::init());
  hs::wire::Buf b;
  auto m = hs::wire::begin_record(b, hs::wire::kTotals);
  b.u64(2, 123456789);
  b.i64(6, -42);
  b.u64(8, 1ull << 40);
  hs::wire::end_record(b, m);
  m = hs::wire::begin_record(b, hs::wire::kModule);
  b.u64(1, 3);
  b.str(2, "/usr/lib/libfoo.so");
  uint8_t id[20] = {1, 2, 3, 250};
  b.len(4, id, sizeof(id));
  size_t seg = b.open(5);
  b.u64(1, 0x1000);
  b.u64(4, 5);
  b.close(seg);
  hs::wire::end_record(b, m);
  auto rs = parse_all(b);
  REQUIRE(rs.size() == 2);
  CHECK(rs[0].totals().alloc_calls() == 123456789);
  CHECK(rs[0].totals().heap_bytes() == -42);
  CHECK(rs[0].totals().peak_heap_bytes() == (1ull << 40));
  CHECK(rs[1].module().path() == "/usr/lib/libfoo.so");
  CHECK(rs[1].module().build_id().size() == 20);
  CHECK(uint8_t(rs[1].module().build_id()[3]) == 250);
  REQUIRE(rs[1].module().segments_size() == 1);
  CHECK(rs[1].module().segments(0).vaddr() == 0x1000);
  CHECK(rs[1].module().segments(0).flags() == 5);
}
