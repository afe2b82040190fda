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

// One worker started now and joined later, beside whatever the calling thread does meanwhile
// (the RSS breakdown's /proc reads, child_memory.cc, run while the blocks are enumerated). Its
// stack comes from the child's arena, not from a mapping of its own: the worker reads
// /proc/self/smaps, where a new mapping would show as memory of the program's. start() returns
// false when no thread could be started (then nothing runs: the caller calls fn itself).
struct Background {
  void (*fn)(void *) = nullptr;
  void *arg = nullptr;
  volatile int32_t tid = 0;  // set by the kernel at the clone, cleared (and woken) at the exit
  bool started = false;
};
bool start(Background &b, void (*fn)(void *), void *arg);
void join(Background &b);  // (returns at once when it was not started)

// A system call that writes no errno (a worker shares its starter's TLS): -errno on failure.
long raw_syscall(long n, long a = 0, long b = 0, long c = 0, long d = 0);

// Raw futex waits and wakes on a 32-bit word (no errno: usable in a worker).
void wait_while(const std::atomic<uint32_t> &word, uint32_t value);
void wake_all(const std::atomic<uint32_t> &word);

// Chunks made on several threads, used in order on the first: each thread claims the next chunk
// (an atomic counter: one that gets less CPU claims fewer) and makes it into a slot of its own;
// thread 0 makes chunks too and, between them, consumes the finished ones in chunk order (it
// alone writes the snapshot's output: its order, and so the capture, never depends on the thread
// count or on timing). A ring of kSlotsPerThread slots per thread bounds the memory held: a thread
// waits for the consumer when it would run more than that ahead.
constexpr uint32_t kSlotsPerThread = 4;
struct Ordered {
  void *ctx = nullptr;
  // Chunk `chunk` into slot `slot` (< nslots), on thread `thread` (< the threads run).
  void (*produce)(void *ctx, uint32_t chunk, uint32_t slot, uint32_t thread) = nullptr;
  void (*consume)(void *ctx, uint32_t chunk, uint32_t slot) = nullptr;  // thread 0, in order
  uint32_t nchunks = 0;
  uint32_t nslots = 0;  // set by ordered(): kSlotsPerThread x threads
  std::atomic<uint32_t> next{0};       // the next chunk to claim
  std::atomic<uint32_t> emitted{0};    // chunks consumed (written by thread 0 only)
  std::atomic<uint32_t> completed{0};  // chunks made (thread 0 waits on it)
  std::atomic<uint32_t> *done = nullptr;  // per slot: its chunk number + 1 once made
};
// Sets o.nslots to kSlotsPerThread x the threads it will use (at most n, at most o.nchunks),
// calls slots(ctx, o.nslots) to let the caller make them (false: out of memory, nothing runs),
// then runs the chunks. Returns the threads that ran, 0 when out of memory.
uint32_t ordered(Ordered &o, uint32_t n, bool (*slots)(void *ctx, uint32_t nslots));

}  // namespace hs::snapshot::child::threads
