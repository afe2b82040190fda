#include "core/block_clock.h"

#include <cstring>

#include "core/proc_maps.h"

namespace hs::block_clock {

bool g_tsc = false;
uint64_t g_tsc0 = 0;
double g_ms_per_stamp = 1.0;

void init() {
#if defined(__x86_64__)
  // The kernel picks the TSC as its clock source only when it is invariant and synchronised
  // across CPUs (it falls back to hpet or acpi_pm otherwise, and says so here).
  char buf[64] = {};
  const long n = read_small_file("/sys/devices/system/clocksource/clocksource0/current_clocksource", buf,
                                 sizeof(buf));
  g_tsc = n >= 3 && strncmp(buf, "tsc", 3) == 0 && (n == 3 || buf[3] == '\n');
  // (Right after g_start_ns: the two clocks' zeros a few nanoseconds apart.)
  g_tsc0 = __rdtsc();
#endif
}

void calibrate() {
#if defined(__x86_64__)
  if (!g_tsc) return;
  const uint64_t cycles = __rdtsc() - g_tsc0, ns = now_rel_ns();
  // (Under a microsecond since the start: every stamp is 0 anyway.)
  g_ms_per_stamp = cycles > 1000 ? double(uint64_t(1) << kTscShift) * (double(ns) / 1e6) / double(cycles) : 0.0;
#endif
}

}  // namespace hs::block_clock
