// The shim's hand-written encoder and libprotobuf agree: records built by preload/src are parsed
// by the generated classes and decoded by the analyzer's EventDecoder into the same events; and
// the replay reads format 1 captures as it reads the shim's format 2.
#include <doctest/doctest.h>
#include <sched.h>

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "capture/capture_file_writer.h"
#include "capture/capture_reader.h"
#include "capture/event_decoder.h"
#include "output/event_batch.h"
#include "heapsnap.pb.h"
#include "core/private_heap.h"
#include "replay/estimate_fit.h"
#include "replay/replay.h"
#include "output/wire_encoder.h"
#include "replay_builder.h"

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

namespace {

// Format 1's encoding of a format 2 batch: ALLOC with an alloc_fn column, REALLOC with alloc_fn
// and moved columns (what heapsnap wrote before format 2); the other columns are the same.
heapsnap::wire::EventBatch as_format1(const heapsnap::wire::EventBatch &b) {
  namespace w = heapsnap::wire;
  w::EventBatch o = b;
  o.clear_kind();
  o.clear_alloc_fn();
  o.clear_moved();
  for (uint32_t k : b.kind()) {
    if (k >= w::ALLOC_MALLOC && k <= w::ALLOC_NEW_ARRAY) {
      o.add_kind(w::ALLOC);
      o.add_alloc_fn(k - w::ALLOC_MALLOC);
    } else if (k == w::REALLOC_IN_PLACE || k == w::REALLOC_MOVED) {
      o.add_kind(w::REALLOC);
      o.add_alloc_fn(w::FN_REALLOC);
      o.add_moved(k == w::REALLOC_MOVED);
    } else {
      o.add_kind(k);
    }
  }
  return o;
}

// A random event stream written as the shim writes it, one kind of event per call (the rng is
// drawn in the same order by every caller), for the replay tests below.
struct RandomStream {
  std::mt19937_64 rng;
  uint32_t stacks;
  std::unique_ptr<hs::EventBatch> batch = std::make_unique<hs::EventBatch>();
  hs::wire::Buf out;
  std::vector<std::pair<uint64_t, uint32_t>> live, pool_live;
  uint64_t next_id = 1, t = 1000, addr = 0x10000;

