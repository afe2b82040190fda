#include "output/tail_guard.h"

#include <fcntl.h>
#include <linux/kcmp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "core/own_mappings.h"
#include "core/private_heap.h"
#include "core/thread_state.h"
#include "core/tracer.h"
#include "output/frame_writer.h"
#include "snapshot/snapshot.h"

namespace hs::tail_guard {
namespace {

#if defined(__x86_64__)

// System calls that touch no memory of the program's but their arguments: until the program has
// gone, the guard runs with the TLS of the thread that made it (clone without CLONE_SETTLS), so
// it must not write errno, nor call anything that takes a lock or reads thread state.
HS_INLINE long sys(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0) {
  long ret;
  register long r10 asm("r10") = d;
  register long r8 asm("r8") = e;
  asm volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8) : "rcx", "r11", "memory");
  return ret;
}

constexpr size_t kStackBytes = size_t(256) << 10, kGuardPageBytes = 4096;
uint8_t *g_stack = nullptr;  // its guard page, then the stack (kept across fork: a child reuses it)
int g_pipe_w = -1;           // the program's end: its closing (exit, exec) wakes the guard
// What the guard is told, written before the clone and never after (the memory is shared).
struct Args {
  int pipe_r;      // the guard's end of the pipe
  int capture_fd;  // the capture, as numbered in the guard's copy of the descriptor table
  long program;    // the program's pid
};
Args g_args;

// close_range(lo, hi) for lo <= hi; false if it failed (an old kernel).
bool close_between(long lo, long hi) { return lo > hi || sys(436 /* close_range */, lo, hi, 0) == 0; }

// Decimal of v into out (no stdio before the program has gone).
char *put_dec(char *out, uint64_t v) {
  char tmp[24];
  int n = 0;
  do tmp[n++] = char('0' + v % 10);
  while ((v /= 10) != 0);
  while (n) *out++ = tmp[--n];
  *out = '\0';
  return out;
}

struct ProcStat {
  bool ok;
  char state;
  uint64_t flags, startcode, exit_code;
  bool has_exit_code;
  // Ended, or ending: a zombie, or past the start of its exit (PF_EXITING: the exit status is set,
  // the memory already let go, the parent not told yet).
  bool ended() const { return ok && (state == 'Z' || state == 'X' || (flags & 0x4)); }
};

