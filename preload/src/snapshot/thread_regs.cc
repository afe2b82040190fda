#include "snapshot/thread_regs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/private_heap.h"
#include "core/proc_maps.h"
#include "core/tracer.h"

namespace hs::regs {
namespace {

enum SlotState : uint32_t { kIdle = 0, kArmed = 1, kSaving = 2, kSaved = 3, kLate = 4 };

// Where a signaled thread's handler writes. Tables are never freed: a handler that runs late (its
// signal was delivered after the parent gave up) may still read an old one.
struct Slot {
  std::atomic<uint32_t> state;
  uint32_t gen;
  uint32_t tid;
  uint32_t interrupted;
  uint64_t words[kWords];
};
struct Table {
  uint32_t n;
  Slot slots[1];
};
std::atomic<Table *> g_table{nullptr};

int g_sig = 0;
const char *g_sig_why = nullptr;  // why there is no signal (static)
uint64_t g_timeout_ns = 50000000;
// Tests only (HEAPSNAP_SNAPSHOT_REGS_SIGNAL_ALL=1): signal sleeping threads too, to exercise the
// continuation of the system calls the signal interrupts (tests/integration/register_cases.py).
bool g_signal_all = false;
uint32_t g_writer_tid = 0;
struct sigaction g_ours;

std::atomic<uint32_t> g_gen{0};       // the current handshake
std::atomic<uint32_t> g_released{0};  // = the handshake whose threads may go
std::atomic<uint32_t> g_acks{0};      // registers saved in the current handshake

// Result storage (grown, never shrunk; tracer memory).
ThreadRegs *g_out = nullptr;
uint32_t g_out_cap = 0;
uint32_t *g_tids = nullptr;
uint32_t g_tids_cap = 0;
uint32_t *g_slot_of = nullptr;  // per g_out entry: its slot, UINT32_MAX when not signaled

long futex(std::atomic<uint32_t> *w, int op, uint32_t val, const timespec *ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t *>(w), op, val, ts, nullptr, 0);
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// The system call as the kernel takes it: the result in rax, -errno on failure (no errno).
long raw_syscall6(long nr, long a1, long a2, long a3, long a4, long a5, long a6) {
  long ret;
  register long r10 __asm__("r10") = a4;
  register long r8 __asm__("r8") = a5;
  register long r9 __asm__("r9") = a6;
  __asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
}

// The register signal can still reach a thread inside a sleeping system call: one that entered it
// between the /proc check and the signal, or one that its timeout or an event had already woken
// but that was still waiting for a CPU (State R, yet in the kernel): poll() and select() then
// return EINTR instead of their result. The handler finds that case (rax = -EINTR right after a
// `syscall` instruction that glibc's wrappers precede with `mov $NR, %eax`) and, after the park,
// continues the call as the kernel would have without a handler: restart_syscall() for those that
// left a restart block (poll, nanosleep, relative clock_nanosleep, futex waits with a timeout),
// the same call again for those that updated their timeout in place (select, pselect6, ppoll)
// or take an absolute one (clock_nanosleep TIMER_ABSTIME). Its result replaces the EINTR.
enum Repair : uint32_t { kNoRepair = 0, kRestartBlock = 1, kReissue = 2 };

Repair repair_for(const greg_t *g, uint32_t *nr_out) {
  uint64_t rip = uint64_t(g[REG_RIP]);
  if (int64_t(g[REG_RAX]) != -EINTR || (rip & 0xfff) < 7) return kNoRepair;
  const auto *code = reinterpret_cast<const uint8_t *>(rip - 7);
  if (code[0] != 0xb8 || code[5] != 0x0f || code[6] != 0x05) return kNoRepair;
  uint32_t nr;
  memcpy(&nr, code + 1, 4);
  *nr_out = nr;
  switch (nr) {
    case SYS_poll:
    case SYS_nanosleep:
      return kRestartBlock;
    case SYS_clock_nanosleep:
      return (g[REG_RSI] & TIMER_ABSTIME) ? kReissue : kRestartBlock;
    case SYS_futex: {
      unsigned cmd = unsigned(g[REG_RSI]) & FUTEX_CMD_MASK;
      return (cmd == FUTEX_WAIT || cmd == FUTEX_WAIT_BITSET) && g[REG_R10] ? kRestartBlock : kNoRepair;
    }
    case SYS_select:
    case SYS_pselect6:
    case SYS_ppoll:
      return kReissue;
    default:
      return kNoRepair;
  }
}

void on_regs_signal(int, siginfo_t *si, void *ucv) {
  int saved_errno = errno;
  Table *t = g_table.load(std::memory_order_acquire);
  if (si->si_code != SI_QUEUE || si->si_pid != pid_t(syscall(SYS_getpid)) || !t) {
    errno = saved_errno;
    return;  // not ours (someone else's stray signal): nothing to do
  }
  uint64_t v = reinterpret_cast<uint64_t>(si->si_value.sival_ptr);
  uint32_t idx = uint32_t(v), gen = uint32_t(v >> 32);
  uint32_t tid = uint32_t(syscall(SYS_gettid));
  if (idx >= t->n || g_gen.load(std::memory_order_acquire) != gen) {
    errno = saved_errno;
    return;  // late: the parent has given up on this thread
  }
  Slot &s = t->slots[idx];
  uint32_t expect = kArmed;
  if (!s.state.compare_exchange_strong(expect, kSaving, std::memory_order_acq_rel)) {
    errno = saved_errno;
    return;
  }
  if (s.gen != gen || s.tid != tid) {  // armed for another handshake meanwhile
    s.state.store(kArmed, std::memory_order_release);
    errno = saved_errno;
    return;
  }
  auto *uc = static_cast<ucontext_t *>(ucv);
  greg_t *g = uc->uc_mcontext.gregs;
  for (unsigned i = 0; i < kGregs; ++i) s.words[i] = uint64_t(g[REG_R8 + i]);
  if (uc->uc_mcontext.fpregs) memcpy(&s.words[kGregs], uc->uc_mcontext.fpregs->_xmm, 16 * 16);
  else memset(&s.words[kGregs], 0, 16 * 16);
  // A system call that this signal cut short returns -EINTR right after its `syscall`
  // instruction (0f 05). One the kernel restarts (SA_RESTART) is rewound onto the instruction.
  uint64_t rip = uint64_t(g[REG_RIP]);
  uint32_t nr = 0;
  Repair repair = repair_for(g, &nr);
  s.interrupted = repair ? 2 : int64_t(g[REG_RAX]) == -EINTR && (rip & 0xfff) >= 2 &&
                                   *reinterpret_cast<const uint16_t *>(rip - 2) == 0x050f;
  s.state.store(kSaved, std::memory_order_release);
  g_acks.fetch_add(1, std::memory_order_acq_rel);
  futex(&g_acks, FUTEX_WAKE_PRIVATE, 1, nullptr);
  // Parked until the clone is done. Bounded, should the parent never say so, except when a
  // restart block must survive: a futex wait with a timeout that a stop signal interrupts would
  // replace it (one without a timeout does not; the parent always releases).
  uint64_t deadline = now_ns() + 2000000000ull;
  for (;;) {
    uint32_t r = g_released.load(std::memory_order_acquire);
    if (r == gen || (repair != kRestartBlock && now_ns() > deadline)) break;
    timespec ts = {0, 20000000};
    futex(&g_released, FUTEX_WAIT_PRIVATE, r, repair == kRestartBlock ? nullptr : &ts);
  }
  if (repair) {
    // The program's own signals may interrupt the continued call, as they could the original:
    // its signal mask, ours blocked.
    sigset_t m = uc->uc_sigmask;
    sigaddset(&m, g_sig);
    raw_syscall6(SYS_rt_sigprocmask, SIG_SETMASK, long(&m), 0, 8, 0, 0);
    g[REG_RAX] = repair == kRestartBlock
                     ? raw_syscall6(SYS_restart_syscall, 0, 0, 0, 0, 0, 0)
                     : raw_syscall6(nr, g[REG_RDI], g[REG_RSI], g[REG_RDX], g[REG_R10], g[REG_R8], g[REG_R9]);
  }
  errno = saved_errno;
}

// "SIGRTMAX-3", "RTMIN+2", "61".
int parse_signal(const char *s) {
  if (strncmp(s, "SIG", 3) == 0) s += 3;
  char *end = nullptr;
  long base = 0, sign = 1;
  if (strncmp(s, "RTMAX", 5) == 0) base = SIGRTMAX, s += 5, sign = -1;
  else if (strncmp(s, "RTMIN", 5) == 0) base = SIGRTMIN, s += 5;
  if (base) {
    if (!*s) return int(base);
    if (*s != '+' && *s != '-') return -1;
    sign = *s == '-' ? -1 : 1;
    long k = strtol(s + 1, &end, 10);
    if (*end) return -1;
    return int(base + sign * k);
  }
  long k = strtol(s, &end, 10);
  return *end || end == s ? -1 : int(k);
}

bool handler_free(int sig) {
  struct sigaction cur;
  if (sigaction(sig, nullptr, &cur) != 0) return false;
  return !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL;
}

bool still_ours() {
  struct sigaction cur;
  if (sigaction(g_sig, nullptr, &cur) != 0) return false;
  return (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_regs_signal;
}

// /proc/self/task/T/syscall: "running", or "NR a1 .. a6 SP PC", or "-1 SP PC" (blocked, not in a
// system call). Returns false for "running" or an unreadable file.
bool read_syscall(uint32_t tid, long *nr, uint64_t *args, uint64_t *sp, uint64_t *pc) {
  char path[64], buf[256];
  snprintf(path, sizeof(path), "/proc/self/task/%u/syscall", tid);
  if (read_small_file(path, buf, sizeof(buf)) <= 0 || buf[0] == 'r') return false;
  char *end = buf;
  *nr = strtol(buf, &end, 10);
  const char *p = end;
  uint64_t f[8];
  int k = 0;
  while (k < 8 && *p == ' ') f[k++] = parse_hex(++p);
  if (*nr == -1 && k >= 2) {
    *sp = f[0], *pc = f[1];
    return true;
  }
  if (k < 8) return false;
  for (int i = 0; i < 6; ++i) args[i] = f[i];
  *sp = f[6], *pc = f[7];
  return true;
}

// A wait the kernel restarts transparently after our SA_RESTART handler: futex(FUTEX_WAIT or
// FUTEX_WAIT_BITSET) without a timeout returns ERESTARTSYS. (With a timeout it is EINTR.)
bool restartable(long nr, const uint64_t *a) {
  if (nr != SYS_futex) return false;
  unsigned cmd = unsigned(a[1]) & FUTEX_CMD_MASK;
  return (cmd == FUTEX_WAIT || cmd == FUTEX_WAIT_BITSET) && a[3] == 0;
}

bool grow_to(uint32_t n) {
  if (n <= g_out_cap) return true;
  uint32_t cap = n + n / 2 + 16;
  auto *out = static_cast<ThreadRegs *>(heap::alloc_zeroed(size_t(cap) * sizeof(ThreadRegs)));
  auto *slot_of = static_cast<uint32_t *>(heap::alloc(size_t(cap) * 4));
  auto *t = static_cast<Table *>(heap::alloc_zeroed(sizeof(Table) + size_t(cap) * sizeof(Slot)));
  if (!out || !slot_of || !t) return false;
  t->n = cap;
  if (g_out) heap::release(g_out);
  if (g_slot_of) heap::release(g_slot_of);
  g_out = out;
  g_slot_of = slot_of;
  g_out_cap = cap;
  g_table.store(t, std::memory_order_release);  // the old table stays: a late handler may read it
  return true;
}

// The thread ids of /proc/self/task.
uint32_t list_tasks() {
  int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return 0;
  uint32_t n = 0;
  alignas(8) char buf[8192];
  for (;;) {
    long got = syscall(SYS_getdents64, fd, buf, sizeof(buf));
    if (got <= 0) break;
    for (long off = 0; off < got;) {
      const char *d_name = buf + off + 19;
      uint16_t reclen;
      memcpy(&reclen, buf + off + 16, 2);
      off += reclen;
      if (d_name[0] < '1' || d_name[0] > '9') continue;
      if (n == g_tids_cap) {
        uint32_t cap = g_tids_cap * 2 + 64;
        auto *t = static_cast<uint32_t *>(heap::grow(g_tids, size_t(cap) * 4));
        if (!t) break;
        g_tids = t;
        g_tids_cap = cap;
      }
      g_tids[n++] = uint32_t(strtoul(d_name, nullptr, 10));
    }
  }
  close(fd);
  return n;
}

}  // namespace

void init() {
  if (const char *a = getenv("HEAPSNAP_SNAPSHOT_REGS_SIGNAL_ALL")) g_signal_all = a[0] == '1';
  if (const char *t = getenv("HEAPSNAP_SNAPSHOT_REGS_TIMEOUT_MS")) {
    long ms = strtol(t, nullptr, 10);
    if (ms >= 0 && ms <= 10000) g_timeout_ns = uint64_t(ms) * 1000000ull;
  }
  const char *want = getenv("HEAPSNAP_SNAPSHOT_REGS_SIGNAL");
  int sig = 0;
  if (want && (!strcmp(want, "off") || !strcmp(want, "0") || !strcmp(want, "none"))) {
    g_sig_why = "register capture off (HEAPSNAP_SNAPSHOT_REGS_SIGNAL=off)";
    return;
  }
  if (want && *want) {
    sig = parse_signal(want);
    if (sig <= 0 || sig > SIGRTMAX || sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV || sig == SIGBUS ||
        sig == SIGILL || sig == SIGFPE || sig == SIGABRT || sig == SIGTRAP || sig == SIGCHLD || sig == SIGCONT) {
      g_sig_why = "HEAPSNAP_SNAPSHOT_REGS_SIGNAL is not a usable signal";
      return;
    }
    if (!handler_free(sig)) {
      g_sig_why = "the program has a handler on HEAPSNAP_SNAPSHOT_REGS_SIGNAL";
      return;
    }
  } else {
    // The default: the highest real-time signal from SIGRTMAX-3 down that has no handler.
    for (int s = SIGRTMAX - 3; s >= SIGRTMIN + 4 && !sig; --s)
      if (handler_free(s)) sig = s;
    if (!sig) {
      g_sig_why = "no free real-time signal";
      return;
    }
  }
  memset(&g_ours, 0, sizeof(g_ours));
  g_ours.sa_sigaction = on_regs_signal;
  g_ours.sa_flags = SA_SIGINFO | SA_RESTART;
  sigfillset(&g_ours.sa_mask);  // the program's own signals wait for the (short) park
  if (sigaction(sig, &g_ours, nullptr) != 0) {
    g_sig_why = "cannot install the register signal's handler";
    return;
  }
  g_sig = sig;
}

void set_writer_tid(uint32_t tid) { g_writer_tid = tid; }

int signal_number() { return g_sig; }

Result handshake() {
  Result res{};
  uint32_t self = uint32_t(syscall(SYS_gettid));
  pid_t pid = pid_t(syscall(SYS_getpid));
  uint32_t ntasks = list_tasks();
  if (!grow_to(ntasks + 1)) return res;
  Table *table = g_table.load(std::memory_order_relaxed);
  const char *no_signal = g_sig ? nullptr : (g_sig_why ? g_sig_why : "no register signal");
  if (g_sig && !still_ours()) no_signal = "the program took over the register signal";
  uint32_t gen = g_gen.fetch_add(1, std::memory_order_acq_rel) + 1;
  g_acks.store(0, std::memory_order_relaxed);
  uint32_t n = 0, signaled = 0;
  for (uint32_t k = 0; k < ntasks; ++k) {
    uint32_t tid = g_tids[k];
    if (tid == self || tid == g_writer_tid) continue;
    char path[64], buf[2048];
    snprintf(path, sizeof(path), "/proc/self/task/%u/status", tid);
    if (read_small_file(path, buf, sizeof(buf)) <= 0) continue;  // gone
    const char *st = strstr(buf, "\nState:\t");
    const char *blk = strstr(buf, "\nSigBlk:\t");
    char state = st ? st[8] : '?';
    if (state == 'Z' || state == 'X') continue;
    ThreadRegs &r = g_out[n];
    memset(&r, 0, sizeof(r));
    r.tid = tid;
    g_slot_of[n] = UINT32_MAX;
    ++n;
    const char *mask = blk ? blk + 9 : nullptr;
    bool masked = g_sig && mask && (parse_hex(mask) >> (g_sig - 1) & 1);
    bool signal = false;
    long nr = 0;
    uint64_t args[6] = {}, sp = 0, pc = 0;
    if (state == 'R' || (g_signal_all && state == 'S')) {
      signal = true;
    } else if (!read_syscall(tid, &nr, args, &sp, &pc)) {
      signal = true;  // running again by now
    } else if (state == 'S' && restartable(nr, args)) {
      signal = true;
    }
    if (signal && !no_signal && !masked) {
      Slot &s = table->slots[n - 1];
      s.tid = tid;
      s.gen = gen;
      s.interrupted = 0;
      s.state.store(kArmed, std::memory_order_release);
      siginfo_t si;
      memset(&si, 0, sizeof(si));
      si.si_signo = g_sig;
      si.si_code = SI_QUEUE;
      si.si_pid = pid;
      si.si_uid = getuid();
      si.si_value.sival_ptr = reinterpret_cast<void *>((uint64_t(gen) << 32) | (n - 1));
      if (!res.first_signal_ns) res.first_signal_ns = mono_ns();
      if (syscall(SYS_rt_tgsigqueueinfo, pid, tid, g_sig, &si) == 0) {
        g_slot_of[n - 1] = n - 1;
        ++signaled;
        continue;
      }
      s.state.store(kIdle, std::memory_order_relaxed);
      r.why = errno == ESRCH ? "the thread exited" : "the signal could not be sent";
      continue;
    }
    if (signal) {
      r.why = no_signal ? no_signal : "the thread blocks the register signal";
      if (sp) r.sp = sp;
      continue;
    }
    // Blocked in a system call a signal would cut short: what the kernel shows.
    r.how = kSyscall;
    r.syscall_nr = int32_t(nr);
    r.sp = sp;
    r.words[15] = sp;  // rsp
    r.words[16] = pc;  // rip
    r.nwords = kGregs;
  }
  // Wait for the signaled threads' answers, bounded.
  uint64_t deadline = mono_ns() + g_timeout_ns;
  for (;;) {
    uint32_t a = g_acks.load(std::memory_order_acquire);
    if (a >= signaled) break;
    uint64_t now = mono_ns();
    if (now >= deadline) break;
    uint64_t left = deadline - now;
    timespec ts = {time_t(left / 1000000000ull), long(left % 1000000000ull)};
    futex(&g_acks, FUTEX_WAIT_PRIVATE, a, &ts);
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (g_slot_of[i] == UINT32_MAX) continue;
    Slot &s = table->slots[g_slot_of[i]];
    ThreadRegs &r = g_out[i];
    uint32_t expect = kArmed;
    if (s.state.compare_exchange_strong(expect, kLate, std::memory_order_acq_rel)) {
      r.why = "no answer to the register signal in time";
      continue;
    }
    // Saving: a handler caught mid-copy (a few hundred ns unless it was preempted).
    uint64_t give_up = mono_ns() + 2000000;
    while (s.state.load(std::memory_order_acquire) == kSaving && mono_ns() < give_up) {}
    if (s.state.load(std::memory_order_acquire) != kSaved) {
      r.why = "no answer to the register signal in time";
      continue;
    }
    memcpy(r.words, s.words, sizeof(r.words));
    r.nwords = kWords;
    r.how = kSignal;
    r.sp = s.words[15];
    r.interrupted = uint8_t(s.interrupted);
  }
  res.threads = g_out;
  res.n = n;
  res.signaled = signaled;
  for (uint32_t i = 0; i < n; ++i) {
    if (g_out[i].how == kSignal) ++res.captured;
    else if (g_out[i].how == kSyscall) ++res.blocked;
    else ++res.missing;
  }
  return res;
}

void release() {
  g_released.store(g_gen.load(std::memory_order_acquire), std::memory_order_release);
  futex(&g_released, FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr);
}

const char *syscall_name(long nr) {
  switch (nr) {
    case SYS_read: return "read";
    case SYS_write: return "write";
    case SYS_poll: return "poll";
    case SYS_select: return "select";
    case SYS_nanosleep: return "nanosleep";
    case SYS_clock_nanosleep: return "clock_nanosleep";
    case SYS_futex: return "futex";
    case SYS_epoll_wait: return "epoll_wait";
    case SYS_epoll_pwait: return "epoll_pwait";
    case SYS_ppoll: return "ppoll";
    case SYS_pselect6: return "pselect6";
    case SYS_accept: return "accept";
    case SYS_accept4: return "accept4";
    case SYS_recvfrom: return "recvfrom";
    case SYS_recvmsg: return "recvmsg";
    case SYS_wait4: return "wait4";
    case SYS_waitid: return "waitid";
    case SYS_pause: return "pause";
    case SYS_rt_sigsuspend: return "rt_sigsuspend";
    case SYS_rt_sigtimedwait: return "rt_sigtimedwait";
    case SYS_io_getevents: return "io_getevents";
    case SYS_io_uring_enter: return "io_uring_enter";
    case SYS_msgrcv: return "msgrcv";
    case SYS_semtimedop: return "semtimedop";
    default: return nullptr;
  }
}

}  // namespace hs::regs
