// The packed columns of SnapshotBlocks and SnapshotEdges records (proto/heapsnap.proto), two ways,
// as event_columns.h does for event batches:
//
//  - ProtoBlocks / ProtoEdges read a message libprotobuf parsed (any valid encoding);
//  - RawBlocks / RawEdges read the message's bytes in place. At 2x10^8 blocks, parsing through
//    libprotobuf (every column copied into a RepeatedField, then read once) was a third of
//    top-retainers' time.
//
// RawMessage::parse accepts exactly the messages libprotobuf would parse to the same values and
// that are in the shim's layout (each column once, packed; scalars as varints); anything else
// (a column split in chunks or unpacked, a group, a malformed varint anywhere) makes it return
// false, and the caller parses the record with libprotobuf, which then decides (and reports a
// record that does not parse exactly as before). Every column is checked whole before use: its
// varints are well formed (10 bytes at most, the last one ends inside it) and counted, so that the
// decoder (snapshot_loader.cc) reads a column only as far as its count allows, without further
// bounds checks.
#pragma once
#include <cstddef>
#include <cstdint>

#include "heapsnap.pb.h"

namespace heapsnap::snapshot {

// A packed column of varints that was checked whole: count values, each well formed.
class PackedColumn {
 public:
  PackedColumn() = default;
  // False if a varint is longer than 10 bytes or the last one runs past end.
  bool check(const uint8_t *p, const uint8_t *end);
  size_t count() const { return count_; }
  // The next value (the caller takes at most count() of them).
  uint64_t u() {
    uint64_t b = *p_++;
    if (__builtin_expect(b < 0x80, 1)) return b;
    return u_long(b);
  }
  // The next value of a sint64 column (zigzag).
  int64_t s() {
    uint64_t v = u();
    return int64_t((v >> 1) ^ (~(v & 1) + 1));
  }

 private:
  uint64_t u_long(uint64_t b0) {
    uint64_t v = b0 & 0x7f;
    for (unsigned i = 1;; ++i) {  // (checked: ends within 10 bytes)
      uint64_t b = *p_++;
      v |= (b & 0x7f) << (7 * i);
      if (b < 0x80) return v;
    }
  }
  const uint8_t *p_ = nullptr;
  size_t count_ = 0;
};

// A message's scalar varint fields and packed columns, by field number (1..kMaxField).
struct RawMessage {
  static constexpr uint32_t kMaxField = 10;
  // packed / scalar: bit f set for each field f of that kind. False: not in the shim's layout or
  // not valid (see above).
  bool parse(const uint8_t *p, size_t n, uint32_t packed, uint32_t scalar);
  PackedColumn column[kMaxField + 1];
  uint64_t value[kMaxField + 1] = {};
};

// SnapshotBlocks, raw: the interface the block decoder (snapshot_loader.cc) reads.
class RawBlocks {
 public:
  bool parse(const uint8_t *p, size_t n) { return m_.parse(p, n, 0x1fc, 0x202); }
  uint32_t index() const { return uint32_t(m_.value[1]); }
  uint32_t first_block() const { return uint32_t(m_.value[9]); }
  size_t addr_count() const { return m_.column[2].count(); }
  size_t size_count() const { return m_.column[3].count(); }
  size_t site_count() const { return m_.column[4].count(); }
  size_t stack_count() const { return m_.column[5].count(); }
  size_t id_count() const { return m_.column[6].count(); }
  size_t time_count() const { return m_.column[7].count(); }
  size_t pool_count() const { return m_.column[8].count(); }
  int64_t addr_delta() { return m_.column[2].s(); }
  uint64_t size() { return m_.column[3].u(); }
  int64_t site_delta() { return m_.column[4].s(); }
  uint32_t stack() { return uint32_t(m_.column[5].u()); }
  uint64_t id() { return m_.column[6].u(); }
  uint32_t time_ms() { return uint32_t(m_.column[7].u()); }
  uint32_t pool() { return uint32_t(m_.column[8].u()); }

 private:
  RawMessage m_;
};

// SnapshotEdges, raw.
class RawEdges {
 public:
  bool parse(const uint8_t *p, size_t n) { return m_.parse(p, n, 0x77c, 0x82); }
  uint32_t index() const { return uint32_t(m_.value[1]); }
  uint32_t base_block() const { return uint32_t(m_.value[7]); }
  size_t from_count() const { return m_.column[2].count(); }
  size_t count_count() const { return m_.column[3].count(); }
  size_t to_count() const { return m_.column[4].count(); }
  size_t interior_count() const { return m_.column[5].count(); }
  size_t offset_count() const { return m_.column[6].count(); }
  uint32_t from_delta() { return uint32_t(m_.column[2].u()); }
  uint32_t count() { return uint32_t(m_.column[3].u()); }
  int64_t to_delta() { return m_.column[4].s(); }
  uint64_t interior_edge() { return m_.column[5].u(); }
  uint32_t offset() { return uint32_t(m_.column[6].u()); }
  size_t vector_edge_count() const { return m_.column[8].count(); }
  size_t vector_size_count() const { return m_.column[9].count(); }
  size_t vector_capacity_count() const { return m_.column[10].count(); }
  uint64_t vector_edge() { return m_.column[8].u(); }
  uint64_t vector_size() { return m_.column[9].u(); }
  uint64_t vector_capacity() { return m_.column[10].u(); }

