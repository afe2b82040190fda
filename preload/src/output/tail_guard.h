// The tail guard: what the capture keeps when a process ends without the shim's exit path.
//
// Events wait in memory (thread batches, the outbox) for the writer's next flush, up to 100 ms.
// A process that ends through exit() or _exit() flushes them first; one that ends otherwise lost
// them all, with its end record: Go programs (the runtime exits with the exit_group system call,
// cgo or not), a SIGKILL, the OOM killer, a crash with no handler the shim sees. A short cgo
// program recorded 0 of its 100,006 allocations.
//
// The guard is a process that shares the program's memory (clone with CLONE_VM, without
// CLONE_THREAD: exit_group ends the program's threads, not it) and does nothing until the
// program's end: it waits on a pipe whose other end only the program holds (close-on-exec, so
// exec ends it too). When the program has gone, its memory is still there, kept alive by the
// guard: the guard writes the pending events and an end record saying how the process ended
// (from /proc: exit status or signal), then exits. When the shim's own exit path finished the
// capture, it exits at once.
//
// It holds its own descriptor of the capture, and with it the capture's flock (frame_writer.h):
// `heapsnap record` waits for the lock, so that it reads the capture once the salvage is done.
// It is a process of its own group, with every signal blocked: a Ctrl-C to the program's group,
// or a kill of that group, leaves it to finish the capture. Its exit signal is none, so the
// program's wait() calls never see it.
#pragma once

namespace hs::tail_guard {

// Starts the guard for the current capture (after it is open). False if it could not be started:
// tracing goes on without it.
bool start();
// In a forked child: the parent's guard is not the child's (its pipe end is closed here; a child
// that traces on starts its own).
void after_fork_child();

}  // namespace hs::tail_guard
