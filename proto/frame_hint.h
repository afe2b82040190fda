// The frame hint (format 3.x, optional): a zstd skippable frame written right before a frame,
// saying which Record fields that frame holds, its compressed size and the hash of its
// compressed bytes. Part of the capture format, so the shim's snapshot child
// (preload/src/snapshot/child_heap.cc), the analyzer's writer (analyzer/capture/capture_file_writer.cc)
// and the reader (analyzer/capture/capture_reader.cc) share this one definition.
//
// Why: a reader that wants only some records (`snapshots` wants each snapshot's begin and end,
// a replay wants no snapshot's blocks and edges) used to decompress every frame to find them:
// listing the snapshots of a 10^8-block capture decompressed its 1.5 GiB of block and edge
// records, and top-retainers did that again before loading the one it chose. With a hint, a
// frame none of whose fields are wanted is stepped over once its compressed bytes hash to the
// hint's value (a few percent of the cost of decompressing them); a frame that does not is read
// as before, so a damaged one is still found and reported.
//
// Layout (little endian): u32 magic 0x184D2A5D (a zstd skippable frame: older readers skip it),
// u32 payload length 32, then u64 fields (bit f set: the frame holds a Record with field f, for
// f < 63; bit 63 stands for every field >= 63), u64 the frame's compressed size, u64 flush_hash
// of its compressed bytes, u64 flush_hash of the three before it (the hint's own check: a reader
// that decompresses the frame anyway still finds a damaged hint without hashing the frame).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "flush_hash.h"

namespace heapsnap_format {

inline constexpr uint32_t kFrameHintMagic = 0x184D2A5D;
inline constexpr size_t kFrameHintBytes = 40;

struct FrameHint {
  uint64_t fields;
  uint64_t frame_size;
  uint64_t hash;
};

inline uint64_t field_bit(uint64_t field) { return uint64_t(1) << (field < 63 ? field : 63); }

// The fields of the Records in data (n bytes of length-prefixed Record messages, as in a frame);
// all bits set when they do not parse as such.
inline uint64_t record_fields(const uint8_t *data, size_t n) {
  auto varint = [](const uint8_t *&p, const uint8_t *end, uint64_t *v) {
    uint64_t r = 0;
    for (int shift = 0; p < end && shift < 64; shift += 7) {
      uint8_t b = *p++;
      r |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *v = r;
        return true;
      }
    }
    return false;
  };
  uint64_t mask = 0;
  const uint8_t *p = data, *end = data + n;
  while (p < end) {
    uint64_t len, tag;
    if (!varint(p, end, &len) || len > uint64_t(end - p)) return ~uint64_t(0);
    const uint8_t *next = p + len;
    if (len) {
      if (!varint(p, next, &tag)) return ~uint64_t(0);
      mask |= field_bit(tag >> 3);
    }
    p = next;
  }
  return mask;
}

inline void put_frame_hint(uint8_t out[kFrameHintBytes], const FrameHint &h) {
  const uint32_t magic = kFrameHintMagic, len = kFrameHintBytes - 8;
  memcpy(out, &magic, 4);
  memcpy(out + 4, &len, 4);
  memcpy(out + 8, &h.fields, 8);
  memcpy(out + 16, &h.frame_size, 8);
  memcpy(out + 24, &h.hash, 8);
  const uint64_t check = flush_hash(out + 8, 24);
  memcpy(out + 32, &check, 8);
}

enum class HintRead { kNone, kHint, kDamaged };

// Whether p (a skippable frame of fsize bytes) is a frame hint: kHint with *h filled; kDamaged
// when it has the hint's magic but not its length or its own check.
inline HintRead get_frame_hint(const uint8_t *p, size_t fsize, FrameHint *h) {
  uint32_t magic, len;
  if (fsize < 8) return HintRead::kNone;
  memcpy(&magic, p, 4);
  memcpy(&len, p + 4, 4);
  if (magic != kFrameHintMagic) return HintRead::kNone;
  uint64_t check;
  if (len != kFrameHintBytes - 8 || fsize != kFrameHintBytes) return HintRead::kDamaged;
  memcpy(&check, p + 32, 8);
  if (check != flush_hash(p + 8, 24)) return HintRead::kDamaged;
  memcpy(&h->fields, p + 8, 8);
  memcpy(&h->frame_size, p + 16, 8);
  memcpy(&h->hash, p + 24, 8);
  return HintRead::kHint;
}

}  // namespace heapsnap_format
