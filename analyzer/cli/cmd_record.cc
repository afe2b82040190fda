// heapsnap record [options] -- program args...: runs the program with the shim preloaded.
#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/term_style.h"

namespace heapsnap::cli {
namespace {

struct Options {
  std::string output;
  std::string sample_bytes;
  int stack_depth = 64;
  bool no_follow = false;
  std::string fork_mode = "follow";
  bool force = false;
  bool quiet = false;
  std::vector<std::string> command;
  // Snapshots (see HEAPSNAP_SNAPSHOT in preload/src/core/config.h).
  bool snap_exit = false;
  std::string snap_signal;      // "" = off
  uint64_t snap_every = 0;
  std::string snap_heap, snap_rss;
  uint32_t snap_max = 0;
  bool snap_contents = false;
  bool snap_request = false;
  std::string snap_registers;   // "" = the shim's default (a free real-time signal)
};

bool parse_size(const std::string &s, uint64_t *out);

// The captures of the processes the program started (forked or exec'd ones write their own,
// preload/src/output/capture_writer.cc open_output): the output name with %p expanded to another pid,
// or the name taken plus ".PID" or ".PID.N", modified since the run began. Full paths, in the
// order their pids came.
std::vector<std::string> child_captures(const std::string &pattern, const std::string &main_path,
                                        const timespec &since) {
  std::vector<std::string> found;
  size_t slash = pattern.rfind('/');
  std::string dir = slash == std::string::npos ? "." : pattern.substr(0, slash);
  std::string base = slash == std::string::npos ? pattern : pattern.substr(slash + 1);
  if (dir.find("%p") != std::string::npos) return found;  // one directory per process: not listed
  size_t at = base.find("%p");
  std::string prefix = at == std::string::npos ? base + "." : base.substr(0, at);
  std::string suffix = at == std::string::npos ? "" : base.substr(at + 2);
  auto digits = [](const std::string &t, size_t *i) {
    size_t start = *i;
    while (*i < t.size() && t[*i] >= '0' && t[*i] <= '9') ++*i;
    return *i > start;
  };
  // prefix DIGITS suffix, then (with %p only: a name taken twice) up to two ".DIGITS".
  auto matches = [&](const std::string &name) {
    if (name.compare(0, prefix.size(), prefix) != 0) return false;
    size_t i = prefix.size();
    if (!digits(name, &i) || name.compare(i, suffix.size(), suffix) != 0) return false;
    i += suffix.size();
    for (int extra = 0; extra < 2 && i < name.size(); ++extra) {
      if (name[i] != '.') return false;
      ++i;
      if (!digits(name, &i)) return false;
    }
    return i == name.size();
  };
  DIR *d = opendir(dir.c_str());
  if (!d) return found;
  std::vector<std::pair<std::string, timespec>> hits;
  while (dirent *e = readdir(d)) {
    std::string name = e->d_name;
    std::string path = dir + "/" + name;
    if (path == main_path || !matches(name)) continue;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const timespec &m = st.st_mtim;
    bool older = m.tv_sec < since.tv_sec || (m.tv_sec == since.tv_sec && m.tv_nsec < since.tv_nsec);
    // (A filesystem that keeps whole seconds only, or even ones: a second's grace.)
    if (older && !(m.tv_nsec == 0 && m.tv_sec + 2 >= since.tv_sec)) continue;  // an older run's
    hits.push_back({path, st.st_mtim});
  }
  closedir(d);
  // Pids as numbers: shorter names first, then by name.
  std::sort(hits.begin(), hits.end(), [](const auto &a, const auto &b) {
    return a.first.size() != b.first.size() ? a.first.size() < b.first.size() : a.first < b.first;
  });
  for (auto &h : hits) found.push_back(h.first);
  return found;
}

// "wrote X (size)", and the children's captures after it.
void say_written(const std::string &written, bool have, const struct stat &st,
                 const std::vector<std::string> &children) {
  if (have)
    fprintf(stderr, "heapsnap: wrote %s (%s)\n", written.c_str(), human_bytes(double(st.st_size)).c_str());
  else
    print_warning("no capture was written to %s (statically linked or setuid program?)", written.c_str());
  if (children.empty()) return;
  constexpr size_t kNamed = 8;
  std::string names;
  for (size_t i = 0; i < children.size() && i < kNamed; ++i) {
    size_t slash = children[i].rfind('/');
    names += " " + children[i].substr(slash == std::string::npos ? 0 : slash + 1);
  }
  if (children.size() > kNamed) names += " ... (" + std::to_string(children.size() - kNamed) + " more)";
  fprintf(stderr, "heapsnap: %s %zu capture%s of processes it started:%s (`heapsnap summary FILE` says what each ran)\n",
          have ? "and" : "wrote", children.size(), children.size() == 1 ? "" : "s", names.c_str());
  // A capture of its 24-byte file header alone: the process was killed before its first flush
  // (100 ms after it started), e.g. a pool worker terminated early.
  size_t empty = 0;
  for (const auto &c : children) {
    struct stat cs;
    if (stat(c.c_str(), &cs) == 0 && cs.st_size <= 24) ++empty;
  }
  if (empty)
    print_note("%zu of them hold nothing but the file header: %s killed before the first flush, 100 ms after %s",
               empty, empty == 1 ? "its process was" : "their processes were", empty == 1 ? "it started" : "they started");
}

// --snapshot-registers: off, or a real-time signal (the shim's parse_signal in thread_regs.cc
// takes the same forms; it also refuses one the program handles, and says so in the snapshot).
bool valid_register_signal(std::string v) {
  if (v == "off" || v == "none" || v == "0") return true;
  if (v.rfind("SIG", 0) == 0) v = v.substr(3);
  long n = 0;
  auto number = [&](const std::string &t, long *out) {
    if (t.empty() || t.size() > 3 || t.find_first_not_of("0123456789") != std::string::npos) return false;
    *out = std::stol(t);
    return true;
  };
  if (v.rfind("RTMAX", 0) == 0) {
    if (v.size() == 5) return true;
    return v[5] == '-' && number(v.substr(6), &n) && SIGRTMAX - n >= SIGRTMIN;
  }
  if (v.rfind("RTMIN", 0) == 0) {
    if (v.size() == 5) return true;
    return v[5] == '+' && number(v.substr(6), &n) && SIGRTMIN + n <= SIGRTMAX;
  }
  return number(v, &n) && n >= SIGRTMIN && n <= SIGRTMAX;
}

// Builds HEAPSNAP_SNAPSHOT from the options; "" when no snapshot was asked for.
std::string snapshot_spec(const Options &o, std::string *error) {
  std::string spec;
  auto add = [&](const std::string &item) { spec += (spec.empty() ? "" : ",") + item; };
  if (o.snap_exit) add("exit");
  if (!o.snap_signal.empty()) add("signal:" + o.snap_signal);
  if (o.snap_every) add("every:" + std::to_string(o.snap_every));
  uint64_t v;
  if (!o.snap_heap.empty()) {
    if (!parse_size(o.snap_heap, &v)) *error = "--snapshot-heap-above '" + o.snap_heap + "': expected a size (e.g. 512M, 2G)";
    add("heap:" + std::to_string(v));
  }
  if (!o.snap_rss.empty()) {
    if (!parse_size(o.snap_rss, &v)) *error = "--snapshot-rss-above '" + o.snap_rss + "': expected a size (e.g. 512M, 2G)";
    add("rss:" + std::to_string(v));
  }
  if (o.snap_request || (spec.empty() && (o.snap_max || o.snap_contents))) add("client");
  if (o.snap_max) add("max:" + std::to_string(o.snap_max));
  if (o.snap_contents) add("contents");
  return spec;
}

std::string self_dir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = 0;
  return dirname(buf);
}

// The shim: $HEAPSNAP_PRELOAD, else next to the build tree's analyzer, else the install libdir.
std::string find_shim() {
  if (const char *e = getenv("HEAPSNAP_PRELOAD"); e && *e) return e;
  std::string dir = self_dir();
  for (std::string cand : {dir + "/../preload/libheapsnap_preload.so",
                           dir + "/../lib/libheapsnap_preload.so",
                           dir + "/../lib/x86_64-linux-gnu/libheapsnap_preload.so"}) {
    if (access(cand.c_str(), R_OK) == 0) {
      char real[4096];
      if (realpath(cand.c_str(), real)) return real;
      return cand;
    }
  }
  return "";
}

bool parse_size(const std::string &s, uint64_t *out) {
  if (s.empty()) return false;
  char *end = nullptr;
  unsigned long long v = strtoull(s.c_str(), &end, 10);
  std::string suf = end;
  if (suf == "k" || suf == "K" || suf == "KiB") v *= 1024;
  else if (suf == "m" || suf == "M" || suf == "MiB") v *= 1024 * 1024;
  else if (suf == "g" || suf == "G" || suf == "GiB") v *= 1024ull * 1024 * 1024;
  else if (!suf.empty()) return false;
  if (v == 0) return false;
  *out = v;
  return true;
}

// The program's pid while record waits for it, for the forwarding handler.
volatile sig_atomic_t g_child_pid = 0;

void forward_signal(int sig, siginfo_t *info, void *) {
  // The kernel's own (a terminal hangup) went to the program's process group as well.
  if (info && info->si_code == SI_KERNEL) return;
  int saved = errno;
  if (g_child_pid > 0) kill(pid_t(g_child_pid), sig);
  errno = saved;
}

// --snapshot-on-signal's signal as the shim reads it (config.cc parse_signal), 0 if none.
int snapshot_signal_number(const std::string &v) {
  if (v.empty()) return 0;
  std::string s = v.rfind("SIG", 0) == 0 ? v.substr(3) : v;
  static const struct { const char *name; int sig; } names[] = {
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP}, {"PROF", SIGPROF},
      {"WINCH", SIGWINCH}, {"URG", SIGURG}, {"PWR", SIGPWR}};
  for (const auto &n : names)
    if (s == n.name) return n.sig;
  char *end = nullptr;
  long n = strtol(s.c_str(), &end, 10);
  return !s.empty() && *end == '\0' && n > 0 && n < 65 ? int(n) : 0;
}

