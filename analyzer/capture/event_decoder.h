// Walks the packed columns of an EventBatch (see proto/heapsnap.proto) one event at a time,
// undoing the delta encodings. Columns that run short (a damaged or hostile file) end the walk
// with an error instead of reading out of bounds. The columns come from a parsed batch
// (EventDecoder) or straight from its bytes (RawEventDecoder, see event_columns.h).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "capture/event_columns.h"
#include "heapsnap.pb.h"

namespace heapsnap::capture {

struct Event {
  wire::EventKind kind;  // format 2's kinds come out as format 1's: ALLOC with alloc_fn, REALLOC with moved
  uint64_t time_ns;      // since capture start
  uint64_t id;           // the block's sample id (ALLOC/POOL_ALLOC: new; FREE/REALLOC: ended or resized)
  uint64_t addr;         // POOL_ALLOC: the object's address
  uint64_t size;         // ALLOC, REALLOC, POOL_ALLOC
  uint32_t stack;        // ALLOC, REALLOC, POOL_ALLOC
  uint32_t alloc_fn;     // ALLOC, REALLOC
  uint32_t pool;         // POOL_*
  bool moved;            // REALLOC: the block moved to a new address
  uint32_t tid;
};

template <typename Columns>
class BasicEventDecoder {
 public:
  template <typename... A>
  explicit BasicEventDecoder(A &&...a) : c_(std::forward<A>(a)...) {
    time_ = c_.base_time_ns();
    last_id_ = c_.base_id();
  }
  // Decodes the next event into *e. Returns false at the end or on a malformed batch (error()).
  bool next(Event *e);
  const std::string &error() const { return error_; }
  int position() const { return i_; }

 private:
  __attribute__((always_inline)) bool take_addr(uint64_t *out) {
    uint64_t d;
    if (!c_.template take<kAddr>(&d)) return false;
    last_addr_ += d;
    *out = last_addr_;
    return true;
  }
  __attribute__((always_inline)) bool take_new_id(uint64_t *out) {
    uint64_t d;
    if (!c_.template take<kIdDelta>(&d)) return false;
    last_id_ += d;
    *out = last_id_;
    return true;
  }
  // FREE: see proto/heapsnap.proto, EventBatch (per-site cursors, emptied every batch).
  __attribute__((always_inline)) bool take_freed(Event *e) {
    uint64_t site64, delta;
    if (!c_.template take<kStack>(&site64) || !c_.template take<kRef>(&delta)) return false;
    uint32_t site = uint32_t(site64);
    Cursor &c = cursor_[site % kSiteSlots];
    uint64_t id = (site && c.stack == site) ? c.last_freed - delta : last_id_ - delta;
    c = {site, id};
    e->id = id;
    e->stack = site;
    return true;
  }
  __attribute__((always_inline)) bool take_ref(uint64_t *out) {
    uint64_t d;
    if (!c_.template take<kRef>(&d)) return false;
    *out = last_id_ - d;
    return true;
  }
  __attribute__((always_inline)) bool take_size_stack(Event *e) {
    uint64_t st;
    if (!c_.template take<kSize>(&e->size) || !c_.template take<kStack>(&st)) return false;
    e->stack = uint32_t(st);
    return true;
  }
  template <Column C>
  __attribute__((always_inline)) bool take_u32(uint32_t *out) {
    uint64_t v;
    if (!c_.template take<C>(&v)) return false;
    *out = uint32_t(v);
    return true;
  }

  static constexpr uint32_t kSiteSlots = 1024;
  struct Cursor {
    uint32_t stack = 0;
    uint64_t last_freed = 0;
  };
  Columns c_;
  Cursor cursor_[kSiteSlots];  // on the stack: a batch is decoded in one go
  int i_ = 0;
  uint64_t time_ = 0;
  uint64_t last_id_ = 0;
  uint64_t last_addr_ = 0;
  std::string error_;
};

template <typename Columns>
__attribute__((always_inline)) inline bool BasicEventDecoder<Columns>::next(Event *e) {
  if (!error_.empty()) return false;
  uint64_t kind64;
  if (!c_.template take<kKind>(&kind64)) return false;
  uint32_t kind = uint32_t(kind64);
  uint64_t dt;
  if (!c_.template take<kTime>(&dt)) {
    error_ = "time column too short";
    return false;
  }
  time_ += dt;
  e->time_ns = time_;
  e->tid = c_.tid();
  e->kind = static_cast<wire::EventKind>(kind);
  e->addr = 0;
  e->size = 0;
  e->stack = 0;
  e->alloc_fn = 0;
  e->pool = 0;
  e->moved = false;
  bool ok = true;
  switch (kind) {
    case wire::ALLOC:  // format 1
    case wire::ALLOC_MALLOC ... wire::ALLOC_NEW_ARRAY:
      ok = take_new_id(&e->id) && take_size_stack(e) &&
           (kind == wire::ALLOC ? take_u32<kFn>(&e->alloc_fn) : (e->alloc_fn = kind - wire::ALLOC_MALLOC, true));
      e->kind = wire::ALLOC;
      break;
    case wire::FREE:
      ok = take_freed(e);
      break;
    case wire::REALLOC: {  // format 1
      uint32_t moved = 0;
      ok = take_ref(&e->id) && take_size_stack(e) && take_u32<kFn>(&e->alloc_fn) && take_u32<kMoved>(&moved);
      e->moved = moved != 0;
      break;
    }
    case wire::REALLOC_IN_PLACE:
    case wire::REALLOC_MOVED:
      ok = take_ref(&e->id) && take_size_stack(e);
      e->kind = wire::REALLOC;
      e->alloc_fn = wire::FN_REALLOC;
      e->moved = kind == wire::REALLOC_MOVED;
      break;
    case wire::POOL_ALLOC:
      ok = take_new_id(&e->id) && take_addr(&e->addr) && take_size_stack(e) && take_u32<kPool>(&e->pool);
      break;
    case wire::POOL_FREE:
      ok = take_freed(e) && take_u32<kPool>(&e->pool);
      break;
    default:
      error_ = "unknown event kind " + std::to_string(kind);
      return false;
  }
  if (!ok) {
    error_ = "a column ends before event " + std::to_string(i_) + " of " + std::to_string(c_.kind_count());
    return false;
  }
  ++i_;
  return true;
}

using EventDecoder = BasicEventDecoder<ProtoColumns>;
using RawEventDecoder = BasicEventDecoder<RawColumns>;

}  // namespace heapsnap::capture