// /proc/PID/stat: the state (field 3), the task's flags (9), where the program's text starts (26)
// and the exit status in waitpid's form (52, set from the start of the exit until the parent
// reaps the process). Raw system calls only.
ProcStat read_stat(long pid) {
  ProcStat st{};
  char path[40] = "/proc/";
  char *e = put_dec(path + 6, uint64_t(pid));
  memcpy(e, "/stat", 6);
  long fd = sys(SYS_openat, AT_FDCWD, long(path), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return st;
  char buf[1024];
  long n = sys(SYS_read, fd, long(buf), sizeof(buf) - 1);
  sys(SYS_close, fd);
  if (n <= 0) return st;
  buf[n] = '\0';
  const char *p = nullptr;
  for (const char *q = buf; *q; ++q)
    if (*q == ')') p = q;  // the last one: the command name may hold any character
  if (!p || p[1] != ' ') return st;
  p += 2;
  st.ok = true;
  st.state = *p;
  // Fields from 3 on, separated by single spaces.
  for (int field = 3; *p; ++field) {
    if (field == 9 || field == 26 || field == 52) {
      uint64_t v = 0;
      for (const char *q = p; *q >= '0' && *q <= '9'; ++q) v = v * 10 + uint64_t(*q - '0');
      if (field == 9) st.flags = v;
      else if (field == 26) st.startcode = v;
      else st.exit_code = v, st.has_exit_code = true;
    }
    while (*p && *p != ' ') ++p;
    if (*p == ' ') ++p;
  }
  return st;
}

void nap_100ms() {
  timespec ts = {0, 100 * 1000 * 1000};
  sys(SYS_nanosleep, long(&ts), 0);
}

// How the process ended, as the end record says it (capture_summary shows it).
void describe_end(const ProcStat &st, bool exec, char *out, size_t cap) {
  if (exec) {
    snprintf(out, cap, "salvaged: exec without the shim's exit path");
  } else if (!st.ended() || !st.has_exit_code) {
    snprintf(out, cap, "salvaged: the process ended without the shim's exit path (status unknown)");
  } else if ((st.exit_code & 0x7f) == 0) {
    snprintf(out, cap, "salvaged: exit status %u without the shim's exit path (exit_group, as Go exits)",
             unsigned((st.exit_code >> 8) & 0xff));
  } else {
    int sig = int(st.exit_code & 0x7f);
    const char *name = sigabbrev_np(sig);
    snprintf(out, cap, "salvaged: killed by signal %d%s%s%s", sig, name ? " (SIG" : "", name ? name : "", name ? ")" : "");
  }
}

int guard_main(void *arg) {
  const Args a = *static_cast<const Args *>(arg);
  // Every signal blocked (SIGKILL and SIGSTOP aside), and a process group of its own: what the
  // terminal or a kill of the program's group sends is not for the guard.
  uint64_t all = ~uint64_t(0);
  sys(SYS_rt_sigprocmask, SIG_SETMASK, long(&all), 0, 8);
  sys(SYS_setpgid, 0, 0);
  sys(SYS_prctl, PR_SET_NAME, long("heapsnap-guard"));
  // The program's descriptors, copied at the clone: none is the guard's to hold open (a pipe the
  // program's reader waits to see closed, a terminal), but its pipe end and the capture.
  long keep_lo = a.pipe_r < a.capture_fd ? a.pipe_r : a.capture_fd;
  long keep_hi = a.pipe_r < a.capture_fd ? a.capture_fd : a.pipe_r;
  if (!close_between(0, keep_lo - 1) || !close_between(keep_lo + 1, keep_hi - 1) || !close_between(keep_hi + 1, 0x7fffffff)) {
    for (int fd = 0; fd < 4096; ++fd)
      if (fd != a.pipe_r && fd != a.capture_fd) sys(SYS_close, fd);
  }
  ProcStat self = read_stat(long(sys(SYS_getpid)));
  // Until the program's end: the pipe's other end is closed when the program exits (any way) or
  // execs. The program may also close it itself (daemons close what they did not open): then the
  // guard looks every 100 ms whether the program still runs in this memory.
  char byte;
  for (;;) {
    long n = sys(SYS_read, a.pipe_r, long(&byte), 1);
    if (n == -EINTR || n > 0) continue;
    break;
  }
  long guard_pid = sys(SYS_getpid);
  bool exec = false;
  ProcStat st{};
  for (;;) {
    if (writer_finished()) sys(SYS_exit_group, 0);  // the shim's exit path wrote the end
    long same = sys(SYS_kcmp, guard_pid, a.program, KCMP_VM, 0, 0);
    if (same == 0) {  // the program runs on in this memory
      nap_100ms();
      continue;
    }
    st = read_stat(a.program);
    if (same == -ESRCH || !st.ok || st.ended()) break;
    // Alive in another memory image (exec), or kcmp is not allowed here: the text it runs tells.
    if (same > 0 || st.startcode != self.startcode) {
      exec = true;
      break;
    }
    nap_100ms();
  }
  if (writer_finished()) sys(SYS_exit_group, 0);
  // The program has gone: this process is the only one left in its memory. From here on it may
  // use the shim's code (the TLS it runs with is that of a thread that no longer runs).
  ++t_local.guard;
  uint64_t lo = 0, hi = 0;
  if (heap::switch_to_child_arena(size_t(64) << 30, &lo, &hi)) {
    char reason[200];
    describe_end(st, exec, reason, sizeof(reason));
    writer_salvage(a.capture_fd, reason);
  }
  sys(SYS_exit_group, 0);
  return 0;
}

#endif  // __x86_64__

}  // namespace

bool start() {
#if defined(__x86_64__)
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  if (!g_stack) {
    void *m = mmap(nullptr, kGuardPageBytes + kStackBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED || mprotect(m, kGuardPageBytes, PROT_NONE) != 0) {
      if (m != MAP_FAILED) munmap(m, kGuardPageBytes + kStackBytes);
      close(fds[0]);
      close(fds[1]);
      return false;
    }
    g_stack = static_cast<uint8_t *>(m);
    uint64_t lo = reinterpret_cast<uint64_t>(g_stack);
    snapshot::exclude_range(lo, lo + kGuardPageBytes + kStackBytes);
    own_mappings::name(m, kGuardPageBytes + kStackBytes);
  }
  g_pipe_w = fds[1];
  g_args = {fds[0], frames::fd(), long(getpid())};
  // No exit signal (0): the program's wait() calls never see it. Its own copy of the descriptor
  // table (no CLONE_FILES): it keeps the capture open, and the program's closing the write end
  // is what wakes it.
  int pid = g_args.capture_fd >= 0 ? clone(guard_main, g_stack + kGuardPageBytes + kStackBytes, CLONE_VM, &g_args) : -1;
  close(fds[0]);
  if (pid < 0) {
    close(g_pipe_w);
    g_pipe_w = -1;
    return false;
  }
  return true;
#else
  return false;
#endif
}

void after_fork_child() {
#if defined(__x86_64__)
  if (g_pipe_w >= 0) close(g_pipe_w);
  g_pipe_w = -1;
#endif
}

}  // namespace hs::tail_guard
