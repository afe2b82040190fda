// One thread's pending events as packed columns, already varint-encoded, so that turning them
// into an EventBatch record is a few memcpy's (see proto/heapsnap.proto, EventBatch).
#pragma once
#include <cstdint>
#include <cstring>

#include "core/common.h"
#include "output/wire_encoder.h"

namespace hs {

// Format 2's kinds (proto/heapsnap.proto, EventKind): an allocation's kind is kAllocBase plus its
// allocation function, a realloc's says whether the block moved.
enum EventKind : uint8_t {
  kFree = 1,
  kPoolAlloc = 3,
  kPoolFree = 4,
  kReallocInPlace = 5,
  kReallocMoved = 6,
  kAllocBase = 8,
};
inline EventKind alloc_kind(uint8_t fn) { return EventKind(kAllocBase + fn); }

struct EventBatch {
  static constexpr uint32_t kMaxEvents = 4096;

  uint32_t count = 0;
  uint32_t time_len = 0, addr_len = 0, size_len = 0, stack_len = 0, pool_len = 0, id_len = 0,
           ref_len = 0;
  uint32_t most_len = 0;  // the longest varint column so far (full() without scanning them all)
  uint64_t base_time = 0;     // ns since capture start of the first event
  uint64_t last_time = 0;
  uint64_t base_id = 0;       // the thread's latest id when the batch began
  uint64_t last_id = 0;       // the thread's latest id (kept across batches)
  uint64_t last_addr_d = disguise(uint64_t(0));  // previous pool address, disguised
  // Column capacities are typical sizes, not worst cases (a varint can take 10 bytes): the batch
  // counts as full as soon as any column has less than kSlack bytes left. Big batches keep each
  // column's bytes contiguous, which is what lets zstd find the repetitions.
  static constexpr uint32_t kSlack = 10;
  static constexpr uint32_t kVarCap = kMaxEvents * 3;
  uint8_t kind[kMaxEvents];
  uint8_t time[kVarCap];
  uint8_t addr[kVarCap];
  uint8_t size[kVarCap];
  uint8_t stack[kVarCap];
  uint8_t pool[kVarCap];
  uint8_t id[kVarCap];
  uint8_t ref[kVarCap];

  // See proto/heapsnap.proto, EventBatch: per-site cursors of the last freed id.
  static constexpr uint32_t kSiteSlots = 1024;
  struct SiteCursor {
    uint32_t stack;  // 0 = empty (stack ids start at 1)
    uint64_t last_freed;
  };
  SiteCursor cursor[kSiteSlots];

  bool full() const { return count == kMaxEvents || most_len + 2 * kSlack > kVarCap; }
  bool empty() const { return count == 0; }
  uint32_t grew(uint32_t len) {
    most_len = len > most_len ? len : most_len;
    return len;
  }

  void begin(EventKind k, uint64_t t) {
    if (count == 0) {
      base_time = t;
      last_time = t;
      base_id = last_id;
      last_addr_d = disguise(uint64_t(0));
      memset(cursor, 0, sizeof(cursor));
    }
    kind[count++] = k;
    uint64_t d = t >= last_time ? t - last_time : 0;
    last_time = t > last_time ? t : last_time;
    time_len = grew(uint32_t(wire::put_varint(time + time_len, d) - time));
  }
  void new_id(uint64_t v) {
    id_len = grew(uint32_t(wire::put_varint(id + id_len, wire::zigzag(int64_t(v - last_id))) - id));
    last_id = v;
  }
  // FREE: the block's allocation stack, then its id relative to the site's previous free.
  void freed_block(uint64_t v, uint32_t site) {
    stack_id(site);
    SiteCursor &c = cursor[site % kSiteSlots];
    int64_t delta = (site && c.stack == site) ? int64_t(c.last_freed - v) : int64_t(last_id - v);
    c = {site, v};
    ref_len = grew(uint32_t(wire::put_varint(ref + ref_len, wire::zigzag(delta)) - ref));
  }
  void block_ref(uint64_t v) {
    ref_len = grew(uint32_t(wire::put_varint(ref + ref_len, wire::zigzag(int64_t(last_id - v))) - ref));
  }
  void address(uint64_t a) {
    int64_t delta = int64_t(a - reveal(last_addr_d));
    last_addr_d = disguise(a);
    addr_len = grew(uint32_t(wire::put_varint(addr + addr_len, wire::zigzag(delta)) - addr));
  }
  void block_size(uint64_t s) { size_len = grew(uint32_t(wire::put_varint(size + size_len, s) - size)); }
  void stack_id(uint32_t v) { stack_len = grew(uint32_t(wire::put_varint(stack + stack_len, v) - stack)); }
  void pool_id(uint32_t v) { pool_len = grew(uint32_t(wire::put_varint(pool + pool_len, v) - pool)); }

  // Appends this batch as one length-delimited Record{events} to out, then empties it.
  void serialize_to(wire::Buf &out, uint32_t tid) {
    if (count == 0) return;
    wire::RecordMark m = wire::begin_record(out, wire::kEvents);
    out.u64(1, tid);
    out.u64(2, base_time);
    out.len(3, kind, count);
    out.len(4, time, time_len);
    if (addr_len) out.len(5, addr, addr_len);
    if (size_len) out.len(6, size, size_len);
    if (stack_len) out.len(7, stack, stack_len);
    if (pool_len) out.len(9, pool, pool_len);
    out.u64(10, base_id);
    if (id_len) out.len(11, id, id_len);
    if (ref_len) out.len(12, ref, ref_len);
    wire::end_record(out, m);
    reset();
  }
  void reset() {
    count = time_len = addr_len = size_len = stack_len = pool_len = id_len = ref_len = 0;
    most_len = 0;
  }
};

}  // namespace hs
