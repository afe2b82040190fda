// The replay's event-batch decoder: one pass over a batch's columns (RawColumns), specialised per
// event kind, handing each event to a visitor as plain arguments (no Event struct to fill and
// read back, no per-event error-string check, one branch per column read).
//
// It needs kDecodePadding readable bytes after the batch (the reader's frame buffer has them,
// see CaptureReader::set_raw_events_handler): a varint is read without looking at its column's
// end, and the column's end is checked once afterwards. A varint that runs past its column's end
// reads at most 10 bytes, so it stays inside the padding; the bytes read past the end only ever
// decide that the column ended, which is what the bounds-checked decoder (event_decoder.h)
// decides for them too. Events, their order and the errors are those of RawEventDecoder
// (tests/unit/batch_decoder_test.cc checks it on random and damaged batches).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include "capture/event_columns.h"

namespace heapsnap::capture {

// Readable bytes a batch needs after its end for decode_batch.
inline constexpr size_t kDecodePadding = 16;

namespace detail {

// A varint of 4..10 bytes at p (10 readable bytes; the first three have their high bit set).
// Returns the byte after it, nullptr if it is longer than 10 bytes.
__attribute__((noinline)) inline const uint8_t *varint_long(const uint8_t *p, uint64_t v, uint64_t *out) {
  for (unsigned i = 3; i < 10; ++i) {
    uint64_t b = p[i];
    v |= (b & 0x7f) << (7 * i);
    if (b < 0x80) {
      *out = v;
      return p + i + 1;
    }
  }
  return nullptr;
}

// 1 to 3 bytes inline: kinds, ids, sizes mostly 1; time deltas 2; stack ids 2 or 3.
__attribute__((always_inline)) inline const uint8_t *varint(const uint8_t *p, uint64_t *out) {
  uint64_t b0 = p[0];
  if (__builtin_expect(b0 < 0x80, 1)) {
    *out = b0;
    return p + 1;
  }
  uint64_t v = b0 - 0x80, b1 = p[1];
  v |= b1 << 7;
  if (b1 < 0x80) {
    *out = v;
    return p + 2;
  }
  v -= uint64_t(0x80) << 7;
  uint64_t b2 = p[2];
  v |= b2 << 14;
  if (b2 < 0x80) {
    *out = v;
    return p + 3;
  }
  return varint_long(p, v - (uint64_t(0x80) << 14), out);
}

}  // namespace detail

// Decodes the batch `cols` (kDecodePadding readable bytes after it). Calls, per event, in order:
//   v.alloc(time, id, size, stack)                 ALLOC, ALLOC_MALLOC .. ALLOC_NEW_ARRAY
//   v.free(time, id)                               FREE
//   v.realloc(time, id, size, stack, moved)        REALLOC, REALLOC_IN_PLACE, REALLOC_MOVED
//   v.pool_alloc(time, id, addr, size, stack, pool) POOL_ALLOC
//   v.pool_free(time, id, pool)                    POOL_FREE
// (alloc_fn is read and checked, not passed: the replay does not use it.) Returns "" or the
// error RawEventDecoder gives for the batch; events before the error were visited.
// FREE's per-site cursors (see proto/heapsnap.proto, EventBatch), emptied every batch: kept by the
// caller from batch to batch, a batch's own entries told apart by a generation number (16 KiB
// cleared once, not once per batch).
class SiteCursors {
 public:
  static constexpr uint32_t kSlots = 1024;
  struct Slot {
    uint32_t stack = 0;
    uint32_t gen = 0;
    uint64_t last_freed = 0;
  };
  // Starts a batch: every slot reads as empty.
  Slot *next_batch() {
    if (++gen_ == 0) {  // wrapped: really empty them
      for (Slot &s : slot_) s = Slot{};
      gen_ = 1;
    }
    return slot_;
  }
  uint32_t gen() const { return gen_; }

