// RSS over time, coarsely (issue 32): /proc/self/smaps_rollup read by the writer thread on some of
// its ticks, with what the shim knows for nothing (its private heap's bytes). The snapshot child's
// breakdown (snapshot/child_memory.h) is the fine one; this is the cheap one between snapshots.
#pragma once
#include <cstdint>

namespace hs {

struct TotalsView;

// Fills t's rollup fields and sets has_rollup; leaves has_rollup false when the file cannot be
// read (kernels before 4.14, a /proc without it). One open and read into a stack buffer: no
// allocation, no stdio; errno kept (it also runs on the program's thread at exit).
void read_rss_rollup(TotalsView *t);

// The ticks until the next read, after one that took cpu_ns of the writer's CPU: at least
// min_ticks (config.rss_parts_ticks), and enough that the reads take at most 0.5% of one core
// (200 times the read's cost in ticks of flush_ms), at most 600. Why: the kernel walks every page
// table of the process for smaps_rollup (13.4 ms of CPU per GiB resident, measured), and the walk
// holds the mmap lock that the program's mmap and munmap wait for. At the default 100 ms tick and
// 10 ticks: once a second up to about 380 MiB resident, every 2.7 s at 1 GiB, 5.4 s at 2 GiB.
uint32_t rollup_gap_ticks(uint64_t cpu_ns, uint32_t flush_ms, uint32_t min_ticks);

// Parses smaps_rollup's text (for tests): "Name:   N kB" lines, bytes out; false without "Rss:".
bool parse_rss_rollup(const char *text, uint64_t *rss, uint64_t *anon, uint64_t *shmem, uint64_t *swap);

}  // namespace hs
