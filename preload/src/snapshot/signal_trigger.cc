#include "snapshot/signal_trigger.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/tracer.h"

namespace hs::snapshot::trigger {
namespace {

std::atomic<bool> g_flag{false};
int g_signal = 0;
bool g_handler_lost = false;  // said once
int g_control = -1;           // record's pipe (read end), or -1
ino_t g_control_ino = 0;      // its identity: the program may close it and reuse the number
dev_t g_control_dev = 0;

void on_signal(int) { g_flag.store(true, std::memory_order_relaxed); }

// HEAPSNAP_CONTROL=FD:PID: the pipe, if this process is PID and FD is a pipe.
void open_control() {
  const char *v = getenv("HEAPSNAP_CONTROL");
  if (!v) return;
  char *end = nullptr;
  long fd = strtol(v, &end, 10);
  if (!end || *end != ':') return;
  long pid = strtol(end + 1, nullptr, 10);
  struct stat st;
  if (pid != getpid() || fd < 0 || fstat(int(fd), &st) != 0 || !S_ISFIFO(st.st_mode)) return;
  int fl = fcntl(int(fd), F_GETFL);
  if (fl < 0 || fcntl(int(fd), F_SETFL, fl | O_NONBLOCK) != 0) return;
  g_control = int(fd);
  g_control_ino = st.st_ino;
  g_control_dev = st.st_dev;
}

// The bytes record wrote since the last read: true if any.
bool read_control() {
  if (g_control < 0) return false;
  struct stat st;
  if (fstat(g_control, &st) != 0 || st.st_ino != g_control_ino || st.st_dev != g_control_dev) {
    g_control = -1;  // the program closed it (and may have the number for a file of its own)
    return false;
  }
  char buf[64];
  bool asked = false;
  for (;;) {
    ssize_t n = read(g_control, buf, sizeof(buf));
    if (n > 0) {
      asked = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) g_control = -1;  // record has gone
    return asked;
  }
}

void check_handler() {
  if (!g_signal || g_handler_lost) return;
  struct sigaction cur;
  if (sigaction(g_signal, nullptr, &cur) != 0) return;
  if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == on_signal) return;
  g_handler_lost = true;
  char msg[400];
  const char *name = sigabbrev_np(g_signal);
  int n = snprintf(msg, sizeof(msg),
                   "heapsnap: the program replaced heapsnap's SIG%s handler (as the Go runtime does): SIG%s sent to "
                   "it takes no snapshot; %s",
                   name ? name : "?", name ? name : "?",
                   g_control >= 0 ? "send it to `heapsnap record` instead, which asks through a pipe"
                                  : "run it under `heapsnap record` and send the signal to record, or call heapsnap_snapshot()");
  if (n > int(sizeof(msg)) - 1) n = int(sizeof(msg)) - 1;
  if (n <= 0) return;
  outbox_append_marker(0, msg, size_t(n));
  msg[n] = '\n';
  (void)!write(2, msg, size_t(n) + 1);
}

}  // namespace

void init(int sig) {
  g_signal = sig;
  if (sig) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, nullptr);
  }
  open_control();
}

bool take() {
  check_handler();
  bool asked = read_control();
  return g_flag.exchange(false) || asked;
}

bool pending() { return g_flag.exchange(false) || read_control(); }

void after_fork_child() { g_control = -1; }

}  // namespace hs::snapshot::trigger
