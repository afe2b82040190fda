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

// Parses smaps_rollup's text (for tests): "Name:   N kB" lines, bytes out; false without "Rss:".
bool parse_rss_rollup(const char *text, uint64_t *rss, uint64_t *anon, uint64_t *shmem, uint64_t *swap);

}  // namespace hs