 private:
  RawMessage m_;
};

// The same interfaces over parsed messages.
template <typename R>
class ProtoCursor {
 public:
  explicit ProtoCursor(const R &r) : r_(r) {}
  size_t count() const { return size_t(r_.size()); }
  auto next() { return r_.Get(i_++); }

 private:
  const R &r_;
  int i_ = 0;
};

class ProtoBlocks {
 public:
  explicit ProtoBlocks(const wire::SnapshotBlocks &b)
      : b_(b), addr_(b.addr_delta()), size_(b.size()), site_(b.call_site_delta()), stack_(b.stack()), id_(b.id()),
        time_(b.time_ms()), pool_(b.pool()) {}
  uint32_t index() const { return b_.index(); }
  uint32_t first_block() const { return b_.first_block(); }
  size_t addr_count() const { return addr_.count(); }
  size_t size_count() const { return size_.count(); }
  size_t site_count() const { return site_.count(); }
  size_t stack_count() const { return stack_.count(); }
  size_t id_count() const { return id_.count(); }
  size_t time_count() const { return time_.count(); }
  size_t pool_count() const { return pool_.count(); }
  int64_t addr_delta() { return addr_.next(); }
  uint64_t size() { return size_.next(); }
  int64_t site_delta() { return site_.next(); }
  uint32_t stack() { return stack_.next(); }
  uint64_t id() { return id_.next(); }
  uint32_t time_ms() { return time_.next(); }
  uint32_t pool() { return pool_.next(); }

 private:
  const wire::SnapshotBlocks &b_;
  ProtoCursor<google::protobuf::RepeatedField<int64_t>> addr_;
  ProtoCursor<google::protobuf::RepeatedField<uint64_t>> size_;
  ProtoCursor<google::protobuf::RepeatedField<int64_t>> site_;
  ProtoCursor<google::protobuf::RepeatedField<uint32_t>> stack_;
  ProtoCursor<google::protobuf::RepeatedField<uint64_t>> id_;
  ProtoCursor<google::protobuf::RepeatedField<uint32_t>> time_, pool_;
};

class ProtoEdges {
 public:
  explicit ProtoEdges(const wire::SnapshotEdges &e)
      : e_(e), from_(e.from_delta()), count_(e.count()), to_(e.to_delta()), interior_(e.interior_edge()),
        offset_(e.offset()), vector_edge_(e.vector_edge()), vector_size_(e.vector_size()),
        vector_capacity_(e.vector_capacity()) {}
  uint32_t index() const { return e_.index(); }
  uint32_t base_block() const { return e_.base_block(); }
  size_t from_count() const { return from_.count(); }
  size_t count_count() const { return count_.count(); }
  size_t to_count() const { return to_.count(); }
  size_t interior_count() const { return interior_.count(); }
  size_t offset_count() const { return offset_.count(); }
  uint32_t from_delta() { return from_.next(); }
  uint32_t count() { return count_.next(); }
  int64_t to_delta() { return to_.next(); }
  uint64_t interior_edge() { return interior_.next(); }
  uint32_t offset() { return offset_.next(); }
  size_t vector_edge_count() const { return vector_edge_.count(); }
  size_t vector_size_count() const { return vector_size_.count(); }
  size_t vector_capacity_count() const { return vector_capacity_.count(); }
  uint64_t vector_edge() { return vector_edge_.next(); }
  uint64_t vector_size() { return vector_size_.next(); }
  uint64_t vector_capacity() { return vector_capacity_.next(); }

 private:
  const wire::SnapshotEdges &e_;
  ProtoCursor<google::protobuf::RepeatedField<uint32_t>> from_, count_;
  ProtoCursor<google::protobuf::RepeatedField<int64_t>> to_;
  ProtoCursor<google::protobuf::RepeatedField<uint64_t>> interior_;
  ProtoCursor<google::protobuf::RepeatedField<uint32_t>> offset_;
  ProtoCursor<google::protobuf::RepeatedField<uint64_t>> vector_edge_, vector_size_, vector_capacity_;
};

}  // namespace heapsnap::snapshot