// Signals sent to record itself (its pid is what `record ... &` leaves in $!) go on to the
// program: a snapshot request, or a request to end (the program then finishes its capture and
// record reports how it ended, instead of leaving it running on its own). The terminal's
// signals (^C, ^\, window size) already reach the program: they are sent to the whole group.
void forward_signals_to(pid_t pid, int snapshot_signal) {
  g_child_pid = pid;
  struct sigaction sa {};
  sa.sa_sigaction = forward_signal;
  sa.sa_flags = SA_RESTART | SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM}) sigaction(sig, &sa, nullptr);
  if (snapshot_signal > 0 && snapshot_signal != SIGINT && snapshot_signal != SIGQUIT) sigaction(snapshot_signal, &sa, nullptr);
}

std::vector<std::string> g_command;
std::vector<std::string> record_command() { return g_command; }

int run(const Options &o) {
  if (o.command.empty()) {
    print_error("record: no program given (usage: heapsnap record [OPTIONS] -- PROGRAM [ARGS...])");
    return kExitUsage;
  }
  uint64_t sample = 0;
  if (!o.sample_bytes.empty() && !parse_size(o.sample_bytes, &sample)) {
    print_error("record --sample-bytes '%s': expected a positive byte count (e.g. 65536, 64K, 1)", o.sample_bytes.c_str());
    return kExitUsage;
  }
  if (o.fork_mode != "follow" && o.fork_mode != "stop") {
    print_error("record --fork '%s': expected follow or stop", o.fork_mode.c_str());
    return kExitUsage;
  }
  if (!o.snap_registers.empty() && !valid_register_signal(o.snap_registers)) {
    print_error("record --snapshot-registers '%s': expected off, RTMAX-N, RTMIN+N or a real-time signal number",
                o.snap_registers.c_str());
    return kExitUsage;
  }
  std::string snap_error;
  std::string snap = snapshot_spec(o, &snap_error);
  if (!snap_error.empty()) {
    print_error("record %s", snap_error.c_str());
    return kExitUsage;
  }
  std::string shim = find_shim();
  if (shim.empty()) {
    print_error("record: cannot find libheapsnap_preload.so (set HEAPSNAP_PRELOAD)");
    return kExitCannotRun;
  }
  std::string output = o.output;
  if (output.empty()) {
    std::string base = o.command[0];
    if (auto slash = base.rfind('/'); slash != std::string::npos) base = base.substr(slash + 1);
    output = "heapsnap." + base + ".%p.hsnap";
  }
  if (output.find("%p") == std::string::npos) {
    struct stat st;
    if (lstat(output.c_str(), &st) == 0) {
      if (!o.force) {
        print_error("record: %s exists (use --force to replace it)", output.c_str());
        return kExitUsage;
      }
      if (unlink(output.c_str()) != 0) {
        print_error("record: cannot remove %s: %s", output.c_str(), strerror(errno));
        return kExitInput;
      }
    }
  }
  if (output[0] != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd))) output = std::string(cwd) + "/" + output;
  }
  {
    // The shim creates the capture inside the program: a directory it cannot write in would
    // only show after the whole run (and the program would run untraced).
    std::string dir = output.substr(0, output.rfind('/'));
    if (dir.empty()) dir = "/";
    if (access(dir.c_str(), W_OK | X_OK) != 0) {
      print_error("record -o %s: cannot create files in %s: %s", o.output.empty() ? output.c_str() : o.output.c_str(),
                  dir.c_str(), strerror(errno));
      return kExitUsage;
    }
  }

  // The clock file times come from (the coarse one: the precise clock is ahead of it by up to a
  // tick, and a child's capture made at once would look older than the run).
  timespec started{};
  clock_gettime(CLOCK_REALTIME_COARSE, &started);
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0) return kExitCannotRun;
  pid_t pid = fork();
  if (pid < 0) {
    print_error("record: fork: %s", strerror(errno));
    return kExitCannotRun;
  }
  if (pid == 0) {
    close(status_pipe[0]);
    std::string preload = shim;
    if (const char *cur = getenv("LD_PRELOAD"); cur && *cur) preload += std::string(":") + cur;
    setenv("LD_PRELOAD", preload.c_str(), 1);
    setenv("HEAPSNAP_OUTPUT", output.c_str(), 1);
    if (sample) setenv("HEAPSNAP_SAMPLE_BYTES", std::to_string(sample).c_str(), 1);
    setenv("HEAPSNAP_STACK_DEPTH", std::to_string(o.stack_depth).c_str(), 1);
    setenv("HEAPSNAP_FORK", o.fork_mode.c_str(), 1);
    if (!snap.empty()) setenv("HEAPSNAP_SNAPSHOT", snap.c_str(), 1);
    else unsetenv("HEAPSNAP_SNAPSHOT");
    if (!o.snap_registers.empty()) setenv("HEAPSNAP_SNAPSHOT_REGS_SIGNAL", o.snap_registers.c_str(), 1);
    if (o.no_follow) setenv("HEAPSNAP_NO_FOLLOW", "1", 1);
    else unsetenv("HEAPSNAP_NO_FOLLOW");
    std::vector<char *> argv;
    for (const auto &a : o.command) argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    int err = errno;
    (void)!write(status_pipe[1], &err, sizeof(err));
    _exit(127);
  }
  close(status_pipe[1]);
  // The program owns the terminal's signals: ^C reaches it directly (same process group); the
  // recorder waits for it to finish writing its capture.
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  forward_signals_to(pid, snapshot_signal_number(o.snap_signal));
  int exec_err = 0;
  ssize_t got = read(status_pipe[0], &exec_err, sizeof(exec_err));
  close(status_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  g_child_pid = 0;  // reaped: its pid may be another process's soon
  if (got == sizeof(exec_err)) {
    print_error("record: cannot run %s: %s", o.command[0].c_str(), strerror(exec_err));
    return kExitCannotRun;
  }
  std::string written = output;
  if (auto at = written.find("%p"); at != std::string::npos) written.replace(at, 2, std::to_string(pid));
  struct stat st;
  bool have = stat(written.c_str(), &st) == 0;
  if (!o.quiet) say_written(written, have, st, child_captures(output, written, started));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    if (!o.quiet)
      print_warning("%s was killed by signal %d (%s)", o.command[0].c_str(), sig, strsignal(sig));
    return 128 + sig;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// The index of the command: the first word that is not a global option (or --color's value).
// *only_color: whether every option before it is --color.
int command_index(int argc, char **argv, bool *only_color) {
  int i = 1;
  *only_color = true;
  while (i < argc && argv[i][0] == '-') {
    std::string a = argv[i];
    if (a.rfind("--color", 0) != 0) *only_color = false;
    i += a == "--color" ? 2 : 1;
  }
  return i;
}

}  // namespace

