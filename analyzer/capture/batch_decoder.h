// The replay's event-batch decoder: one pass over a batch's columns (RawColumns), specialised per
// event kind, handing each event to a visitor as plain arguments (no Event struct to fill and
// read back, no per-event error-string check, one branch per column read).
//
// Two loops. A batch of the kinds the shim writes for ordinary blocks, whose columns were counted
// to hold every value its kinds read (detail::columns_suffice), is read without comparing any
// value with its column's end: no read can pass it. Any other batch takes the checked loop,
// which needs kDecodePadding readable bytes after the batch (the reader's frame buffer has them,
// see CaptureReader::set_raw_events_handler): a varint is read without looking at its column's
// end, and the column's end is checked once afterwards. A varint that runs past its column's end
// reads at most 10 bytes, so it stays inside the padding; the bytes read past the end only ever
// decide that the column ended, which is what the bounds-checked decoder (event_decoder.h)
// decides for them too. Both loops give the events, their order and the errors of
// RawEventDecoder (tests/unit/batch_decoder_test.cc checks it on random and damaged batches).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include "capture/event_columns.h"

namespace heapsnap::capture {

// Readable bytes a batch needs after its end for decode_batch.
inline constexpr size_t kDecodePadding = 16;

namespace detail {

// A varint's value and the byte after it; next == nullptr: longer than 10 bytes. Returned in two
// registers: through an out-pointer every value of the batch made a trip through the stack (the
// noinline tail below takes its address).
struct Varint {
  const uint8_t *next;
  uint64_t value;
};

// A varint of 4..10 bytes at p (10 readable bytes; the first three have their high bit set; v
// holds their payload).
__attribute__((noinline)) inline Varint varint_long(const uint8_t *p, uint64_t v) {
  for (unsigned i = 3; i < 10; ++i) {
    uint64_t b = p[i];
    v |= (b & 0x7f) << (7 * i);
    if (b < 0x80) return {p + i + 1, v};
  }
  return {nullptr, 0};
}

// 1 to 3 bytes inline: kinds, ids, sizes mostly 1; time deltas 2; stack ids 2 or 3.
__attribute__((always_inline)) inline Varint varint(const uint8_t *p) {
  uint64_t b0 = p[0];
  if (__builtin_expect(b0 < 0x80, 1)) return {p + 1, b0};
  uint64_t v = b0 - 0x80, b1 = p[1];
  v |= b1 << 7;
  if (b1 < 0x80) return {p + 2, v};
  v -= uint64_t(0x80) << 7;
  uint64_t b2 = p[2];
  v |= b2 << 14;
  if (b2 < 0x80) return {p + 3, v};
  return varint_long(p, v - (uint64_t(0x80) << 14));
}

}  // namespace detail

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

namespace detail {

// Whether a batch holds only the format-2 kinds the shim writes
// for ordinary blocks (FREE, REALLOC_IN_PLACE, REALLOC_MOVED, ALLOC_MALLOC .. ALLOC_NEW_ARRAY),
// each one byte, and every column holds at least the varints those kinds read. Then decode_batch
// reads without comparing each value's end with its column's end: no column can run out, and an
// overlong varint is the only error left. Anything else (format 1, pools, an unknown kind, a short
// column: a damaged batch) takes the checked loop.
inline bool columns_suffice(const RawColumns &cols) {
  const uint8_t *k = cols.begin(kKind), *ke = cols.end(kKind);
  if (!k) return false;
  size_t n = size_t(ke - k), frees = 0, reallocs = 0, allocs = 0;
  const uint8_t *x = k;
#if defined(__SSE2__) && defined(__x86_64__)
  // As varint_ends (varint.h): byte counters per kind class, summed every 255 rounds. A byte over 0x7f is
  // negative here, so in no class.
  static_assert(wire::REALLOC_MOVED == wire::REALLOC_IN_PLACE + 1);
  const __m128i zero = _mm_setzero_si128(), k_free = _mm_set1_epi8(wire::FREE),
                k_in_place = _mm_set1_epi8(wire::REALLOC_IN_PLACE), k_moved = _mm_set1_epi8(wire::REALLOC_MOVED),
                k_below = _mm_set1_epi8(wire::ALLOC_MALLOC - 1), k_above = _mm_set1_epi8(wire::ALLOC_NEW_ARRAY + 1);
  while (ke - x >= 16) {
    __m128i f = zero, r = zero, a = zero;
    for (int round = 0; round < 255 && ke - x >= 16; ++round, x += 16) {
      __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(x));
      f = _mm_sub_epi8(f, _mm_cmpeq_epi8(b, k_free));
      r = _mm_sub_epi8(r, _mm_or_si128(_mm_cmpeq_epi8(b, k_in_place), _mm_cmpeq_epi8(b, k_moved)));
      a = _mm_sub_epi8(a, _mm_and_si128(_mm_cmpgt_epi8(b, k_below), _mm_cmpgt_epi8(k_above, b)));
    }
    frees += sum_byte_lanes(f);
    reallocs += sum_byte_lanes(r);
    allocs += sum_byte_lanes(a);
  }
#endif
  for (; x < ke; ++x) {
    uint8_t b = *x;
    frees += b == wire::FREE;
    reallocs += uint8_t(b - wire::REALLOC_IN_PLACE) <= wire::REALLOC_MOVED - wire::REALLOC_IN_PLACE;
    allocs += uint8_t(b - wire::ALLOC_MALLOC) <= wire::ALLOC_NEW_ARRAY - wire::ALLOC_MALLOC;
  }
  if (frees + reallocs + allocs != n) return false;
  auto holds = [&](Column c, size_t need) {
    const uint8_t *b = cols.begin(c);
    return need == 0 || (b && varint_ends(b, cols.end(c)) >= need);
  };
  return holds(kTime, n) && holds(kStack, n) && holds(kRef, frees + reallocs) &&
         holds(kSize, reallocs + allocs) && holds(kIdDelta, allocs);
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
  // Reads the next value of column C into x; a column that ends (kChecked) or a varint over 10
  // bytes goes to `fail`.
#define HS_TAKE(C, x, fail, kChecked)                                                    \
  do {                                                                                   \
    detail::Varint r_ = detail::varint(C.p);                                             \
    if (__builtin_expect(r_.next == nullptr || ((kChecked) && r_.next > C.end), 0)) goto fail; \
    C.p = r_.next;                                                                       \
    x = r_.value;                                                                        \
  } while (0)
#define HS_ZIGZAG(x) (((x) >> 1) ^ (~((x) & 1) + 1))
  // FREE and POOL_FREE name the block by its site's cursor (a select, not a branch: whether the
  // site's cursor is this batch's is data, and mispredicted it was a tenth of the decoder's time).
#define HS_FREED(id, kChecked)                                           \
  do {                                                                   \
    HS_TAKE(stack, a, short_column, kChecked);                           \
    HS_TAKE(ref, b, short_column, kChecked);                             \
    uint32_t site = uint32_t(a);                                         \
    SiteCursors::Slot &c_ = cursor[site % SiteCursors::kSlots];          \
    bool hit = (site != 0) & (c_.stack == site) & (c_.gen == gen);       \
    uint64_t mask_ = uint64_t(0) - uint64_t(hit);                        \
    id = ((c_.last_freed & mask_) | (last_id & ~mask_)) - HS_ZIGZAG(b);  \
    c_ = {site, gen, id};                                                \
  } while (0)

