// An event batch decoded into an array: decode_batch's events, in order, as plain values. The
// reader's read-ahead thread (and the replay thread, when it would otherwise wait) decodes
// batches into these, and the replay thread applies them (CaptureReader::
// set_decoded_events_handler): decoding was 45% of the replay's instructions, and the two halves
// of the work then run on two cores.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "capture/batch_decoder.h"
#include "capture/event_columns.h"

namespace heapsnap::capture {

// 32 bytes. POOL_ALLOC takes two entries: the event, then one whose id is the object's address
// and whose stack is its pool (pool events are rare: the common ones stay small).
struct DecodedEvent {
  uint64_t time_ns, id;
  uint64_t size;         // ALLOC, REALLOC, POOL_ALLOC
  uint32_t stack;        // ALLOC, REALLOC, POOL_ALLOC; POOL_FREE: the pool
  uint8_t kind;          // wire::ALLOC, FREE, REALLOC, POOL_ALLOC or POOL_FREE (format 2's kinds folded)
  bool moved;            // REALLOC
};
static_assert(sizeof(DecodedEvent) == 32);

class DecodedBatch {
 public:
  // Batches with more events than this are not taken (the shim writes at most 4096): the
  // array's memory stays bounded whatever a file says.
  static constexpr size_t kMaxEvents = 16384;

  // Decodes the batch at p (n bytes, kDecodePadding readable bytes after them). False: not the
  // shim's layout (see RawColumns::parse) or possibly more than kMaxEvents events; the caller
  // then takes the record another way. error() is decode_batch's: the events before it are here.
  bool decode(const uint8_t *p, size_t n, SiteCursors &cursors) {
    RawColumns cols;
    if (!cols.parse(p, n)) return false;
    // Every event has a kind varint of at least one byte; POOL_ALLOC takes two entries.
    size_t most = cols.begin(kKind) ? size_t(cols.end(kKind) - cols.begin(kKind)) : 0;
    if (most > kMaxEvents) return false;
    if (cols.begin(kPool)) most *= 2;
    if (most > cap_) {
      ev_.reset(new DecodedEvent[most]);
      cap_ = most;
    }
    tid_ = cols.tid();
    Append a{ev_.get(), 0};
    error_ = decode_batch(cols, cursors, a);
    n_ = a.n;
    max_time_ = a.max_time;
    max_stack_ = a.max_stack;
    zero_id_ = a.zero_id;
    return true;
  }

  uint32_t tid() const { return tid_; }
  // Facts about the whole batch, gathered here on the decoding thread so that the replay thread
  // (the pipeline's slower half) checks them once per batch instead of once per event: the latest
  // event time, the largest stack id an event names (pools are not stacks), and whether an event
  // names block id 0.
  uint64_t max_time() const { return max_time_; }
  uint32_t max_stack() const { return max_stack_; }
  bool zero_id() const { return zero_id_; }
  size_t size() const { return n_; }  // entries
  const DecodedEvent &operator[](size_t i) const { return ev_[i]; }
  const std::string &error() const { return error_; }

 private:
  struct Append {
    DecodedEvent *ev;
    size_t n;
    uint64_t max_time = 0;
    uint32_t max_stack = 0;
    bool zero_id = false;
    void seen(uint64_t t, uint64_t id) {
      max_time = t > max_time ? t : max_time;
      zero_id |= id == 0;
    }
    void seen(uint64_t t, uint64_t id, uint32_t stack) {
      seen(t, id);
      max_stack = stack > max_stack ? stack : max_stack;
    }
    void alloc(uint64_t t, uint64_t id, uint64_t size, uint32_t stack) {
      seen(t, id, stack);
      ev[n++] = {t, id, size, stack, wire::ALLOC, false};
    }
    void free(uint64_t t, uint64_t id) {
      seen(t, id);
      ev[n++] = {t, id, 0, 0, wire::FREE, false};
    }
    void realloc(uint64_t t, uint64_t id, uint64_t size, uint32_t stack, bool moved) {
      seen(t, id, stack);
      ev[n++] = {t, id, size, stack, wire::REALLOC, moved};
    }
    void pool_alloc(uint64_t t, uint64_t id, uint64_t addr, uint64_t size, uint32_t stack, uint32_t pool) {
      seen(t, id, stack);
      ev[n++] = {t, id, size, stack, wire::POOL_ALLOC, false};
      ev[n++] = {t, addr, 0, pool, wire::POOL_ALLOC, false};
    }
    void pool_free(uint64_t t, uint64_t id, uint32_t pool) {
      seen(t, id);
      ev[n++] = {t, id, 0, pool, wire::POOL_FREE, false};
    }
  };

  std::unique_ptr<DecodedEvent[]> ev_;
  size_t cap_ = 0, n_ = 0;
  uint64_t max_time_ = 0;
  uint32_t max_stack_ = 0;
  bool zero_id_ = false;
  uint32_t tid_ = 0;
  std::string error_;
};

}  // namespace heapsnap::capture
