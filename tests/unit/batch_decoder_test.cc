// The replay's one-pass batch decoder (capture/batch_decoder.h) against RawEventDecoder (itself
// checked against libprotobuf in raw_events_test.cc): the same events in the same order and the
// same error on random, cut and garbled batches. Each batch sits in a buffer of exactly its size
// plus kDecodePadding, so a sanitizer build sees any read past the padding.
#include <doctest/doctest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "capture/batch_decoder.h"
#include "capture/event_decoder.h"
#include "heapsnap.pb.h"
#include "random_batch.h"

using heapsnap::capture::Event;
using heapsnap::capture::RawColumns;
using heapsnap::capture::RawEventDecoder;
namespace wire = heapsnap::wire;

using heapsnap::testing::random_batch;
using heapsnap::testing::wide;

namespace {

// What decode_batch hands its visitor, as Events (alloc_fn and tid are not passed).
struct Collect {
  std::vector<Event> out;
  Event blank(wire::EventKind k, uint64_t t, uint64_t id) {
    Event e{};
    e.kind = k;
    e.time_ns = t;
    e.id = id;
    return e;
  }
  void alloc(uint64_t t, uint64_t id, uint64_t size, uint32_t stack) {
    Event e = blank(wire::ALLOC, t, id);
    e.size = size;
    e.stack = stack;
    out.push_back(e);
  }
  void free(uint64_t t, uint64_t id) { out.push_back(blank(wire::FREE, t, id)); }
  void realloc(uint64_t t, uint64_t id, uint64_t size, uint32_t stack, bool moved) {
    Event e = blank(wire::REALLOC, t, id);
    e.size = size;
    e.stack = stack;
    e.moved = moved;
    out.push_back(e);
  }
  void pool_alloc(uint64_t t, uint64_t id, uint64_t addr, uint64_t size, uint32_t stack, uint32_t pool) {
    Event e = blank(wire::POOL_ALLOC, t, id);
    e.addr = addr;
    e.size = size;
    e.stack = stack;
    e.pool = pool;
    out.push_back(e);
  }
  void pool_free(uint64_t t, uint64_t id, uint32_t pool) {
    Event e = blank(wire::POOL_FREE, t, id);
    e.pool = pool;
    out.push_back(e);
  }
};

bool same(const Event &ref, const Event &e) {
  bool sized = ref.kind == wire::ALLOC || ref.kind == wire::REALLOC || ref.kind == wire::POOL_ALLOC;
  return ref.kind == e.kind && ref.time_ns == e.time_ns && ref.id == e.id && ref.addr == e.addr &&
         (!sized || (ref.size == e.size && ref.stack == e.stack)) && ref.pool == e.pool && ref.moved == e.moved;
}

// Decodes bytes both ways; returns the events compared (-1: RawColumns refused the layout).
int compare(const std::string &bytes, heapsnap::capture::SiteCursors &cursors, int *errors) {
  // Exactly the batch and the padding: reads past them are the sanitizer's to catch.
  std::unique_ptr<uint8_t[]> buf(new uint8_t[bytes.size() + heapsnap::capture::kDecodePadding]);
  memcpy(buf.get(), bytes.data(), bytes.size());
  memset(buf.get() + bytes.size(), 0, heapsnap::capture::kDecodePadding);
  RawColumns cols;
  if (!cols.parse(buf.get(), bytes.size())) return -1;
  RawEventDecoder ref(cols);
  std::vector<Event> want;
  Event e;
  while (ref.next(&e)) want.push_back(e);
  Collect got;
  std::string err = heapsnap::capture::decode_batch(cols, cursors, got);
  REQUIRE(got.out.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) REQUIRE(same(want[i], got.out[i]));
  CHECK(err == ref.error());
  *errors += !err.empty();
  return int(want.size());
}

}  // namespace

TEST_CASE("batch decoder: the events and errors of RawEventDecoder, on random batches") {
  std::mt19937_64 rng(2027);
  heapsnap::capture::SiteCursors cursors;  // one table across batches, as in the replay
  int errors = 0, events = 0;
  for (int round = 0; round < 4000; ++round) {
    std::string bytes = random_batch(rng).SerializeAsString();
    int n = compare(bytes, cursors, &errors);
    REQUIRE(n >= 0);
    events += n;
  }
  CHECK(events > 80000);
  CHECK(errors > 100);
}

TEST_CASE("batch decoder: cut and garbled batches, overlong varints") {
  std::mt19937_64 rng(7);
  heapsnap::capture::SiteCursors cursors;
  int errors = 0;
  for (int round = 0; round < 4000; ++round) {
    std::string bytes = random_batch(rng).SerializeAsString();
    if (round % 3 == 0) {
      bytes.resize(rng() % (bytes.size() + 1));
    } else if (round % 3 == 1) {
      for (auto &ch : bytes)
        if (rng() % 30 == 0) ch = char(rng());
    } else {
      for (auto &ch : bytes)  // continuation bits everywhere: varints of 10 bytes and more
        if (rng() % 3 == 0) ch = char(uint8_t(ch) | 0x80);
    }
    compare(bytes, cursors, &errors);
  }
  CHECK(errors > 100);
}

