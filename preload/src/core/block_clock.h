// The allocation time of each live block in the snapshots' table (info_shadow.h), as a 31-bit
// stamp taken on every allocation of a snapshotting run.
//
// Why not the coarse clock's milliseconds: clock_gettime is a call into the vDSO on the
// allocation path (about 25 instructions there and the callee-saved registers of alloc_info
// around it: bench_fastpath's snapshots mode was 111 instructions a pair over unsampled). Where
// the kernel's own clock source is the TSC (it then trusts it to be invariant and in step on
// every CPU), the stamp is the TSC since the start in units of 2^22 cycles (about 1.4 ms at
// 3 GHz: the coarse clock's 4 ms jiffy is no finer), one rdtsc and no call; the snapshot child
// turns stamps into milliseconds at the rate it measures between the start and now (to_ms).
// Elsewhere the stamp is the coarse clock's milliseconds, as before.
//
// A stamp wraps after 2^31 units: 34 days at 3 GHz, 20 at 5 GHz (as the milliseconds did, at 24).
#pragma once
#include <cstdint>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "core/common.h"
#include "core/tracer.h"

namespace hs::block_clock {

constexpr unsigned kTscShift = 22;
extern bool g_tsc HS_HIDDEN;
extern uint64_t g_tsc0 HS_HIDDEN;

// At the start, with g_start_ns: whether the TSC serves (x86-64, clock source "tsc"), and its
// reading now.
void init();

#if defined(__x86_64__)
// The stamp when g_tsc (the caller's test: a path that makes no call).
HS_INLINE uint32_t tsc_stamp() { return uint32_t((__rdtsc() - g_tsc0) >> kTscShift) & 0x7fffffffu; }
#else
HS_INLINE uint32_t tsc_stamp() { return 0; }  // (g_tsc is never set)
#endif

HS_INLINE uint32_t stamp() {
  if (HS_LIKELY(g_tsc)) return tsc_stamp();
  return uint32_t(coarse_rel_ns() / 1000000) & 0x7fffffffu;
}

// The snapshot child, before it encodes a block: the milliseconds per stamp unit, measured now.
void calibrate();
extern double g_ms_per_stamp HS_HIDDEN;
HS_INLINE uint32_t to_ms(uint32_t s) { return g_tsc ? uint32_t(double(s) * g_ms_per_stamp) : s; }

}  // namespace hs::block_clock