  const bool unchecked = detail::columns_suffice(cols);
  if (unchecked) {
    // Every kind is one byte and one of three, every column long enough (columns_suffice).
    for (uint64_t n = uint64_t(kind.end - kind.p); i < n; ++i) {
      k = kind.p[i];
      HS_TAKE(time, dt, short_time, false);
      t += dt;
      if (k >= wire::ALLOC_MALLOC) {
        HS_TAKE(idd, a, short_column, false);
        HS_TAKE(size, b, short_column, false);
        HS_TAKE(stack, c, short_column, false);
        last_id += HS_ZIGZAG(a);
        v.alloc(t, last_id, b, uint32_t(c));
      } else if (k == wire::FREE) {
        uint64_t id;
        HS_FREED(id, false);
        v.free(t, id);
      } else {
        HS_TAKE(ref, a, short_column, false);
        HS_TAKE(size, b, short_column, false);
        HS_TAKE(stack, c, short_column, false);
        v.realloc(t, last_id - (HS_ZIGZAG(a)), b, uint32_t(c), k == wire::REALLOC_MOVED);
      }
    }
    return {};
  }

  for (;; ++i) {
    if (kind.p >= kind.end) return {};
    {
      detail::Varint r = detail::varint(kind.p);
      if (r.next == nullptr || r.next > kind.end) return {};  // a cut varint ends the column
      kind.p = r.next;
      k = r.value;
    }
    HS_TAKE(time, dt, short_time, true);
    t += dt;
    switch (uint32_t(k)) {
      // (Columns are read independently: format 1's alloc_fn and moved can be taken first.)
      case wire::ALLOC:  // format 1
      case wire::ALLOC_MALLOC ... wire::ALLOC_NEW_ARRAY: {
        if (k == wire::ALLOC) HS_TAKE(fn, d, short_column, true);
        HS_TAKE(idd, a, short_column, true);
        HS_TAKE(size, b, short_column, true);
        HS_TAKE(stack, c, short_column, true);
        last_id += HS_ZIGZAG(a);
        v.alloc(t, last_id, b, uint32_t(c));
        break;
      }
      case wire::FREE: {
        uint64_t id;
        HS_FREED(id, true);
        v.free(t, id);
        break;
      }
      case wire::REALLOC:  // format 1
      case wire::REALLOC_IN_PLACE:
      case wire::REALLOC_MOVED: {
        bool moved_flag = k == wire::REALLOC_MOVED;
        if (k == wire::REALLOC) {
          HS_TAKE(fn, d, short_column, true);
          HS_TAKE(moved, e, short_column, true);
          moved_flag = e != 0;
        }
        HS_TAKE(ref, a, short_column, true);
        HS_TAKE(size, b, short_column, true);
        HS_TAKE(stack, c, short_column, true);
        v.realloc(t, last_id - (HS_ZIGZAG(a)), b, uint32_t(c), moved_flag);
        break;
      }
      case wire::POOL_ALLOC: {
        HS_TAKE(idd, a, short_column, true);
        HS_TAKE(addr, b, short_column, true);
        HS_TAKE(size, c, short_column, true);
        HS_TAKE(stack, d, short_column, true);
        HS_TAKE(pool, e, short_column, true);
        last_id += HS_ZIGZAG(a);
        last_addr += HS_ZIGZAG(b);
        v.pool_alloc(t, last_id, last_addr, c, uint32_t(d), uint32_t(e));
        break;
      }
      case wire::POOL_FREE: {
        uint64_t id;
        HS_FREED(id, true);
        HS_TAKE(pool, e, short_column, true);
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
  // RawColumns::kind_count(): the kinds taken (this event's included) and those left. The
  // unchecked loop leaves kind.p at the batch's first kind (event i's is kind.p[i]).
  uint64_t n = i + 1 + varint_ends(kind.p + (unchecked ? i + 1 : 0), kind.end);
  return "a column ends before event " + std::to_string(i) + " of " + std::to_string(n);
}
}

}  // namespace heapsnap::capture