// Batches of the shim's own kinds: the unchecked loop (columns_suffice) against RawEventDecoder,
// intact, with short columns, and with runs of continuation bits in the value columns (overlong
// varints: the one error that loop can meet).
TEST_CASE("batch decoder: the unchecked loop, on batches of the shim's kinds") {
  std::mt19937_64 rng(11);
  heapsnap::capture::SiteCursors cursors;
  int errors = 0, unchecked = 0, unchecked_errors = 0;
  for (int round = 0; round < 6000; ++round) {
    std::string bytes = random_batch(rng, true).SerializeAsString();
    RawColumns cols;
    REQUIRE(cols.parse(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()));
    if (round % 2) {
      // Continuation bits over a stretch of one of the value columns these kinds read.
      static constexpr heapsnap::capture::Column kRead[] = {heapsnap::capture::kTime, heapsnap::capture::kStack,
                                                            heapsnap::capture::kRef, heapsnap::capture::kSize,
                                                            heapsnap::capture::kIdDelta};
      heapsnap::capture::Column c = kRead[rng() % (sizeof kRead / sizeof kRead[0])];
      if (cols.begin(c) && cols.end(c) > cols.begin(c)) {
        size_t from = size_t(cols.begin(c) - reinterpret_cast<const uint8_t *>(bytes.data()));
        size_t len = size_t(cols.end(c) - cols.begin(c));
        size_t at = from + rng() % len, run = 1 + rng() % 14;
        for (size_t k = at; k < from + len && k < at + run; ++k) bytes[k] = char(uint8_t(bytes[k]) | 0x80);
      }
    }
    // (The corruption keeps every column's span: cols still reads the batch as it now is.)
    bool fast = heapsnap::capture::detail::columns_suffice(cols);
    int before = errors;
    REQUIRE(compare(bytes, cursors, &errors) >= 0);
    unchecked += fast;
    unchecked_errors += fast && errors > before;
  }
  CHECK(unchecked > 2000);       // intact batches mostly take the unchecked loop
  CHECK(unchecked_errors > 50);  // and it meets overlong varints
  CHECK(errors > unchecked_errors);
}

// Columns longer than 255 rounds of 16 bytes: the SSE2 counters are summed and restarted.
TEST_CASE("batch decoder: the unchecked loop on batches of more than 4080 bytes a column") {
  std::mt19937_64 rng(5);
  heapsnap::capture::SiteCursors cursors;
  int errors = 0;
  for (int round = 0; round < 20; ++round) {
    wire::EventBatch b;
    b.set_base_time_ns(wide(rng));
    b.set_base_id(wide(rng));
    int n = 4500 + int(rng() % 4000);
    for (int i = 0; i < n; ++i) {
      uint32_t k = heapsnap::testing::random_kind(rng, true);
      b.add_kind(k);
      b.add_time_delta_ns(wide(rng));
      b.add_stack(uint32_t(rng() % 5));
      if (k == wire::FREE || k == wire::REALLOC_IN_PLACE || k == wire::REALLOC_MOVED)
        b.add_ref(int64_t(rng() % 4) * (rng() % 2 ? 1 : -1));
      if (k != wire::FREE) b.add_size(wide(rng));
      if (k >= wire::ALLOC_MALLOC) b.add_id_delta(int64_t(wide(rng)) * (rng() % 2 ? 1 : -1));
    }
    if (round % 2) b.mutable_size()->RemoveLast();  // one value short: the checked loop's error
    std::string bytes = b.SerializeAsString();
    RawColumns cols;
    REQUIRE(cols.parse(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()));
    CHECK(size_t(cols.end(heapsnap::capture::kKind) - cols.begin(heapsnap::capture::kKind)) > 4080);
    // Whole batches take the unchecked loop; one size short, the checked one, and its error.
    CHECK(heapsnap::capture::detail::columns_suffice(cols) == (round % 2 == 0));
    int got = compare(bytes, cursors, &errors);
    if (round % 2 == 0) CHECK(got == n);
  }
  CHECK(errors == 10);
}

TEST_CASE("batch decoder: varints of every length at a column's end") {
  heapsnap::capture::SiteCursors cursors;
  int errors = 0;
  for (int shift = 0; shift < 64; ++shift) {
    wire::EventBatch b;
    b.add_kind(wire::ALLOC);
    b.add_time_delta_ns(1ull << shift);
    b.add_size((1ull << shift) - 1);
    b.add_stack(uint32_t(1ull << (shift % 32)));
    b.add_alloc_fn(0);
    b.add_id_delta(int64_t(1ull << shift));
    b.add_kind(wire::FREE);
    b.add_time_delta_ns(~0ull >> (63 - shift));
    b.add_stack(uint32_t(1ull << (shift % 32)));
    b.add_ref(0);
    std::string bytes = b.SerializeAsString();
    CHECK(compare(bytes, cursors, &errors) == 2);
    CHECK(errors == 0);
    int cut_errors = 0;  // cut short: the same events and errors as RawEventDecoder
    for (size_t cut = 0; cut < bytes.size(); ++cut) compare(bytes.substr(0, cut), cursors, &cut_errors);
  }
}
