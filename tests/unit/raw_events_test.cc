// The replay decodes event batches straight from their bytes (RawColumns); libprotobuf's parse
// (ProtoColumns) is the reference: on any batch both must give the same events and the same
// error, and layouts RawColumns does not take (split or unpacked columns) must be refused so the
// caller falls back to libprotobuf.
#include <doctest/doctest.h>

#include <random>
#include <string>

#include "capture/event_decoder.h"
#include "heapsnap.pb.h"
#include "random_batch.h"

using heapsnap::capture::Event;
using heapsnap::capture::EventDecoder;
using heapsnap::capture::RawColumns;
using heapsnap::capture::RawEventDecoder;

using heapsnap::testing::random_batch;
using heapsnap::testing::wide;

namespace {

bool same(const Event &a, const Event &b) {
  return a.kind == b.kind && a.time_ns == b.time_ns && a.id == b.id && a.addr == b.addr &&
         a.size == b.size && a.stack == b.stack && a.alloc_fn == b.alloc_fn && a.pool == b.pool &&
         a.moved == b.moved && a.tid == b.tid;
}

}  // namespace

TEST_CASE("raw events: the same events and errors as libprotobuf's parse, on random batches") {
  std::mt19937_64 rng(2026);
  int errors = 0, events = 0;
  for (int round = 0; round < 3000; ++round) {
    heapsnap::wire::EventBatch b = random_batch(rng);
    std::string bytes = b.SerializeAsString();
    heapsnap::wire::EventBatch parsed;
    REQUIRE(parsed.ParseFromString(bytes));
    RawColumns cols;
    REQUIRE(cols.parse(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()));
    EventDecoder ref(parsed);
    RawEventDecoder raw(cols);
    Event x{}, y{};  // (next() fills them when it returns true; gcc cannot tell)
    for (;;) {
      bool a = ref.next(&x), c = raw.next(&y);
      REQUIRE(a == c);
      if (!a) break;
      REQUIRE(same(x, y));
      ++events;
    }
    CHECK(ref.error() == raw.error());
    errors += !ref.error().empty();
  }
  CHECK(events > 50000);
  CHECK(errors > 100);  // the damaged batches were exercised
}

TEST_CASE("raw events: split or unpacked columns are left to libprotobuf") {
  heapsnap::wire::EventBatch b;
  b.add_kind(1);
  b.add_time_delta_ns(5);
  std::string one = b.SerializeAsString();
  // The same column twice (protobuf concatenates the chunks): refused.
  std::string twice = one + one;
  RawColumns cols;
  CHECK_FALSE(cols.parse(reinterpret_cast<const uint8_t *>(twice.data()), twice.size()));
  // kind (field 3) as an unpacked varint: refused.
  const uint8_t unpacked[] = {3 << 3 | 0, 1};
  RawColumns c2;
  CHECK_FALSE(c2.parse(unpacked, sizeof(unpacked)));
  // Unknown fields of every wire type are skipped.
  const uint8_t unknown[] = {14 << 3 | 0, 0x80, 1,                // field 14, varint 128
                             15 << 3 | 1, 1, 2, 3, 4, 5, 6, 7, 8,  // field 15, fixed64
                             0x85, 0x01, 1, 2, 3, 4,               // field 16, fixed32 (2-byte key)
                             0x8a, 0x01, 2, 9, 9,                  // field 17, 2 bytes
                             1 << 3 | 0, 42};                      // tid
  RawColumns c3;
  REQUIRE(c3.parse(unknown, sizeof(unknown)));
  CHECK(c3.tid() == 42);
}

TEST_CASE("raw events: cut and garbage batches end cleanly") {
  std::mt19937_64 rng(99);
  for (int round = 0; round < 2000; ++round) {
    std::string bytes = random_batch(rng).SerializeAsString();
    if (round % 2) {
      bytes.resize(rng() % (bytes.size() + 1));
    } else {
      for (auto &ch : bytes)
        if (rng() % 40 == 0) ch = char(rng());
    }
    RawColumns cols;
    if (!cols.parse(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size())) continue;
    RawEventDecoder dec(cols);
    Event e;
    int n = 0;
    while (dec.next(&e)) ++n;
    CHECK(n <= int(bytes.size()));
  }
}
