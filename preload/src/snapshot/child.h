// The snapshot child (snapshot.h): a raw fork of the program that walks its frozen copy of the
// address space, writes the snapshot's records to a file, and exits.
#pragma once
#include <cstddef>
#include <cstdint>

#include "snapshot/thread_regs.h"

namespace hs {
struct TotalsView;
}

namespace hs::snapshot::child {

// The child's exit status, as the program's side reads it (snapshot.cc, finish).
enum Exit : int {
  kExitDone = 0,
  kExitNoMemory = 2,   // its arena, or the block list
  kExitNoMaps = 3,     // /proc/self/maps unreadable
  kExitSaidWhy = 4,    // the file ends with a SnapshotEnd that names the error, after whole frames
  kExitFileTorn = 5,   // the file is not whole (a write failed, records were cut): none of it counts
  kExitCrashed = 100,  // + the signal
};

struct Range;

// The SnapshotBegin of a deferred snapshot (an at-peak one, appended at the end): written by the
// child as its file's first record, so that the file stands alone.
struct DeferredBegin {
  int trigger;
  const char *label;
  uint64_t when;           // the snapshot's time (relative, as every record's)
  uint64_t pause_from_ns;  // monotonic: when the program's pause began (the child's start ends it)
  const TotalsView *totals;
};

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
  const DeferredBegin *begin;  // null: the writer put the SnapshotBegin in the capture already
  int go_fd;                   // >= 0: frozen; wait for a byte here before the scan (none: exit)
};

// What a frozen at-peak child is told when it is to scan (the whole message is one pipe write).
struct GoMessage {
  uint64_t pause;       // the program's pause for this fork, which the child cannot measure
  uint32_t background;  // 1: the program runs on (the heap has fallen far below this snapshot's):
                        // scan on one thread, leaving the other cores to the program
  uint32_t unused;
};

// Runs in the child right after the fork; never returns (the exit status says how it ended).
// Not inlined into the fork's caller: its frame would sit between the forking thread's stack
// pointer and the program's frames, and a conservative scan of stale words there finds false roots.
[[noreturn]] void run(const RunArgs &a);

}  // namespace hs::snapshot::child
