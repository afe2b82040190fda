// Settings read once from the environment (HEAPSNAP_*), before tracing starts.
#pragma once
#include <cstddef>
#include <cstdint>

namespace hs {

enum class ForkMode { follow, stop };

struct Config {
  char output[4096];          // HEAPSNAP_OUTPUT, '%p' replaced by the pid
  uint64_t sample_bytes;      // HEAPSNAP_SAMPLE_BYTES (mean bytes between samples; 1 = all)
  int max_stack_depth;        // HEAPSNAP_STACK_DEPTH
  ForkMode fork_mode;         // HEAPSNAP_FORK=follow|stop
  bool no_follow_exec;        // HEAPSNAP_NO_FOLLOW=1: exec'd programs are not traced
  uint32_t flush_ms;          // HEAPSNAP_FLUSH_MS: maximum time between frames
  uint32_t rss_parts_ticks;   // HEAPSNAP_RSS_PARTS_TICKS: smaps_rollup read every N flushes (0 = never)
  bool debug;                 // HEAPSNAP_DEBUG=1: the shim says on stderr why it stopped tracing
  int zstd_level;             // HEAPSNAP_ZSTD_LEVEL (1..19)
  bool zstd_level_given;      // set by HEAPSNAP_ZSTD_LEVEL: used as is (no adaptive level)
  int unwinder;               // HEAPSNAP_UNWINDER=fast|libunwind|check (unwind::Mode)
  char unwind_check[512];     // HEAPSNAP_UNWIND_CHECK: check mode's report file
  // HEAPSNAP_TEST_CHILD_HANDSHAKE=DIR, a test hook (tests/integration/memory_cases.py, skew): each
  // snapshot child creates DIR/forked, then waits for DIR/go (at most 30 s) before it reads the
  // program's smaps, so that a test program can change its memory between the fork and the read.
  char test_child_handshake[256];
  // HEAPSNAP_TEST_CHILD_ERROR=1, a test hook (tests/integration/snapshot_cases.py, child_error):
  // each snapshot child ends with an error of its own, said in its end record (exit 4), as a
  // child out of memory would.
  bool test_child_error;
  // HEAPSNAP_TEST_TICK_IN_SNAPSHOT_APPEND=1, a test hook (tests/integration/roots_cases.py,
  // before_destructors_tick): a thread that has reaped a snapshot child waits, before it appends
  // the child's file, for two whole ticks of the writer thread, if the writer can tick then (it
  // runs, and the flush lock is not this thread's). That interleaving, forced, is what corrupted
  // captures under load when nothing held the writer off.
  bool test_tick_in_snapshot_append;
  // HEAPSNAP_TEST_NO_PAGEMAP_SCAN=1 and HEAPSNAP_TEST_REFUSE_SCAN_GUARD=1, test hooks
  // (tests/integration/memory_cases.py, fallbacks): the snapshot child's PAGEMAP_SCAN reads fail as
  // on a kernel before 6.7 (it reads smaps instead), or refuse PAGE_IS_GUARD as 6.7-6.13 do (it
  // asks again without it): paths this kernel may never take (snapshot/image_scan.h).
  bool test_no_pagemap_scan, test_refuse_scan_guard;

  // HEAPSNAP_SNAPSHOT: comma-separated triggers, e.g. "exit,main,peak:5,growth:10%,signal:USR2,every:30,heap:2G,
  // rss:3G,max:5,contents". Any trigger turns on the full live-block table (see info_shadow.h).
  bool snapshots;             // some trigger is set
  bool snapshot_at_exit;
  bool snapshot_before_destructors;  // when main returns or exit() is called (snapshot.h)
  int snapshot_signal;        // 0 = none
  uint64_t snapshot_every_ns; // 0 = none
  uint64_t snapshot_heap_above;
  uint64_t snapshot_rss_above;
  uint32_t snapshot_peak_pct;  // --snapshot-at-peak: within this percent of the maximum (0 = off)
  uint64_t snapshot_growth_bytes;  // --snapshot-on-growth SIZE (0 = off, or a percentage below)
  uint32_t snapshot_growth_pct;    // --snapshot-on-growth PCT%
  uint32_t snapshot_max;      // cap on snapshots per process
  bool snapshot_contents;     // keep raw block bytes
  uint32_t snapshot_threads;  // HEAPSNAP_SNAPSHOT_THREADS: the child's scan threads (0 = the usable CPUs, at most 8)
  // HEAPSNAP_TEST_SNAPSHOT_PIECE_BYTES: the address space of a piece of the child's enumeration
  // on several threads (0 = its own choice); tests make them tiny so that blocks cross pieces.
  uint64_t test_snapshot_piece_bytes;
  bool snapshot_client;       // heapsnap_snapshot() requests are honoured
};

// The default mean sampling interval. 64 KiB: at ~1 us per sampled stack it costs under 2% on
// programs allocating 1 GB/s, and a site holding 1% of 1 GB of allocations still gets ~150
// samples (+/-8%). heapprofd's 4 KiB costs ~25% on the python workload; jemalloc's 512 KiB leaves
// sites under 5 MB with a handful of samples.
constexpr uint64_t kDefaultSampleBytes = 64 * 1024;

// Level 5: on the py workload in every-allocation mode, 0.60 MB against 0.69 MB at level 3, for
// about twice the writer-thread CPU (which runs beside the program, not in its allocation calls).
constexpr int kDefaultZstdLevel = 5;

extern Config config;

// Returns false if tracing must stay off (no output configured, setuid program, bad value).
bool read_config();

// Expands the output pattern for this process ('%p' -> pid) into out.
void expand_output_name(const char *pattern, int pid, char *out, size_t cap);

}  // namespace hs
