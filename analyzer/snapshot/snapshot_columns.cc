#include "snapshot/snapshot_columns.h"

#include <bit>

#include "capture/varint.h"

#if defined(__SSE2__) && defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace heapsnap::snapshot {

// One pass: the bytes with the continuation bit (bit i of a 64-bit mask per 64 bytes) give both
// the count (bytes without it end a varint) and the length check (no run of 10 such bytes: a
// varint of more than 10 bytes, which libprotobuf refuses).
bool PackedColumn::check(const uint8_t *p, const uint8_t *end) {
  p_ = p;
  count_ = 0;
  if (p == end) return true;
  if (end[-1] & 0x80) return false;  // the last varint runs past the column
  size_t ones = 0;                   // continuation bytes just before the current word
  size_t n = 0;
#if defined(__SSE2__) && defined(__x86_64__)
  // Varint ends counted per byte lane (as varint_ends does: no popcount instruction in the
  // baseline x86-64 the release build targets), summed before a lane can pass 255.
  const __m128i minus_one = _mm_set1_epi8(-1);
  __m128i ends = _mm_setzero_si128();
  int rounds = 0;
  while (end - p >= 64) {
    uint64_t m = 0;
    for (int k = 0; k < 4; ++k) {
      __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 16 * k));
      m |= uint64_t(uint32_t(_mm_movemask_epi8(b))) << (16 * k);
      ends = _mm_sub_epi8(ends, _mm_cmpgt_epi8(b, minus_one));
    }
    p += 64;
    if (++rounds == 63) {
      n += capture::sum_byte_lanes(ends);
      ends = _mm_setzero_si128();
      rounds = 0;
    }
    if (m == ~uint64_t(0)) {
      ones += 64;
      if (ones >= 10) return false;
      continue;
    }
    if (ones + size_t(std::countr_one(m)) >= 10) return false;
    // A run of 10 inside the word: bit i of r set when bytes i..i+9 all continue.
    uint64_t r = m;
    for (int s = 1; s < 10; ++s) r &= m >> s;
    // (Bits 55..63 of r look at bytes past the word, shifted in as 0: those runs are the
    // carried ones, checked at the next word.)
    if (r) return false;
    ones = size_t(std::countl_one(m));
  }
  n += capture::sum_byte_lanes(ends);
#endif
  for (; p < end; ++p) {
    if (*p & 0x80) {
      if (++ones >= 10) return false;
    } else {
      ones = 0;
      ++n;
    }
  }
  count_ = n;
  return true;
}

bool RawMessage::parse(const uint8_t *p, size_t n, uint32_t packed, uint32_t scalar) {
  const uint8_t *end = p + n;
  uint32_t seen = 0;
  auto varint = [&](uint64_t *v) {
    size_t used = capture::read_varint(p, end, v);
    p += used;
    return used != 0;
  };
  while (p < end) {
    uint64_t key, v;
    if (!varint(&key)) return false;
    const uint64_t field = key >> 3;
    const uint32_t wt = uint32_t(key & 7);
    if (field == 0) return false;  // libprotobuf refuses field 0
    const uint32_t bit = field <= kMaxField ? uint32_t(1) << field : 0;
    if (bit & packed) {
      if (wt != 2 || (seen & bit)) return false;  // unpacked or split: libprotobuf's job
      if (!varint(&v) || v > uint64_t(end - p)) return false;
      if (!column[field].check(p, p + v)) return false;
      seen |= bit;
      p += v;
      continue;
    }
    if (bit & scalar) {
      if (wt != 0 || !varint(&v)) return false;
      value[field] = v;  // (the last one wins, as in libprotobuf)
      continue;
    }
    if (!capture::skip_wire_field(p, end, wt)) return false;  // unknown fields: skipped
  }
  return true;
}

}  // namespace heapsnap::snapshot