  RandomStream(uint64_t seed, uint32_t n_stacks) : rng(seed), stacks(n_stacks) {}
  uint32_t any_stack() { return uint32_t(1 + rng() % stacks); }
  void alloc(uint64_t max_size) {
    uint32_t stack = any_stack();
    batch->begin(hs::alloc_kind(uint8_t(rng() % 6)), t);
    batch->new_id(next_id);
    batch->block_size(1 + rng() % max_size);
    batch->stack_id(stack);
    live.push_back({next_id++, stack});
  }
  void free() {
    size_t k = rng() % live.size();
    batch->begin(hs::kFree, t);
    batch->freed_block(live[k].first, live[k].second);
    live.erase(live.begin() + long(k));
  }
  void realloc() {
    size_t k = rng() % live.size();
    batch->begin(rng() % 2 ? hs::kReallocMoved : hs::kReallocInPlace, t);
    batch->block_ref(live[k].first);
    batch->block_size(1 + rng() % 20000);
    batch->stack_id(any_stack());
  }
  void pool_alloc() {
    uint32_t stack = any_stack();
    batch->begin(hs::kPoolAlloc, t);
    batch->new_id(next_id);
    batch->address(addr += 16 * (1 + rng() % 8));
    batch->block_size(16 + rng() % 100);
    batch->stack_id(stack);
    batch->pool_id(uint32_t(1 + rng() % 3));
    pool_live.push_back({next_id++, stack});
  }
  void pool_free() {
    size_t k = rng() % pool_live.size();
    batch->begin(hs::kPoolFree, t);
    batch->freed_block(pool_live[k].first, pool_live[k].second);
    batch->pool_id(1);
    pool_live.erase(pool_live.begin() + long(k));
  }
  // An event the replay must catch: an ALLOC naming a stack no Stack record defined, or a FREE
  // naming block id 0.
  void bad() {
    if (rng() % 2) {
      uint32_t stack = stacks + 1 + uint32_t(rng() % 5);
      batch->begin(hs::alloc_kind(0), t);
      batch->new_id(next_id);
      batch->block_size(1 + rng() % 100);
      batch->stack_id(stack);
      live.push_back({next_id++, stack});
    } else {
      batch->begin(hs::kFree, t);
      batch->freed_block(0, any_stack());
    }
  }
  // After each event: a full batch goes out.
  void next() {
    if (batch->full()) batch->serialize_to(out, 9);
  }
  // The stream's batches as Records.
  std::vector<heapsnap::wire::Record> finish() {
    batch->serialize_to(out, 9);
    return parse_all(out);
  }
};

// What precedes the events in the replay tests' captures: the process (its sampling mean) and
// `stacks` stacks of one node each under the root.
void add_context(heapsnap::capture::CaptureFileWriter &fw, uint64_t mean, uint32_t stacks) {
  heapsnap::wire::Record rec;
  rec.mutable_process()->set_pid(1);
  rec.mutable_process()->set_sample_bytes(mean);
  fw.add(rec);
  for (uint32_t s = 1; s <= stacks; ++s) {
    heapsnap::wire::Record sr;
    heapsnap::wire::Stack *st = sr.mutable_stack();
    st->set_id(s);
    st->set_parent(0);
    st->set_first_node(s);
    st->add_frame_delta(int64_t(0x401000 + 16 * s));
    fw.add(sr);
  }
}

// Every per-stack figure of stacks 1..stacks the same in a and b.
void check_same_stack_figures(const heapsnap::replay::ReplayResult &ra, const heapsnap::replay::ReplayResult &rb,
                              uint32_t stacks) {
  for (uint32_t s = 1; s <= stacks; ++s) {
    const auto &a = ra.by_stack[s], &b = rb.by_stack[s];
    CHECK(a.alloc_calls == b.alloc_calls);
    CHECK(a.alloc_bytes == b.alloc_bytes);
    CHECK(a.live_calls == b.live_calls);
    CHECK(a.live_bytes == b.live_bytes);
    CHECK(a.peak_calls == b.peak_calls);
    CHECK(a.peak_bytes == b.peak_bytes);
    CHECK(a.samples == b.samples);
    CHECK(a.reallocs == b.reallocs);
    CHECK(a.realloc_moves == b.realloc_moves);
    CHECK(a.pool == b.pool);
  }
}

// Writes the event records in `out` (EventBatch::serialize_to's) as a format 2 capture of every
// allocation with stacks 1 and 2, and replays it.
heapsnap::replay::ReplayResult replay_events(const hs::wire::Buf &out, const char *name,
                                             const heapsnap::replay::ReplayOptions &opts = {}) {
  namespace w = heapsnap::wire;
  std::string path = std::string(P_tmpdir) + "/heapsnap-test-" + std::to_string(getpid()) + "-" + name + ".hsnap";
  {
    heapsnap::capture::CaptureFileWriter fw(path, 2, 0);
    add_context(fw, 1, 2);
    for (const auto &rec : parse_all(out)) fw.add(rec);
    w::Record end;
    end.mutable_end()->set_reason("exit");
    fw.add(end);
    REQUIRE(fw.close());
  }
  std::string err;
  heapsnap::replay::ReplayResult r = heapsnap::replay::replay_with_peak(path, &err, opts);
  unlink(path.c_str());
  REQUIRE(err.empty());
  return r;
}

// `blocks` ends without an allocation: that many unknown frees and one problem naming them, or
// none of either.
void check_unknown_frees(const heapsnap::replay::ReplayResult &r, uint64_t blocks) {
  CHECK(r.unknown_frees == blocks);
  if (blocks == 0) {
    CHECK(r.problems.empty());
    return;
  }
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].what.rfind(std::to_string(blocks) + " blocks are freed or resized", 0) == 0);
}

}  // namespace

