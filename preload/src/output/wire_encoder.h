// Protocol-buffer wire encoding, written by hand for the shim.
//
// Why not libprotobuf here: generated message classes allocate through operator new (the
// program's allocator, which we are interposing), are not safe to use from allocation hooks, and
// cost far more than appending varints to a buffer. The analyzer parses with libprotobuf, and
// tests/unit/wire_roundtrip_test.cc checks that both agree on every record kind.
#pragma once
#include <cstdint>
#include <cstring>
#include <utility>

#include "core/common.h"
#include "core/private_heap.h"

namespace hs::wire {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };

HS_INLINE uint8_t *put_varint(uint8_t *out, uint64_t v) {
  while (v >= 0x80) {
    *out++ = uint8_t(v) | 0x80;
    v >>= 7;
  }
  *out++ = uint8_t(v);
  return out;
}
HS_INLINE uint64_t zigzag(int64_t v) { return (uint64_t(v) << 1) ^ uint64_t(v >> 63); }
HS_INLINE size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) { v >>= 7; ++n; }
  return n;
}

// A growable byte buffer in the tracer's private heap. Allocation failure is sticky: the buffer
// reports failed() and the caller drops the record (tracing degrades, the program goes on).
class Buf {
 public:
  Buf() = default;
  Buf(const Buf &) = delete;
  Buf &operator=(const Buf &) = delete;
  ~Buf() { heap::release(data_); }

  uint8_t *data() const { return data_; }
  size_t size() const { return size_; }
  bool failed() const { return failed_; }
  void clear() { size_ = 0; failed_ = false; }
  // Drops what follows the first n bytes (a record cut off by a thread that ended inside it).
  void truncate(size_t n) {
    if (n < size_) size_ = n;
    failed_ = false;
  }
  // Hands the storage over (the caller releases it with heap::release).
  uint8_t *take(size_t *size, size_t *cap) {
    uint8_t *d = data_;
    *size = size_;
    *cap = cap_;
    data_ = nullptr;
    size_ = cap_ = 0;
    return d;
  }
  void swap(Buf &o) {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(cap_, o.cap_);
    std::swap(failed_, o.failed_);
  }

  bool reserve(size_t extra) {
    if (HS_LIKELY(size_ + extra <= cap_)) return true;
    size_t want = cap_ ? cap_ * 2 : 4096;
    while (want < size_ + extra) want *= 2;
    auto *n = static_cast<uint8_t *>(heap::grow(data_, want));
    if (!n) { failed_ = true; return false; }
    data_ = n;
    cap_ = want;
    return true;
  }
  void bytes(const void *p, size_t n) {
    if (!reserve(n)) return;
    memcpy(data_ + size_, p, n);
    size_ += n;
  }
  void varint(uint64_t v) {
    if (!reserve(10)) return;
    size_ = size_t(put_varint(data_ + size_, v) - data_);
  }
  void tag(uint32_t field, WireType t) { varint((uint64_t(field) << 3) | t); }

  // Fields. Zero values are skipped as proto3 does (the reader's defaults are zero).
  void u64(uint32_t field, uint64_t v) { if (v) { tag(field, kVarint); varint(v); } }
  void s64(uint32_t field, int64_t v) { if (v) { tag(field, kVarint); varint(zigzag(v)); } }
  void i64(uint32_t field, int64_t v) { if (v) { tag(field, kVarint); varint(uint64_t(v)); } }
  void boolean(uint32_t field, bool v) { if (v) { tag(field, kVarint); varint(1); } }
  void len(uint32_t field, const void *p, size_t n) {
    tag(field, kLen);
    varint(n);
    bytes(p, n);
  }
  void str(uint32_t field, const char *s) { if (s && *s) len(field, s, strlen(s)); }

  // Nested message: open() reserves room for the length, close() fills it in. The length slot is
  // a fixed 5-byte (non-minimal but valid) varint so that no bytes have to move.
  size_t open(uint32_t field) {
    tag(field, kLen);
    return slot();
  }
  size_t slot() {
    if (!reserve(5)) return size_;
    size_t at = size_;
    size_ += 5;
    return at;
  }
  void close(size_t at) {
    if (failed_) return;
    uint64_t n = size_ - at - 5;
    uint8_t *p = data_ + at;
    for (int i = 0; i < 4; ++i) p[i] = uint8_t(n >> (7 * i)) | 0x80;
    p[4] = uint8_t(n >> 28);
  }

 private:
  uint8_t *data_ = nullptr;
  size_t size_ = 0;
  size_t cap_ = 0;
  bool failed_ = false;
};

// A top-level record in the stream: varint length, then Record{ <field>: body }.
struct RecordMark {
  size_t outer, inner;
};
HS_INLINE RecordMark begin_record(Buf &b, uint32_t record_field) {
  RecordMark m;
  m.outer = b.slot();
  m.inner = b.open(record_field);
  return m;
}
HS_INLINE void end_record(Buf &b, RecordMark m) {
  b.close(m.inner);
  b.close(m.outer);
}

// Record field numbers (proto/heapsnap.proto, message Record).
enum RecordField : uint32_t {
  kProcess = 1, kModule = 2, kModuleUnload = 3, kStack = 4, kEvents = 5, kTotals = 6,
  kThread = 7, kMarker = 8, kEnd = 9, kPool = 10, kMoves = 11, kSnapshotBegin = 12,
  kSnapshotBlocks = 13, kSnapshotEdges = 14, kSnapshotRoots = 15, kSnapshotEnd = 16,
  kSnapshotContents = 17, kFlushEnd = 18, kSnapshotTypes = 19, kSnapshotMemory = 20,
};

}  // namespace hs::wire
