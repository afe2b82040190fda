// Protobuf base-128 varints, read with bounds checks: the reader's record framing and the
// in-place event-column decoder (event_columns.h) share this one definition.
#pragma once
#include <cstddef>
#include <cstdint>

namespace heapsnap::capture {

// Reads a varint at p (at most 10 bytes, not past end). Returns bytes used, 0 if malformed.
inline size_t read_varint(const uint8_t *p, const uint8_t *end, uint64_t *out) {
  uint64_t v = 0;
  for (size_t i = 0; i < 10 && p + i < end; ++i) {
    v |= uint64_t(p[i] & 0x7f) << (7 * i);
    if (!(p[i] & 0x80)) {
      *out = v;
      return i + 1;
    }
  }
  return 0;
}

}  // namespace heapsnap::capture
