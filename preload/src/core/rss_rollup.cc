#include "core/rss_rollup.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/private_heap.h"
#include "core/proc_maps.h"
#include "core/tracer.h"

namespace hs {
namespace {

// The value of the line starting with `name` (e.g. "Rss:"), in bytes; false if absent.
bool field(const char *text, const char *name, uint64_t *out) {
  size_t n = strlen(name);
  for (const char *p = text; p && *p;) {
    if (strncmp(p, name, n) == 0) {
      p += n;
      while (*p == ' ' || *p == '\t') ++p;
      uint64_t v = 0;
      int digits = 0;
      while (*p >= '0' && *p <= '9' && digits < 19) v = v * 10 + uint64_t(*p++ - '0'), ++digits;
      if (!digits) return false;
      *out = v * 1024;  // the kernel writes kB
      return true;
    }
    p = strchr(p, '\n');
    if (p) ++p;
  }
  return false;
}

}  // namespace

bool parse_rss_rollup(const char *text, uint64_t *rss, uint64_t *anon, uint64_t *shmem, uint64_t *swap) {
  if (!field(text, "Rss:", rss)) return false;
  if (!field(text, "Anonymous:", anon)) *anon = 0;
  if (!field(text, "Pss_Shmem:", shmem)) *shmem = 0;  // (kernels before 5.14 lack it)
  if (!field(text, "Swap:", swap)) *swap = 0;
  return true;
}

void read_rss_rollup(TotalsView *t) {
  // Also called on the program's thread (its exit, an explicit flush): its errno stays its own.
  ErrnoSaver keep;
  t->has_rollup = false;
  uint64_t start = mono_ns();
  // About 900 bytes on current kernels; room for new lines it may gain.
  char buf[4096];
  if (read_small_file("/proc/self/smaps_rollup", buf, sizeof(buf)) <= 0) return;
  if (!parse_rss_rollup(buf, &t->rollup_rss, &t->rollup_anon, &t->rollup_shmem, &t->rollup_swap)) return;
  t->rollup_heapsnap_heap = heap::held_bytes();
  t->rollup_cost_ns = mono_ns() - start;
  t->has_rollup = true;
}

uint32_t rollup_gap_ticks(uint64_t cpu_ns, uint32_t flush_ms, uint32_t min_ticks) {
  const uint64_t tick_ns = uint64_t(flush_ms ? flush_ms : 1) * 1000000ull;
  uint64_t gap = cpu_ns * 200 / tick_ns;
  if (gap < min_ticks) gap = min_ticks;
  if (gap < 1) gap = 1;
  // (A minute at the default tick, so that the timeline keeps a series; unless the user asked for
  // fewer reads.)
  if (gap > 600 && gap > min_ticks) gap = std::max<uint64_t>(600, min_ticks);
  return uint32_t(gap);
}

}  // namespace hs