 private:
  Slot slot_[kSlots];
  uint32_t gen_ = 0;
};

template <typename Visitor>
__attribute__((always_inline)) inline std::string decode_batch(const RawColumns &cols, SiteCursors &cursors,
                                                              Visitor &v) {
  struct Col {
    const uint8_t *p, *end;
  };
  // An absent column reads as an empty one in a padded buffer of its own.
  static constexpr uint8_t kNone[kDecodePadding] = {};
  auto col = [&](Column c) {
    return cols.begin(c) ? Col{cols.begin(c), cols.end(c)} : Col{kNone, kNone};
  };
  Col kind = col(kKind), time = col(kTime), addr = col(kAddr), size = col(kSize), stack = col(kStack),
      fn = col(kFn), pool = col(kPool), idd = col(kIdDelta), ref = col(kRef), moved = col(kMoved);
  SiteCursors::Slot *cursor = cursors.next_batch();
  const uint32_t gen = cursors.gen();

  uint64_t t = cols.base_time_ns(), last_id = cols.base_id(), last_addr = 0;
  uint64_t i = 0;
  uint64_t k, dt, a, b, c, d, e;
  const uint8_t *q;
  // Reads the next value of column C into x; a column that ends (or a varint over 10 bytes)
  // goes to `fail`.
#define HS_TAKE(C, x, fail)                                      \
  do {                                                           \
    q = detail::varint(C.p, &(x));                               \
    if (__builtin_expect(q == nullptr || q > C.end, 0)) goto fail; \
    C.p = q;                                                     \
  } while (0)
#define HS_ZIGZAG(x) (((x) >> 1) ^ (~((x) & 1) + 1))
  // FREE and POOL_FREE name the block by its site's cursor.
#define HS_FREED(id)                                                     \
  do {                                                                   \
    HS_TAKE(stack, a, short_column);                                     \
    HS_TAKE(ref, b, short_column);                                       \
    uint32_t site = uint32_t(a);                                         \
    SiteCursors::Slot &c_ = cursor[site % SiteCursors::kSlots];          \
    bool hit = site && c_.stack == site && c_.gen == gen;                \
    id = (hit ? c_.last_freed : last_id) - HS_ZIGZAG(b);                 \
    c_ = {site, gen, id};                                                \
  } while (0)

  for (;; ++i) {
    if (kind.p >= kind.end) return {};
    q = detail::varint(kind.p, &k);
    if (q == nullptr || q > kind.end) return {};  // a cut varint ends the column
    kind.p = q;
    HS_TAKE(time, dt, short_time);
    t += dt;
    switch (uint32_t(k)) {
      // (Columns are read independently: format 1's alloc_fn and moved can be taken first.)
      case wire::ALLOC:  // format 1
      case wire::ALLOC_MALLOC ... wire::ALLOC_NEW_ARRAY: {
        if (k == wire::ALLOC) HS_TAKE(fn, d, short_column);
        HS_TAKE(idd, a, short_column);
        HS_TAKE(size, b, short_column);
        HS_TAKE(stack, c, short_column);
        last_id += HS_ZIGZAG(a);
        v.alloc(t, last_id, b, uint32_t(c));
        break;
      }
      case wire::FREE: {
        uint64_t id;
        HS_FREED(id);
        v.free(t, id);
        break;
      }
      case wire::REALLOC:  // format 1
      case wire::REALLOC_IN_PLACE:
      case wire::REALLOC_MOVED: {
        bool moved_flag = k == wire::REALLOC_MOVED;
        if (k == wire::REALLOC) {
          HS_TAKE(fn, d, short_column);
          HS_TAKE(moved, e, short_column);
          moved_flag = e != 0;
        }
        HS_TAKE(ref, a, short_column);
        HS_TAKE(size, b, short_column);
        HS_TAKE(stack, c, short_column);
        v.realloc(t, last_id - (HS_ZIGZAG(a)), b, uint32_t(c), moved_flag);
        break;
      }
      case wire::POOL_ALLOC: {
        HS_TAKE(idd, a, short_column);
        HS_TAKE(addr, b, short_column);
        HS_TAKE(size, c, short_column);
        HS_TAKE(stack, d, short_column);
        HS_TAKE(pool, e, short_column);
        last_id += HS_ZIGZAG(a);
        last_addr += HS_ZIGZAG(b);
        v.pool_alloc(t, last_id, last_addr, c, uint32_t(d), uint32_t(e));
        break;
      }
      case wire::POOL_FREE: {
        uint64_t id;
        HS_FREED(id);
        HS_TAKE(pool, e, short_column);
        v.pool_free(t, id, uint32_t(e));
        break;
      }
      default: return "unknown event kind " + std::to_string(uint32_t(k));
    }
  }
#undef HS_FREED
#undef HS_ZIGZAG
#undef HS_TAKE
short_time:
  return "time column too short";
short_column: {
  // RawColumns::kind_count(): the kinds taken (this event's included) and those left.
  uint64_t n = i + 1;
  for (const uint8_t *x = kind.p; x < kind.end; ++x) n += *x < 0x80;
  return "a column ends before event " + std::to_string(i) + " of " + std::to_string(n);
}
}

}  // namespace heapsnap::capture