// The replay reads both formats: one random event stream written as the shim writes it (format 2)
// and re-encoded as format 1 must give the same figures, in every-allocation and sampled mode.
TEST_CASE("wire: a format 1 capture and its format 2 twin replay to the same figures") {
  namespace w = heapsnap::wire;
  REQUIRE(hs::heap::init());
  constexpr uint32_t kStacks = 40;
  RandomStream rs(777, kStacks);
  for (int i = 0; i < 30000; ++i) {
    rs.t += rs.rng() % 5000;
    int what = int(rs.rng() % 10);
    if (what < 5 || rs.live.empty()) rs.alloc(5000);
    else if (what < 8) rs.free();
    else rs.realloc();
    rs.next();
  }
  auto batches = rs.finish();
  REQUIRE(batches.size() > 1);

  for (uint64_t mean : {uint64_t(1), uint64_t(4096)}) {
    heapsnap::replay::ReplayResult r[2];
    for (int format = 1; format <= 2; ++format) {
      std::string path = std::string(P_tmpdir) + "/heapsnap-test-" + std::to_string(getpid()) + "-format" +
                         std::to_string(format) + ".hsnap";
      {
        heapsnap::capture::CaptureFileWriter fw(path, uint16_t(format), 0);
        add_context(fw, mean, kStacks);
        for (const auto &b : batches) {
          w::Record er;
          *er.mutable_events() = format == 1 ? as_format1(b.events()) : b.events();
          fw.add(er);
        }
        w::Record end;
        end.mutable_end()->set_reason("exit");
        fw.add(end);
        REQUIRE(fw.close());
      }
      std::string err;
      r[format - 1] = heapsnap::replay::replay_with_peak(path, &err);
      REQUIRE(err.empty());
      CHECK(r[format - 1].problems.empty());
      unlink(path.c_str());
    }
    CHECK(r[0].events == 30000);
    CHECK(r[1].events == r[0].events);
    CHECK(r[1].sampled_peak_bytes == r[0].sampled_peak_bytes);
    CHECK(r[1].sampled_peak_event == r[0].sampled_peak_event);
    check_same_stack_figures(r[0], r[1], kStacks);
    uint64_t reallocs = 0, moves = 0;
    for (uint32_t s = 1; s <= kStacks; ++s) {
      reallocs += r[0].by_stack[s].reallocs;
      moves += r[0].by_stack[s].realloc_moves;
    }
    CHECK(reallocs > 1000);  // the comparison covered reallocs that moved and that did not
    CHECK(moves > 500);
    CHECK(moves < reallocs);
  }
}

// A block resized, then freed, by another thread before the batch with its ALLOC reaches the file
// (cross-thread batches are written in any order): its ends wait for the ALLOC, and the capture
// has no problem. An end of a block that nothing allocated is one problem, counted once per block.
TEST_CASE("replay: ends written before their ALLOC are no problem, ends of blocks never allocated are") {
  REQUIRE(hs::heap::init());
  for (bool stray : {false, true}) {
    hs::wire::Buf out;
    auto b = std::make_unique<hs::EventBatch>();
    b->begin(hs::kReallocMoved, 2000);  // thread 2: block 1 resized, then freed
    b->block_ref(1);
    b->block_size(64);
    b->stack_id(1);
    b->begin(hs::kFree, 3000);
    b->freed_block(1, 1);
    if (stray) {  // and block 99, never allocated, resized and freed
      b->begin(hs::kReallocInPlace, 3100);
      b->block_ref(99);
      b->block_size(8);
      b->stack_id(2);
      b->begin(hs::kFree, 3200);
      b->freed_block(99, 2);
    }
    b->serialize_to(out, 2);
    b->begin(hs::alloc_kind(0), 1000);  // thread 1: block 1 allocated, its batch written last
    b->new_id(1);
    b->block_size(32);
    b->stack_id(1);
    b->serialize_to(out, 1);
    heapsnap::replay::ReplayResult r = replay_events(out, "early");
    CHECK(r.by_stack[1].live_calls == 0);  // block 1: allocated, resized, freed
    check_unknown_frees(r, stray ? 1 : 0);
  }
}

