// Walks the packed columns of an EventBatch (see proto/heapsnap.proto) one event at a time,
// undoing the delta encodings. Columns that run short (a damaged or hostile file) end the walk
// with an error instead of reading out of bounds.
#pragma once
#include <cstdint>
#include <string>

#include "heapsnap.pb.h"

namespace heapsnap::capture {

struct Event {
  wire::EventKind kind;
  uint64_t time_ns;      // since capture start
  uint64_t addr;         // ALLOC, FREE, POOL_*: the block; REALLOC: the old block
  uint64_t new_addr;     // REALLOC
  uint64_t size;         // ALLOC, REALLOC, POOL_ALLOC
  uint32_t stack;        // ALLOC, REALLOC, POOL_ALLOC
  uint32_t alloc_fn;     // ALLOC, REALLOC
  uint32_t pool;         // POOL_*
  uint32_t tid;
};

class EventDecoder {
 public:
  explicit EventDecoder(const wire::EventBatch &b) : b_(b), time_(b.base_time_ns()) {}
  // Decodes the next event into *e. Returns false at the end or on a malformed batch (error()).
  bool next(Event *e);
  const std::string &error() const { return error_; }

 private:
  bool take_addr(uint64_t *out);
  const wire::EventBatch &b_;
  int i_ = 0, t_ = 0, a_ = 0, s_ = 0, k_ = 0, f_ = 0, p_ = 0;
  uint64_t time_;
  uint64_t last_addr_ = 0;
  std::string error_;
};

inline bool EventDecoder::take_addr(uint64_t *out) {
  if (a_ >= b_.addr_delta_size()) return false;
  last_addr_ += uint64_t(b_.addr_delta(a_++));
  *out = last_addr_;
  return true;
}

inline bool EventDecoder::next(Event *e) {
  if (i_ >= b_.kind_size() || !error_.empty()) return false;
  uint32_t kind = b_.kind(i_);
  if (t_ >= b_.time_delta_ns_size()) { error_ = "time column too short"; return false; }
  time_ += b_.time_delta_ns(t_++);
  *e = Event{};
  e->time_ns = time_;
  e->tid = b_.tid();
  e->kind = static_cast<wire::EventKind>(kind);
  bool ok = true;
  switch (kind) {
    case wire::ALLOC:
    case wire::POOL_ALLOC:
      ok = take_addr(&e->addr) && s_ < b_.size_size() && k_ < b_.stack_size();
      if (ok) { e->size = b_.size(s_++); e->stack = b_.stack(k_++); }
      if (ok && kind == wire::ALLOC) {
        ok = f_ < b_.alloc_fn_size();
        if (ok) e->alloc_fn = b_.alloc_fn(f_++);
      }
      if (ok && kind == wire::POOL_ALLOC) {
        ok = p_ < b_.pool_size();
        if (ok) e->pool = b_.pool(p_++);
      }
      break;
    case wire::FREE:
      ok = take_addr(&e->addr);
      break;
    case wire::POOL_FREE:
      ok = take_addr(&e->addr) && p_ < b_.pool_size();
      if (ok) e->pool = b_.pool(p_++);
      break;
    case wire::REALLOC:
      ok = take_addr(&e->addr) && take_addr(&e->new_addr) && s_ < b_.size_size() &&
           k_ < b_.stack_size() && f_ < b_.alloc_fn_size();
      if (ok) { e->size = b_.size(s_++); e->stack = b_.stack(k_++); e->alloc_fn = b_.alloc_fn(f_++); }
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
