// Threads of the snapshot child (child_internal.h): the block scan runs on several cores.
//
// The child is a raw fork of a program that may have many threads; the locks they held at the
// fork stay held in the child forever: malloc's, stdio's, the dynamic loader's, and the ones
// pthread_create takes (its stack cache, the thread list; it also mallocs the new thread's DTV
// and runs the program's TLS setup). So no pthread here. A worker is started with clone(2)
// itself (glibc's clone() is a few instructions of assembly around the system call: no lock, no
// allocation, nothing written in the new thread but its registers): CLONE_VM|CLONE_THREAD and
// the rest of what makes a thread, a stack mmapped here, and CLONE_CHILD_CLEARTID, whose
// clearing of a word at the thread's exit (with a futex wake) is how the starter joins it.
//
// Without CLONE_SETTLS a worker runs on the TLS of the thread that started it: its code must
// touch no thread-local state, errno included: no libc call that can fail (raw system calls,
// futex only), no tracer entry point (their guard is thread-local). What it may use: the child's
// arena (heap::alloc: one atomic add), the frozen image (read only), the tables the starter built
// before (read only), and what it was handed. The shim is linked -z now: no call from a worker
// goes through the loader's lazy binding (which takes its lock). The signal mask is the child's
// (everything blocked but SIGSEGV and SIGBUS, whose handler ends the whole child); a worker that
// faults takes the child down with it, as a fault in the single-threaded scan does.
#pragma once
#include <atomic>
#include <cstdint>

namespace hs::snapshot::child::threads {

// The most threads the scan uses: beyond 8, a snapshot of a big server takes more of the machine
// from the program than it saves.
constexpr uint32_t kMaxThreads = 8;

// The threads the scan is to use: config.snapshot_threads when given (HEAPSNAP_SNAPSHOT_THREADS),
// else the CPUs the process may run on (sched_getaffinity), at most kMaxThreads; at least 1.
uint32_t wanted();

// Runs fn(arg, k) on the calling thread (k = 0) and on up to n - 1 new threads (k = 1 ...), and
// returns once every one has returned. fn must share the work out dynamically (k == 0 may be the
// only one: a thread that cannot be started is not started). Returns the threads that ran.
uint32_t run(uint32_t n, void (*fn)(void *arg, uint32_t k), void *arg);

// Raw futex waits and wakes on a 32-bit word (no errno: usable in a worker).
void wait_while(const std::atomic<uint32_t> &word, uint32_t value);
void wake_all(const std::atomic<uint32_t> &word);

}  // namespace hs::snapshot::child::threads
