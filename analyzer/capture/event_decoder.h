// Walks the packed columns of an EventBatch (see proto/heapsnap.proto) one event at a time,
// undoing the delta encodings. Columns that run short (a damaged or hostile file) end the walk
// with an error instead of reading out of bounds.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "heapsnap.pb.h"

namespace heapsnap::capture {

struct Event {
  wire::EventKind kind;
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

class EventDecoder {
 public:
  explicit EventDecoder(const wire::EventBatch &b)
      : b_(b), time_(b.base_time_ns()), last_id_(b.base_id()) {}
  // Decodes the next event into *e. Returns false at the end or on a malformed batch (error()).
  bool next(Event *e);
  const std::string &error() const { return error_; }
  int position() const { return i_; }

 private:
  bool take_addr(uint64_t *out) {
    if (a_ >= b_.addr_delta_size()) return false;
    last_addr_ += uint64_t(b_.addr_delta(a_++));
    *out = last_addr_;
    return true;
  }
  bool take_new_id(uint64_t *out) {
    if (d_ >= b_.id_delta_size()) return false;
    last_id_ += uint64_t(b_.id_delta(d_++));
    *out = last_id_;
    return true;
  }
  // FREE: see proto/heapsnap.proto, EventBatch (per-site cursors, emptied every batch).
  bool take_freed(Event *e) {
    if (k_ >= b_.stack_size() || r_ >= b_.ref_size()) return false;
    uint32_t site = b_.stack(k_++);
    int64_t delta = b_.ref(r_++);
    Cursor &c = cursor_[site % kSiteSlots];
    uint64_t id = (site && c.stack == site) ? c.last_freed - uint64_t(delta) : last_id_ - uint64_t(delta);
    c = {site, id};
    e->id = id;
    e->stack = site;
    return true;
  }
  bool take_ref(uint64_t *out) {
    if (r_ >= b_.ref_size()) return false;
    *out = last_id_ - uint64_t(b_.ref(r_++));
    return true;
  }
  bool take_size_stack(Event *e) {
    if (s_ >= b_.size_size() || k_ >= b_.stack_size()) return false;
    e->size = b_.size(s_++);
    e->stack = b_.stack(k_++);
    return true;
  }
  bool take_fn(Event *e) {
    if (f_ >= b_.alloc_fn_size()) return false;
    e->alloc_fn = b_.alloc_fn(f_++);
    return true;
  }
  bool take_pool(Event *e) {
    if (p_ >= b_.pool_size()) return false;
    e->pool = b_.pool(p_++);
    return true;
  }

  static constexpr uint32_t kSiteSlots = 1024;
  struct Cursor {
    uint32_t stack = 0;
    uint64_t last_freed = 0;
  };
  std::vector<Cursor> cursor_ = std::vector<Cursor>(kSiteSlots);
  const wire::EventBatch &b_;
  int i_ = 0, t_ = 0, a_ = 0, s_ = 0, k_ = 0, f_ = 0, p_ = 0, d_ = 0, r_ = 0, m_ = 0;
  uint64_t time_;
  uint64_t last_id_;
  uint64_t last_addr_ = 0;
  std::string error_;
};

inline bool EventDecoder::next(Event *e) {
  if (i_ >= b_.kind_size() || !error_.empty()) return false;
  uint32_t kind = b_.kind(i_);
  if (t_ >= b_.time_delta_ns_size()) {
    error_ = "time column too short";
    return false;
  }
  time_ += b_.time_delta_ns(t_++);
  *e = Event{};
  e->time_ns = time_;
  e->tid = b_.tid();
  e->kind = static_cast<wire::EventKind>(kind);
  bool ok = true;
  switch (kind) {
    case wire::ALLOC:
      ok = take_new_id(&e->id) && take_size_stack(e) && take_fn(e);
      break;
    case wire::FREE:
      ok = take_freed(e);
      break;
    case wire::REALLOC:
      ok = take_ref(&e->id) && take_size_stack(e) && take_fn(e) && m_ < b_.moved_size();
      if (ok) e->moved = b_.moved(m_++) != 0;
      break;
    case wire::POOL_ALLOC:
      ok = take_new_id(&e->id) && take_addr(&e->addr) && take_size_stack(e) && take_pool(e);
      break;
    case wire::POOL_FREE:
      ok = take_freed(e) && take_pool(e);
      break;
    default:
      error_ = "unknown event kind " + std::to_string(kind);
      return false;
  }
  if (!ok) {
    error_ = "a column ends before event " + std::to_string(i_) + " of " +
             std::to_string(b_.kind_size());
    return false;
  }
  ++i_;
  return true;
}

}  // namespace heapsnap::capture
