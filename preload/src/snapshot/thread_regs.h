// Registers of the program's other threads at the instant of a heap snapshot's clone: the roots
// "registers of thread T" (a running thread may hold the only pointer to a block in a register).
//
// How (handshake()), per thread of /proc/self/task other than the caller and the tracer's writer:
//  - running in user space (State R in /proc/self/task/T/status) and not blocking the signal:
//    a real-time signal (default SIGRTMAX-3, HEAPSNAP_SNAPSHOT_REGS_SIGNAL) whose handler copies
//    the general registers and xmm0-15 from its ucontext into the thread's slot, then waits (a
//    futex, bounded) until the clone is done: the thread stays parked, so what the child scans is
//    what it held;
//  - blocked in futex(FUTEX_WAIT*) without a timeout (a mutex, a condition variable): the same
//    signal; SA_RESTART restarts that wait transparently (the kernel returns ERESTARTSYS for it);
//  - blocked in any other system call (sleeps, poll, epoll_wait, read, sem_timedwait...): no
//    signal, which would cut a sleep short (EINTR even with SA_RESTART). (A thread that the check
//    sees running but that is in fact still in the kernel, woken and waiting for a CPU, or that
//    enters a sleep just then, does get it: the handler then continues its poll, select, ppoll,
//    pselect6, nanosleep, clock_nanosleep or timed futex wait, see thread_regs.cc; an
//    epoll_wait entered in that microsecond window returns EINTR.) The kernel's view of its
//    user registers, /proc/self/task/T/syscall, gives the stack pointer and the program counter:
//    the stack is then scanned from the stack pointer, but callee-saved registers the syscall
//    wrapper did not spill are not seen;
//  - signal blocked by the thread, the program's own handler on the signal, no answer within the
//    timeout (HEAPSNAP_SNAPSHOT_REGS_TIMEOUT_MS, default 50), exited: recorded as not captured,
//    with the reason, and the snapshot proceeds.
// The pause of the program is the handshake plus the clone.
#pragma once
#include <cstddef>
#include <cstdint>

namespace hs::regs {

// What is known of one thread, made by the parent before the clone (the child reads its copy).
constexpr unsigned kGregs = 17;            // r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip
constexpr unsigned kWords = kGregs + 32;   // + xmm0..15
enum How : uint8_t {
  kNone = 0,      // not captured (why says so)
  kSignal = 1,    // full: general registers and xmm0-15, thread parked through the clone
  kSyscall = 2,   // blocked in a system call: stack pointer and program counter only
};
struct ThreadRegs {
  uint64_t words[kWords];   // the register root: words[0..nwords) are scanned
  uint32_t tid;
  uint32_t nwords;
  uint8_t how;
  uint8_t interrupted;      // the signal interrupted a system call: 2 continued, 1 maybe (EINTR)
  int32_t syscall_nr;       // kSyscall: the system call it is blocked in
  uint64_t sp;              // stack pointer, 0 when unknown (then the whole stack is scanned)
  const char *why;          // kNone: a static string
};

struct Result {
  ThreadRegs *threads;      // tracer memory (never a root but through these words)
  uint32_t n;
  uint32_t signaled, captured, blocked, missing;
  uint64_t first_signal_ns; // mono_ns of the first signal sent (0: none)
};

// At start-up: picks and installs the signal (reads the environment; no allocation).
void init();
// The writer thread's tid: tracer, never signaled nor reported.
void set_writer_tid(uint32_t tid);
// Before the clone: captures the other threads' registers, parking the signaled ones. Never
// blocks longer than the timeout (plus the /proc reads). Returns what the child scans.
Result handshake();
// Right after the clone (parent): lets the parked threads go.
void release();
// The name of a system call threads commonly block in ("nanosleep"), else nullptr.
const char *syscall_name(long nr);
// The signal in use (0: none).
int signal_number();

}  // namespace hs::regs