// The heap line's cells (ReplayOptions::heap_cells): each event's change counts at its own time,
// so that the running sum over the cells is the heap in time order even though another thread's
// batch, with later events, reaches the file first; an event beyond the cells widens them.
TEST_CASE("replay: heap cells sum each change at its own time, whatever order the batches come in") {
  REQUIRE(hs::heap::init());
  for (bool late : {false, true}) {
    hs::wire::Buf out;
    auto b = std::make_unique<hs::EventBatch>();
    b->begin(hs::alloc_kind(0), 2000000);  // thread 2, written first: block 3 lives from 2 ms to 4 ms
    b->new_id(3);
    b->block_size(200);
    b->stack_id(1);
    b->begin(hs::kFree, 4000000);
    b->freed_block(3, 1);
    b->serialize_to(out, 2);
    b->begin(hs::alloc_kind(0), 1000000);  // thread 1: block 1 at 1 ms, block 2 at 5 ms
    b->new_id(1);
    b->block_size(1000);
    b->stack_id(1);
    b->begin(hs::alloc_kind(0), 5000000);
    b->new_id(2);
    b->block_size(500);
    b->stack_id(2);
    if (late) {  // and block 1 freed at 10 s: past the 4096 cells of 131 us
      b->begin(hs::kFree, 10000000000ull);
      b->freed_block(1, 1);
    }
    b->serialize_to(out, 1);
    heapsnap::replay::ReplayOptions o;
    o.heap_cells = true;
    heapsnap::replay::ReplayResult r = replay_events(out, "cells", o);
    const auto &c = r.heap_cells;
    CAPTURE(late);
    REQUIRE(!c.delta.empty());
    CHECK(c.delta.size() <= heapsnap::replay::kHeapCells);
    CHECK(std::accumulate(c.delta.begin(), c.delta.end(), 0.0) == (late ? 500 : 1700 - 200));
    auto at = [&](uint64_t t) {  // the running sum after t's cell
      return std::accumulate(c.delta.begin(), c.delta.begin() + long(std::min<size_t>((t >> c.shift) + 1, c.delta.size())), 0.0);
    };
    if (!late) {
      CHECK(c.shift == 17);  // 131 us cells
      CHECK(at(1000000) == 1000);
      CHECK(at(2000000) == 1200);
      CHECK(at(4000000) == 1000);
      CHECK(at(5000000) == 1500);
    } else {
      CHECK((uint64_t(heapsnap::replay::kHeapCells) << c.shift) > 10000000000ull);
      CHECK((uint64_t(heapsnap::replay::kHeapCells) << (c.shift - 1)) <= 10000000000ull);  // no wider than needed
      CHECK(at(5000000) == 1500);  // 1, 2, 4 and 5 ms share a 4 ms cell now
      CHECK(at(10000000000ull) == 500);
    }
    heapsnap::replay::ReplayResult none = replay_events(out, "no-cells");
    CHECK(none.heap_cells.delta.empty());  // only when asked for
  }
}

// The same for a client-API pool object: freed by another thread whose batch reaches the file
// before the one with its POOL_ALLOC, it is counted as allocated, ends up neither live nor in
// its pool's index, and the capture has no problem. A POOL_FREE of an object never allocated is
// one problem.
TEST_CASE("replay: a pool object freed before its POOL_ALLOC was written is no problem") {
  REQUIRE(hs::heap::init());
  for (bool stray : {false, true}) {
    hs::wire::Buf out;
    auto b = std::make_unique<hs::EventBatch>();
    b->begin(hs::kPoolFree, 3000);  // thread 2: object 1 of pool 1 freed
    b->freed_block(1, 1);
    b->pool_id(1);
    if (stray) {  // and object 99, never allocated
      b->begin(hs::kPoolFree, 3100);
      b->freed_block(99, 2);
      b->pool_id(1);
    }
    b->serialize_to(out, 2);
    b->begin(hs::kPoolAlloc, 1000);  // thread 1: objects 1 and 2 allocated, its batch written last
    b->new_id(1);
    b->address(0x7000);
    b->block_size(48);
    b->stack_id(1);
    b->pool_id(1);
    b->begin(hs::kPoolAlloc, 1100);
    b->new_id(2);
    b->address(0x7100);
    b->block_size(16);
    b->stack_id(2);
    b->pool_id(1);
    b->serialize_to(out, 1);
    heapsnap::replay::ReplayResult r = replay_events(out, "early-pool");
    CHECK(r.by_stack[1].alloc_calls == 1);
    CHECK(r.by_stack[1].live_calls == 0);  // object 1: allocated, then freed
    CHECK(r.by_stack[2].live_calls == 1);
    REQUIRE(r.live_pool_objects.size() == 1);  // object 2 only: object 1 left no place behind
    CHECK(r.live_pool_objects[0].second.id == 2);
    check_unknown_frees(r, stray ? 1 : 0);
  }
}

