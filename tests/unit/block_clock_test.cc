// The live-block table's allocation stamps (core/block_clock.h): taken on the TSC where the
// kernel's clock source is the TSC, turned into milliseconds by the snapshot child's calibration.
// The bounds are the clock's own readings, never a guess at how long a sleep took.
#include <doctest/doctest.h>

#include <time.h>

#include "core/block_clock.h"
#include "core/tracer.h"

using namespace hs;

TEST_CASE("block_clock: a stamp becomes the milliseconds since the start, on either clock") {
  const uint64_t saved_start = g_start_ns;
  for (int use_tsc = 0; use_tsc < 2; ++use_tsc) {
    g_start_ns = mono_ns();
    block_clock::init();
    if (use_tsc && !block_clock::g_tsc) {
      MESSAGE("the clock source is not the TSC here: the coarse-clock path alone is checked");
      break;
    }
    if (!use_tsc) block_clock::g_tsc = false;
    const uint32_t first = block_clock::stamp();
    timespec pause{0, 60 * 1000000};
    while (nanosleep(&pause, &pause) != 0) {
    }
    const uint64_t before_ms = now_rel_ns() / 1000000;  // at least 60
    const uint32_t s = block_clock::stamp();
    block_clock::calibrate();
    const uint64_t after_ms = now_rel_ns() / 1000000;
    const uint32_t ms = block_clock::to_ms(s);
    INFO("tsc " << block_clock::g_tsc << ": stamp " << s << " -> " << ms << " ms, clock " << before_ms << ".."
                << after_ms << " ms");
    CHECK(block_clock::to_ms(first) <= 5);  // (the coarse clock: one 4 ms jiffy)
    CHECK(before_ms >= 60);
    // One stamp unit (2^22 cycles: under 5 ms above 1 GHz) and one jiffy of slack either way.
    CHECK(ms + 10 >= before_ms);
    CHECK(ms <= after_ms + 5);
  }
  g_start_ns = saved_start;
}