bool command_is_record(int argc, char **argv) {
  bool only_color;
  int i = command_index(argc, argv, &only_color);
  return only_color && i < argc && std::string(argv[i]) == "record";
}

int split_record_command(int argc, char **argv) {
  // heapsnap record [options] [--] program args...
  // Only when record is the command. "heapsnap leaks --match record app.hsnap" must not split.
  bool only_color;
  int i = command_index(argc, argv, &only_color);
  if (i >= argc || std::string(argv[i]) != "record") return argc;
  static const char *with_value[] = {"-o", "--output", "--sample-bytes", "--stack-depth", "--fork",
                                     "--snapshot-every", "--snapshot-heap-above", "--snapshot-rss-above",
                                     "--max-snapshots", "--snapshot-registers", "--color"};
  for (++i; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      for (int j = i + 1; j < argc; ++j) g_command.push_back(argv[j]);
      return i;
    }
    if (a.empty() || a[0] != '-') {
      for (int j = i; j < argc; ++j) g_command.push_back(argv[j]);
      return i;
    }
    for (const char *w : with_value)
      if (a == w) { ++i; break; }
  }
  return argc;
}

void add_record_command(CLI::App &app, int *rc) {
  auto opts = std::make_shared<Options>();
  CLI::App *cmd = app.add_subcommand(
      "record", "Run a program with the heapsnap shim preloaded and write a capture: heapsnap record [OPTIONS] -- PROGRAM [ARGS...]");
  cmd->add_option("-o,--output", opts->output,
                  "capture file; %p becomes the pid (default heapsnap.<program>.<pid>.hsnap)");
  cmd->add_option("--sample-bytes", opts->sample_bytes,
                  "mean bytes between sampled allocations (default 64K; 1 = every allocation with its stack)");
  cmd->add_option("--stack-depth", opts->stack_depth, "maximum frames per stack (default 64)")
      ->check(CLI::Range(1, 256));
  cmd->add_flag("--no-follow", opts->no_follow, "do not trace programs this one execs");
  cmd->add_option("--fork", opts->fork_mode,
                  "forked children: follow (own capture file, name + .<pid>) or stop (untraced)");
  cmd->add_flag("-f,--force", opts->force, "replace an existing output file");
  cmd->add_flag("--snapshot-at-exit", opts->snap_exit,
                "heap snapshot (every live block, roots, pointers) after the program's atexit handlers");
  CLI::Option *on_signal =
      cmd->add_option("--snapshot-on-signal", opts->snap_signal, "heap snapshot when the program gets this signal (default USR2)")
          ->expected(0, 1);
  cmd->add_option("--snapshot-every", opts->snap_every, "heap snapshot every N seconds");
  cmd->add_option("--snapshot-heap-above", opts->snap_heap, "heap snapshot when the heap first exceeds SIZE (e.g. 2G)");
  cmd->add_option("--snapshot-rss-above", opts->snap_rss, "heap snapshot when RSS first exceeds SIZE");
  cmd->add_option("--max-snapshots", opts->snap_max, "at most N snapshots (default 10)");
  cmd->add_flag("--snapshot-on-request", opts->snap_request,
                "heap snapshots when the program calls heapsnap_snapshot() (preload/include/heapsnap.h)");
  cmd->add_flag("--snapshot-contents", opts->snap_contents, "keep every block's bytes in snapshots");
  cmd->add_option("--snapshot-registers", opts->snap_registers,
                  "the signal that makes the program's other threads hand over their registers (roots) for a "
                  "snapshot: RTMAX-N, RTMIN+N, a number, or off (default: the highest real-time signal from RTMAX-3 "
                  "down that the program does not handle; threads asleep in a system call are never signalled)");
  cmd->add_flag("-q,--quiet", opts->quiet, "say nothing on stderr");
  // The program and its arguments are split off by split_record_command() before CLI11 parses,
  // so that the program's own options and "--" reach it untouched.
  cmd->footer(
      "Examples:\n"
      "  heapsnap record -o app.hsnap -- ./app arg1 arg2\n"
      "  heapsnap record --sample-bytes 1 -o all.hsnap -- python3 script.py\n"
      "  heapsnap record --snapshot-at-exit -o app.hsnap -- ./app\n"
      "  heapsnap record --snapshot-on-signal=USR2 -o srv.hsnap -- ./server &  kill -USR2 $!\n"
      "Signals sent to record (TERM, HUP, USR1, USR2, ALRM, the snapshot signal) go on to the program.\n"
      "The exit status is the program's (128+N if it was killed by signal N).");
  cmd->callback([opts, rc, on_signal] {
    if (on_signal->count() && opts->snap_signal.empty()) opts->snap_signal = "USR2";
    opts->command = record_command();
    *rc = run(*opts);
  });
}

}  // namespace heapsnap::cli