// The replay with the reader's read-ahead thread decoding the event batches (see
// CaptureReader::set_decoded_events_handler) and without it: the same figures, bit for bit, on a
// capture of many frames with every event kind, a batch too large for the thread to take, and
// the same capture cut off inside a frame.
TEST_CASE("wire: batches decoded ahead on the read-ahead thread replay to the same figures") {
  namespace w = heapsnap::wire;
  using Mode = heapsnap::capture::CaptureReader::ReadAhead;
  REQUIRE(hs::heap::init());
  constexpr uint32_t kStacks = 60;
  RandomStream rs(4242, kStacks);
  for (int i = 0; i < 60000; ++i) {
    rs.t += rs.rng() % 3000;
    int what = int(rs.rng() % 20);
    // A few batches with events the replay must check (the decoded path checks the others'
    // events once per batch: DecodedBatch::max_stack, zero_id).
    if (i % 9973 == 500) rs.bad();
    else if (what < 8 || rs.live.empty()) rs.alloc(70000);
    else if (what < 14) rs.free();
    else if (what < 17) rs.realloc();
    else if (what < 19 || rs.pool_live.empty()) rs.pool_alloc();
    else rs.pool_free();
    rs.next();
  }
  auto batches = rs.finish();
  REQUIRE(batches.size() > 10);

  std::string path = std::string(P_tmpdir) + "/heapsnap-test-" + std::to_string(getpid()) + "-ahead.hsnap";
  for (uint64_t mean : {uint64_t(1), uint64_t(4096)}) {
    uint64_t cut_at = 0;
    {
      heapsnap::capture::CaptureFileWriter fw(path, 2, 0);
      add_context(fw, mean, kStacks);
      for (size_t i = 0; i < batches.size(); ++i) {
        fw.add(batches[i]);
        if (i % 3 == 2) fw.end_frame();
        if (i == batches.size() / 2) {
          // More events than a decoded batch holds (DecodedBatch::kMaxEvents): the parser's own.
          w::Record big;
          w::EventBatch *e = big.mutable_events();
          e->set_tid(7);
          e->set_base_time_ns(rs.t);
          e->set_base_id(rs.next_id - 1);
          for (int k = 0; k < 20000; ++k) {
            e->add_kind(w::ALLOC_MALLOC);
            e->add_time_delta_ns(1);
            e->add_id_delta(1);  // new ids, one apart
            e->add_size(24);
            e->add_stack(uint32_t(1 + k % kStacks));
          }
          fw.add(big);
          fw.end_frame();
        }
      }
      cut_at = fw.bytes_written();  // the last frame starts here
      w::Record end;
      end.mutable_end()->set_reason("exit");
      fw.add(end);
      REQUIRE(fw.close());
    }
    for (int cut = 0; cut < 2; ++cut) {
      if (cut) REQUIRE(truncate(path.c_str(), off_t(cut_at) - 40) == 0);  // inside the last batches' frame
      // Modes never, always and after_first (the first frame through the parser's own decoder);
      // always again with the thread slowed down and leaving every other batch to the parser, so
      // that the parser decodes batches itself, however the machine schedules the two (see
      // DecodeRing; a delay alone let a busy machine's thread keep up: by_parser 0).
      struct Variant {
        Mode mode;
        unsigned delay_us;
      };
      uint64_t ahead_always = 0;
      for (Variant v : {Variant{Mode::always, 0}, Variant{Mode::after_first, 0}, Variant{Mode::always, 300},
                        Variant{Mode::automatic, 0}}) {
        heapsnap::replay::ReplayResult r[2];
        uint64_t ahead = 0, by_parser = 0;
        for (int m = 0; m < 2; ++m) {
          std::string err;
          auto reader = heapsnap::capture::CaptureReader::open(path, &err);
          REQUIRE(reader);
          reader->set_read_ahead(m ? v.mode : Mode::never);
          if (m) reader->set_decode_delay_for_test(v.delay_us);
          if (m) reader->set_leave_to_parser_for_test(v.delay_us != 0);
          r[m] = heapsnap::replay::replay(*reader);
          if (m) {
            ahead = reader->batches_decoded_ahead();
            by_parser = reader->batches_decoded_by_parser();
          }
        }
        CAPTURE(mean);
        CAPTURE(cut);
        CAPTURE(int(v.mode));
        CAPTURE(v.delay_us);
        if (v.mode == Mode::always && !v.delay_us) ahead_always = ahead;
        if (v.mode == Mode::automatic) {
          // A file of several frames, smaller than kReadAheadMin: read ahead from its first frame
          // with two CPUs, not at all with one.
          cpu_set_t set;
          bool two = sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) >= 2;
          CHECK(ahead == (two ? ahead_always : 0));
        } else {
          CHECK(ahead >= 8);  // the batches of every frame but the first (after_first) or all
        }
        CHECK(by_parser <= ahead);
        if (v.delay_us) CHECK(by_parser >= 1);
        CHECK(r[0].events >= (cut ? 40000u : 80000u));
        CHECK(r[1].events == r[0].events);
        CHECK(r[1].problems.size() == r[0].problems.size());
        for (size_t i = 0; i < r[0].problems.size() && i < r[1].problems.size(); ++i) {
          CHECK(r[1].problems[i].what == r[0].problems[i].what);
          CHECK(r[1].problems[i].offset == r[0].problems[i].offset);
        }
        // Both kinds of bad event were seen (this stream has some of each before any cut).
        CHECK(std::count_if(r[0].problems.begin(), r[0].problems.end(), [](const auto &p) {
                return p.what.find("name a stack no Stack record") != std::string::npos ||
                       p.what.find("name block id 0") != std::string::npos;
              }) == 2);
        CHECK(r[1].truncated == r[0].truncated);
        CHECK(r[1].unknown_frees == r[0].unknown_frees);
        CHECK(r[1].sampled_peak_bytes == r[0].sampled_peak_bytes);
        CHECK(r[1].sampled_peak_event == r[0].sampled_peak_event);
        CHECK(r[1].sampled_peak_time_ns == r[0].sampled_peak_time_ns);
        CHECK(r[1].end_time_ns == r[0].end_time_ns);
        CHECK(r[1].live_pool_objects.size() == r[0].live_pool_objects.size());
        CHECK(r[0].live_pool_objects.size() > 100);
        for (size_t i = 0; i < r[0].live_pool_objects.size() && i < r[1].live_pool_objects.size(); ++i) {
          CHECK(r[1].live_pool_objects[i].second.addr == r[0].live_pool_objects[i].second.addr);
          CHECK(r[1].live_pool_objects[i].second.id == r[0].live_pool_objects[i].second.id);
        }
        check_same_stack_figures(r[0], r[1], kStacks);
      }
    }
  }
  // Stopping early with batches decoded ahead: the record callback stops at the oversized batch
  // (parsed by libprotobuf: no raw handler here), the thread is told to quit, nothing hangs.
  {
    std::string err;
    auto reader = heapsnap::capture::CaptureReader::open(path, &err);
    REQUIRE(reader);
    reader->set_read_ahead(Mode::always);
    size_t decoded = 0;
    reader->set_decoded_events_handler(
        [&](const heapsnap::capture::DecodedBatch &, const heapsnap::capture::RecordPos &) { ++decoded; });
    bool saw_big = false;
    reader->for_each_record([&](const w::Record &rec, const heapsnap::capture::RecordPos &) {
      saw_big = rec.has_events() && rec.events().kind_size() == 20000;
      return !saw_big;
    });
    CHECK(saw_big);
    CHECK(decoded == batches.size() / 2 + 1);
  }
  unlink(path.c_str());
}

