// Small helpers shared by every part of the shim.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cerrno>
#include <ctime>

#define HS_LIKELY(x) __builtin_expect(!!(x), 1)
#define HS_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HS_NOINLINE __attribute__((noinline))
#define HS_INLINE inline __attribute__((always_inline))
#define HS_EXPORT extern "C" __attribute__((visibility("default")))
#define HS_TLS __attribute__((tls_model("initial-exec")))
// On the declaration of a global the fast paths read: -fvisibility=hidden covers only definitions,
// so without it every use in another file loads the address from the GOT first.
#define HS_HIDDEN __attribute__((visibility("hidden")))

namespace hs {

// Addresses kept in the tracer's own memory are stored bitwise inverted so that a conservative
// scan of that memory never mistakes them for pointers to heap blocks (see DESIGN.md).
HS_INLINE uint64_t disguise(const void *p) { return ~reinterpret_cast<uint64_t>(p); }
HS_INLINE uint64_t disguise(uint64_t p) { return ~p; }
HS_INLINE uint64_t reveal(uint64_t d) { return ~d; }

HS_INLINE uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}
// The calling thread's CPU time (a system call: the vDSO has no CPU-time clocks); 0 if it fails.
HS_INLINE uint64_t thread_cpu_ns() {
  timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}
// Cheap (vDSO, ~4 ms resolution): used for per-event times, which only need timeline precision.
HS_INLINE uint64_t coarse_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Keeps errno as the program left it across tracer work that may make system calls.
struct ErrnoSaver {
  int saved = errno;
  ~ErrnoSaver() { errno = saved; }
};

// Mixes an address (low bits zero from alignment) into a well spread 64-bit hash.
HS_INLINE uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

}  // namespace hs
