// Protobuf base-128 varints, read with bounds checks: the reader's record framing and the
// in-place event-column decoder (event_columns.h) share this one definition; and counted, for the
// event decoders (event_columns.h, batch_decoder.h).
#pragma once
#include <cstddef>
#include <cstdint>
#if defined(__SSE2__) && defined(__x86_64__)
#include <emmintrin.h>
#endif

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

// Steps p over one field's value of wire type wt (0 varint, 1 fixed64, 2 length-delimited,
// 5 fixed32), not past end: what a raw decoder does with a field it does not read. False when
// the value is malformed or runs past end, or for groups and invalid wire types (libprotobuf's
// job, or an error).
inline bool skip_wire_field(const uint8_t *&p, const uint8_t *end, uint32_t wt) {
  uint64_t v;
  size_t used;
  switch (wt) {
    case 0:
      if (!(used = read_varint(p, end, &v))) return false;
      p += used;
      return true;
    case 1:
      if (end - p < 8) return false;
      p += 8;
      return true;
    case 2:
      if (!(used = read_varint(p, end, &v)) || v > uint64_t(end - p - used)) return false;
      p += used + v;
      return true;
    case 5:
      if (end - p < 4) return false;
      p += 4;
      return true;
    default: return false;
  }
}

#if defined(__SSE2__) && defined(__x86_64__)
// The sum of a vector's 16 byte lanes (counters that batch_decoder.h and varint_ends keep per
// byte, flushed before any can pass 255).
inline size_t sum_byte_lanes(__m128i c) {
  __m128i s = _mm_sad_epu8(c, _mm_setzero_si128());
  return size_t(_mm_cvtsi128_si64(s)) + size_t(_mm_cvtsi128_si64(_mm_unpackhi_epi64(s, s)));
}
#endif

// Varints that end in [p, end): bytes without the continuation bit. With SSE2 on x86-64 (which
// always has it): per 16 bytes a compare and a subtract into byte counters, summed every 255
// rounds; the compiler's own vectorisation of the plain loop widened every count to 64 bits (a
// fifth of the batch decoder's instructions went to counting).
inline size_t varint_ends(const uint8_t *p, const uint8_t *end) {
  size_t n = 0;
#if defined(__SSE2__) && defined(__x86_64__)
  const __m128i minus_one = _mm_set1_epi8(-1);
  while (end - p >= 16) {
    __m128i acc = _mm_setzero_si128();
    for (int r = 0; r < 255 && end - p >= 16; ++r, p += 16) {
      __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
      acc = _mm_sub_epi8(acc, _mm_cmpgt_epi8(b, minus_one));  // -(-1) per byte under 0x80
    }
    n += sum_byte_lanes(acc);
  }
#endif
  for (; p < end; ++p) n += *p < 0x80;
  return n;
}

}  // namespace heapsnap::capture