TEST_CASE("replay: sampled estimates beside an exact total are scaled to it, and only those") {
  using heapsnap::replay::fit_estimates;
  using heapsnap::replay::fit_to;
  using heapsnap::replay::fit_within;
  // The leaks: 66 KiB in 17 blocks estimated beside an exact 5.38 KiB in 5 blocks.
  auto f = fit_to(66.0 * 1024, 5.38 * 1024);
  CHECK(f.scaled);
  CHECK(f.fitted == doctest::Approx(5.38 * 1024));
  CHECK(f(33.0 * 1024) == doctest::Approx(5.38 * 1024 / 2));
  CHECK(fit_to(0, 5000).fitted == 0);  // nothing sampled: nothing to spread
  CHECK(!fit_to(0, 5000).scaled);
  CHECK(fit_within(500, 100, 1000).factor == 1);  // inside the bounds: as estimated
  CHECK(fit_within(5000, 100, 1000).fitted == doctest::Approx(1000));
  CHECK(fit_within(50, 100, 1000).fitted == doctest::Approx(100));
  CHECK(fit_within(50, 700, 700).fitted == doctest::Approx(700));  // an exact peak

  heapsnap::replay::ReplayResult r;
  r.process.set_sample_bytes(65536);
  r.have_totals = true;
  r.totals.set_alloc_calls(1000);
  r.totals.set_bytes_allocated(1000000);
  r.totals.set_live_blocks(5);
  r.totals.set_heap_bytes(5500);
  r.live_sampled_blocks = 3;
  uint32_t a = heapsnap::testing::add_chain(r, 0, {0x1000, 0x1010});
  uint32_t b = heapsnap::testing::add_chain(r, 0, {0x2000});
  uint32_t p = heapsnap::testing::add_chain(r, 0, {0x3000});
  heapsnap::testing::set_figures(r, a, 1500, 1200000, 10, 44000);
  heapsnap::testing::set_figures(r, b, 500, 300000, 7, 22000);
  heapsnap::testing::set_figures(r, p, 40, 4000, 3, 300);
  r.by_stack[p].pool = 1;  // a client-API pool's objects: not in the shim's exact totals
  r.by_stack[a].peak_bytes = 600000;
  r.by_stack[a].peak_calls = 30;
  r.by_stack[b].peak_bytes = 200000;
  r.by_stack[b].peak_calls = 10;

  auto e = fit_estimates(r, 100000, 500000);  // a peak known within bounds
  REQUIRE(e.fitted);
  CHECK(e.live_samples == 3);
  CHECK(e.live_bytes.raw == doctest::Approx(66000));
  CHECK(e.live_blocks.raw == doctest::Approx(17));
  double blocks = 0, bytes = 0, calls = 0, allocated = 0, peak = 0;
  for (uint32_t id : {a, b}) {
    auto g = e.apply(r.by_stack[id]);
    blocks += g.live_calls;
    bytes += g.live_bytes;
    calls += g.alloc_calls;
    allocated += g.alloc_bytes;
    peak += g.peak_bytes;
  }
  CHECK(blocks == doctest::Approx(5));      // the exact totals, split as the samples suggest
  CHECK(bytes == doctest::Approx(5500));
  CHECK(calls == doctest::Approx(1000));
  CHECK(allocated == doctest::Approx(1000000));
  CHECK(peak == doctest::Approx(500000));   // 800,000 estimated: brought down to the upper bound
  CHECK(e.apply(r.by_stack[a]).live_bytes == doctest::Approx(5500.0 * 2 / 3));  // a's share kept
  CHECK(e.apply(r.by_stack[a]).peak_calls == doctest::Approx(30 * 500000.0 / 800000));
  CHECK(e.apply(r.by_stack[p]).live_bytes == 300);  // the pool's figures stay as estimated

  // Every allocation recorded: the figures are counts, never scaled.
  r.process.set_sample_bytes(1);
  CHECK(!fit_estimates(r, 0, 0).fitted);
  CHECK(fit_estimates(r, 0, 0).apply(r.by_stack[a]).live_bytes == 44000);
  // No totals read (a capture cut before its first flush): nothing to fit to.
  r.process.set_sample_bytes(65536);
  r.have_totals = false;
  CHECK(!fit_estimates(r, 0, 0).fitted);
}
