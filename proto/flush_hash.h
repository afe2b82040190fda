// The hash of a flush's records in a frame that spans flushes (format 3.1, FlushEnd in
// heapsnap.proto): part of the capture format, so the shim (preload/src/output/capture_writer.cc) and the
// reader (analyzer/capture/capture_reader.cc) share this one definition.
//
// Why a hash of our own: a zstd frame's checksum covers the frame only once it ends, and the last
// frame of a killed process never ends; this is what lets a reader keep exactly the flushes that
// arrived whole. It guards against damage, not against an adversary: 64 bits, 8 bytes a step
// (about half a cycle a byte), multiply-rotate mixing with a final avalanche. libzstd does not
// export its XXH64, and libxxhash-dev would be a dependency for twenty lines.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace heapsnap_format {

inline uint64_t flush_hash(const void *data, size_t n) {
  constexpr uint64_t k1 = 0x9E3779B97F4A7C15ull, k2 = 0xC2B2AE3D27D4EB4Full;
  const auto *p = static_cast<const uint8_t *>(data);
  uint64_t h = k2 ^ (uint64_t(n) * k1);
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    h ^= w * k1;
    h = ((h << 31) | (h >> 33)) * k2;
  }
  if (n) {
    uint64_t w = 0;
    memcpy(&w, p, n);
    h ^= (w * k1) ^ n;
    h = ((h << 31) | (h >> 33)) * k2;
  }
  h ^= h >> 33;
  h *= k1;
  h ^= h >> 29;
  return h;
}

}  // namespace heapsnap_format
