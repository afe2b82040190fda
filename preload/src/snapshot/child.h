// The snapshot child (snapshot.h): a raw fork of the program that walks its frozen copy of the
// address space, writes the snapshot's records to a file, and exits.
#pragma once
#include <cstddef>
#include <cstdint>

#include "snapshot/thread_regs.h"

namespace hs::snapshot::child {

struct Range;

struct RunArgs {
  uint32_t index;        // the snapshot's number
  int fd;                // the file its records go to
  uint64_t sp;           // the forking thread's stack pointer (its stack is scanned from there)
  uint64_t writer_lo, writer_hi;  // the writer thread's stack: tracer memory, not a root
  uint64_t live_blocks;  // the totals' count, to size the block arrays
  uint64_t program_pid;  // the program's pid (its main thread), not the child's
  const regs::Result *regs;  // the other threads' registers, captured before the fork
  const Range *extra;    // more tracer memory (snapshot::exclude_range)
  size_t nextra;
};

// Runs in the child right after the fork; never returns (the exit status says how it ended).
// Not inlined into the fork's caller: its frame would sit between the forking thread's stack
// pointer and the program's frames, and a conservative scan of stale words there finds false roots.
[[noreturn]] void run(const RunArgs &a);

}  // namespace hs::snapshot::child
