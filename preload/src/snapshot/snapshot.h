// Heap snapshots: the full live set, its roots and its pointer edges, taken by a child made with
// a raw fork (clone without atfork handlers). The program pauses only for the register handshake
// with its other threads (thread_regs.h: their registers are roots) and the fork; the child
// walks its frozen copy of the address space using system calls and memory it maps itself,
// writes its records to a temporary file, and exits. The writer thread appends that file's
// frames to the capture when the child is done.
#pragma once
#include <cstdint>

namespace hs::snapshot {

enum Trigger : int {
  kExit = 0, kSignal = 1, kPeriodic = 2, kHeap = 3, kRss = 4, kClient = 5, kBeforeDestructors = 6, kPeak = 7, kGrowth = 8
};

// Called once at start-up when snapshots are configured: enables the live-block table and
// installs the signal handler.
void init();
bool enabled();

// heapsnap_snapshot(): asks for a snapshot at the writer's next tick.
void request(const char *label);

// Writer thread, every tick: starts a snapshot when a trigger fired, finishes a done child.
void writer_tick(uint64_t heap_bytes, uint64_t rss_bytes);
// At exit: waits for a running child, then takes the exit snapshot if configured (blocking).
void at_exit();
// When main returns or the program calls exit(), before atexit handlers and static destructors:
// the before-destructors snapshot, if configured, once per process (blocking). `how` labels it.
bool wants_before_destructors();
void before_destructors(const char *how);
// The tail guard's salvage (tail_guard.h): the exit snapshot, if configured, of the memory of a
// process that ended without the shim's exit path, taken by a child of the guard.
void at_salvage();
// Waits for a running child (and appends its output). Used before the capture is closed.
void drain();
// The writer thread's own stack is tracer memory, never a root.
void set_writer_stack(uint64_t lo, uint64_t hi);
// Other tracer memory that is never a root nor holds blocks (the tail guard's stack).
void exclude_range(uint64_t lo, uint64_t hi);
// A forked program child: the parent's snapshot child and count are not its own.
void after_fork_child();

}  // namespace hs::snapshot
