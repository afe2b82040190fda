// RSS parts over time (issue 32): the shim's smaps_rollup parser on a fixed text, and the
// analyzer's split of a Totals record's rss_parts, which is untrusted input: figures that cannot
// hold together are cut to fit and flagged, and the parts always add up to the RSS.
#include <doctest/doctest.h>

#include "core/rss_rollup.h"
#include "replay/rss_parts.h"

using namespace heapsnap;

TEST_CASE("smaps_rollup's text: Rss, Anonymous, Pss_Shmem, Swap in bytes") {
  const char *text =
      "5633f95a3000-7ffdf120f000 ---p 00000000 00:00 0                          [rollup]\n"
      "Rss:                1712 kB\nPss:                 233 kB\nPss_Shmem:             4 kB\n"
      "Anonymous:           112 kB\nSwap:                  8 kB\n";
  uint64_t rss = 0, anon = 0, shmem = 0, swap = 0;
  REQUIRE(hs::parse_rss_rollup(text, &rss, &anon, &shmem, &swap));
  CHECK(rss == 1712 * 1024);
  CHECK(anon == 112 * 1024);
  CHECK(shmem == 4 * 1024);
  CHECK(swap == 8 * 1024);
  CHECK_FALSE(hs::parse_rss_rollup("Pss: 1 kB\n", &rss, &anon, &shmem, &swap));
  CHECK_FALSE(hs::parse_rss_rollup("Rss: kB\n", &rss, &anon, &shmem, &swap));
}

TEST_CASE("a record's parts add up to its RSS, whatever the figures") {
  wire::Totals t;
  t.set_time_ns(5);
  t.set_heap_bytes(300);
  auto *u = t.mutable_rss_parts();
  u->set_rss(1000);
  u->set_anonymous(600);
  u->set_heapsnap_heap(100);
  u->set_shmem(50);
  auto p = replay::rss_parts_of(t);
  CHECK(p.heap == 300);
  CHECK(p.heapsnap == 100);
  CHECK(p.other_anon == 200);
  CHECK(p.file == 400);
  CHECK(p.shmem == 50);
  CHECK_FALSE(p.clamped);
  // Damaged or racing figures: anonymous above rss, a heap and heapsnap's own above anonymous.
  u->set_anonymous(5000);
  u->set_heapsnap_heap(UINT64_MAX);
  u->set_shmem(UINT64_MAX);
  t.set_heap_bytes(-7);
  p = replay::rss_parts_of(t);
  CHECK(p.clamped);
  CHECK(p.heap + p.heapsnap + p.other_anon + p.file == p.rss);
  CHECK(p.heap == 0);
  CHECK(p.shmem <= p.file);
  t.set_heap_bytes(INT64_MAX);
  p = replay::rss_parts_of(t);
  CHECK(p.heap + p.heapsnap + p.other_anon + p.file == p.rss);
}

TEST_CASE("rollup_gap_ticks: the RSS reads take at most 0.5% of a core, at least every min_ticks") {
  // Default settings (100 ms ticks, every 10th): a cheap read keeps the 10.
  CHECK(hs::rollup_gap_ticks(200000, 100, 10) == 10);      // 0.2 ms: 150 MiB resident
  CHECK(hs::rollup_gap_ticks(5000000, 100, 10) == 10);     // 5 ms: 200 x 5 ms = 1 s = 10 ticks
  CHECK(hs::rollup_gap_ticks(13400000, 100, 10) == 26);    // 1 GiB resident: 2.68 s
  CHECK(hs::rollup_gap_ticks(1000000000, 100, 10) == 600); // bounded: a minute
  CHECK(hs::rollup_gap_ticks(0, 100, 0) == 1);             // (never 0: the next tick at the soonest)
  CHECK(hs::rollup_gap_ticks(1000000, 1, 1) == 200);       // 1 ms ticks
  CHECK(hs::rollup_gap_ticks(1000000000, 100, 1000) == 1000);  // the user's 1000 kept
}
