// The packed columns of an EventBatch (proto/heapsnap.proto), two ways:
//
//  - ProtoColumns reads a batch libprotobuf parsed (any valid encoding);
//  - RawColumns reads the batch's bytes in place: each packed column is a span of varints that
//    the decoder consumes as it goes. Parsing a batch through libprotobuf first copied every
//    column into a RepeatedField (a quarter of the replay's instructions, plus the copies) only
//    for the decoder to read each value once.
//
// RawColumns::parse accepts what the shim writes (each column once, packed) and any unknown
// fields; anything else that protobuf allows (a column split in several chunks, unpacked
// repeated values) makes it return false, and the caller falls back to libprotobuf.
#pragma once
#include <cstddef>
#include <cstdint>

#include "capture/varint.h"
#include "heapsnap.pb.h"

namespace heapsnap::capture {

enum Column : int { kKind, kTime, kAddr, kSize, kStack, kFn, kPool, kIdDelta, kRef, kMoved, kColumns };

class ProtoColumns {
 public:
  explicit ProtoColumns(const wire::EventBatch &b) : b_(b) {}
  uint32_t tid() const { return b_.tid(); }
  uint64_t base_time_ns() const { return b_.base_time_ns(); }
  uint64_t base_id() const { return b_.base_id(); }
  size_t kind_count() const { return size_t(b_.kind_size()); }

  // Next value of column C (zigzag columns already decoded, as int64 bits); false at its end.
  template <Column C>
  bool take(uint64_t *v) {
    int &i = at_[C];
    if constexpr (C == kKind) return get(b_.kind(), i, v);
    else if constexpr (C == kTime) return get(b_.time_delta_ns(), i, v);
    else if constexpr (C == kAddr) return get(b_.addr_delta(), i, v);
    else if constexpr (C == kSize) return get(b_.size(), i, v);
    else if constexpr (C == kStack) return get(b_.stack(), i, v);
    else if constexpr (C == kFn) return get(b_.alloc_fn(), i, v);
    else if constexpr (C == kPool) return get(b_.pool(), i, v);
    else if constexpr (C == kIdDelta) return get(b_.id_delta(), i, v);
    else if constexpr (C == kRef) return get(b_.ref(), i, v);
    else return get(b_.moved(), i, v);
  }

 private:
  template <typename R>
  static bool get(const R &r, int &i, uint64_t *v) {
    if (i >= r.size()) return false;
    *v = uint64_t(r.Get(i++));
    return true;
  }
  const wire::EventBatch &b_;
  int at_[kColumns] = {};
};

class RawColumns {
 public:
  // Reads the batch's scalar fields and locates its columns. False: not in the shim's layout
  // (use libprotobuf) or malformed.
  bool parse(const uint8_t *p, size_t n) {
    const uint8_t *end = p + n;
    bool seen[kColumns] = {};
    while (p < end) {
      uint64_t key;
      if (!varint(p, end, &key)) return false;
      uint32_t field = uint32_t(key >> 3), wt = uint32_t(key & 7);
      int col = column_of(field);
      if (col >= 0) {
        if (wt != 2 || seen[col]) return false;  // unpacked or split column: libprotobuf's job
        uint64_t len;
        if (!varint(p, end, &len) || len > uint64_t(end - p)) return false;
        seen[col] = true;
        col_[col] = {p, p + len};
        p += len;
        continue;
      }
      if (wt == 0) {
        uint64_t v;
        if (!varint(p, end, &v)) return false;
        if (field == 1) tid_ = uint32_t(v);
        else if (field == 2) base_time_ = v;
        else if (field == 10) base_id_ = v;
      } else if (!skip_wire_field(p, end, wt)) {
        return false;  // (other fields skipped; groups and invalid wire types refused)
      }
    }
    return true;
  }

  uint32_t tid() const { return tid_; }
  uint64_t base_time_ns() const { return base_time_; }
  uint64_t base_id() const { return base_id_; }
  // Column C's bytes not taken yet (null when the batch has no such column).
  const uint8_t *begin(Column c) const { return col_[c].p; }
  const uint8_t *end(Column c) const { return col_[c].end; }
  // Events in the batch: varints left in the kind column, plus those taken (only for messages).
  size_t kind_count() const { return kinds_taken_ + varint_ends(col_[kKind].p, col_[kKind].end); }

  template <Column C>
  __attribute__((always_inline)) bool take(uint64_t *v) {
    Span &s = col_[C];
    if (__builtin_expect(s.p >= s.end, 0)) return false;
    if (__builtin_expect(*s.p < 0x80, 1)) {
      *v = *s.p++;
    } else if (!varint(s.p, s.end, v)) {
      s.p = s.end;  // a truncated varint ends the column
      return false;
    }
    if constexpr (C == kAddr || C == kIdDelta || C == kRef) *v = (*v >> 1) ^ (~(*v & 1) + 1);  // zigzag
    if constexpr (C == kKind) ++kinds_taken_;
    return true;
  }

 private:
  struct Span {
    const uint8_t *p = nullptr, *end = nullptr;
  };
  static int column_of(uint32_t field) {
    switch (field) {
      case 3: return kKind;
      case 4: return kTime;
      case 5: return kAddr;
      case 6: return kSize;
      case 7: return kStack;
      case 8: return kFn;
      case 9: return kPool;
      case 11: return kIdDelta;
      case 12: return kRef;
      case 13: return kMoved;
      default: return -1;
    }
  }
  static bool varint(const uint8_t *&p, const uint8_t *end, uint64_t *out) {
    size_t n = read_varint(p, end, out);
    p += n;
    return n != 0;
  }
  Span col_[kColumns];
  uint32_t tid_ = 0;
  uint64_t base_time_ = 0, base_id_ = 0;
  size_t kinds_taken_ = 0;
};

}  // namespace heapsnap::capture
