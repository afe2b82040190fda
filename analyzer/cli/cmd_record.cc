// heapsnap record [options] -- program args...: runs the program with the shim preloaded.
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
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
// Named as well as anonymous: the sanitizer builds' unity units put several cmd_*.cc in one
// translation unit, and each has its own Options and run().
namespace cmd_record {
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
  bool snap_main = false;
  std::string snap_signal;      // "" = off
  uint64_t snap_every = 0;
  std::string snap_heap, snap_rss;
  std::string snap_peak;        // "" = off, else a percentage
  std::string snap_growth;      // "" = off, else N% or a size
  uint32_t snap_max = 0;
  bool snap_contents = false;
  bool snap_request = false;
  std::string snap_registers;   // "" = the shim's default (a free real-time signal)
};

bool parse_size(const std::string &s, uint64_t *out);

// A capture of another process of the run, and that process's pid (from its name).
struct ChildCapture {
  std::string path;
  long pid = 0;
};

// The captures of the processes the program started (forked or exec'd ones write their own,
// preload/src/output/capture_writer.cc open_output): the output name with %p expanded to another pid,
// or the name taken plus ".PID" or ".PID.N", modified since the run began. Full paths, in the
// order their pids came.
std::vector<ChildCapture> child_captures(const std::string &pattern, const std::string &main_path,
                                         const timespec &since) {
  std::vector<ChildCapture> found;
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
  // prefix DIGITS suffix, then (with %p only: a name taken twice) up to two ".DIGITS". The first
  // DIGITS are the pid of the process that wrote it.
  auto matches = [&](const std::string &name, long *pid) {
    if (name.compare(0, prefix.size(), prefix) != 0) return false;
    size_t i = prefix.size();
    if (!digits(name, &i) || name.compare(i, suffix.size(), suffix) != 0) return false;
    *pid = strtol(name.c_str() + prefix.size(), nullptr, 10);
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
  std::vector<ChildCapture> hits;
  while (dirent *e = readdir(d)) {
    std::string name = e->d_name;
    std::string path = dir + "/" + name;
    long pid = 0;
    if (path == main_path || !matches(name, &pid)) continue;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const timespec &m = st.st_mtim;
    bool older = m.tv_sec < since.tv_sec || (m.tv_sec == since.tv_sec && m.tv_nsec < since.tv_nsec);
    // (A filesystem that keeps whole seconds only, or even ones: a second's grace.)
    if (older && !(m.tv_nsec == 0 && m.tv_sec + 2 >= since.tv_sec)) continue;  // an older run's
    hits.push_back({path, pid});
  }
  closedir(d);
  // Pids as numbers: shorter names first, then by name.
  std::sort(hits.begin(), hits.end(), [](const auto &a, const auto &b) {
    return a.path.size() != b.path.size() ? a.path.size() < b.path.size() : a.path < b.path;
  });
  return hits;
}

// Whether a capture is still being written: the shim holds flock(LOCK_EX) on its capture for as
// long as its process (or that process's crash-salvage helper) can still write it. A shim that
// takes no lock, or a file system without flock, reads as "not being written".
bool being_written(const std::string &path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return false;
  bool locked = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd);  // (releases the shared lock if it was taken)
  return locked;
}

// Waits up to `seconds` for the capture at `path` to be released (see being_written); false if it
// is still being written then.
bool wait_until_written(const std::string &path, double seconds) {
  timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    if (!being_written(path)) return true;
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (double(now.tv_sec - start.tv_sec) + double(now.tv_nsec - start.tv_nsec) * 1e-9 >= seconds) return false;
    timespec pause{0, 20 * 1000 * 1000};
    nanosleep(&pause, nullptr);
  }
}

std::string file_name(const std::string &path) {
  size_t slash = path.rfind('/');
  return path.substr(slash == std::string::npos ? 0 : slash + 1);
}

// "wrote X (size)", and the children's captures after it: which are still being written (a
// daemon's, or those of processes the program left running), which were cut off.
void say_written(const std::string &written, bool have, const struct stat &st,
                 const std::vector<ChildCapture> &children) {
  if (have)
    fprintf(stderr, "heapsnap: wrote %s (%s)\n", written.c_str(), human_bytes(double(st.st_size)).c_str());
  else if (!children.empty())
    print_warning("no capture was written to %s for the program itself (only for processes it started)", written.c_str());
  if (children.empty()) return;
  constexpr size_t kNamed = 8;
  std::string names;
  for (size_t i = 0; i < children.size() && i < kNamed; ++i) names.append(" ").append(file_name(children[i].path));
  if (children.size() > kNamed) names += " ... (" + std::to_string(children.size() - kNamed) + " more)";
  fprintf(stderr, "heapsnap: %s %zu capture%s of processes it started:%s (`heapsnap summary FILE` says what each ran)\n",
          have ? "and" : "wrote", children.size(), children.size() == 1 ? "" : "s", names.c_str());
  // Still locked by its writer: the process runs on (it daemonized, or the program left it
  // running). A capture of its 24-byte file header alone that nobody writes any more: the process
  // was killed before its first flush (100 ms after it started), e.g. a pool worker terminated early.
  size_t empty = 0, running = 0;
  for (const auto &c : children) {
    if (being_written(c.path)) {
      if (running++ < kNamed)
        print_note("process %ld is still running; its capture %s is still being written", c.pid, c.path.c_str());
      continue;
    }
    struct stat cs;
    if (stat(c.path.c_str(), &cs) == 0 && cs.st_size <= 24) ++empty;
  }
  if (running > kNamed)
    print_note("and %zu more processes are still running, their captures still being written", running - kNamed);
  if (running)
    print_note("a capture is complete once its process has exited (`heapsnap summary FILE` reads one being written, up to its last flush)");
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
  if (o.snap_main) add("main");
  if (!o.snap_signal.empty()) add("signal:" + o.snap_signal);
  if (o.snap_every) add("every:" + std::to_string(o.snap_every));
  uint64_t v;
  if (!o.snap_heap.empty()) {
    if (!parse_size(o.snap_heap, &v)) *error = "--snapshot-heap-above '" + o.snap_heap + "': expected a size (e.g. 512M, 2G)";
    add("heap:" + std::to_string(v));
  }
  if (!o.snap_peak.empty()) {
    std::string p = o.snap_peak;
    if (!p.empty() && p.back() == '%') p.pop_back();
    if (p.empty() || p.size() > 3 || p.find_first_not_of("0123456789") != std::string::npos || std::stoi(p) < 1 ||
        std::stoi(p) > 100)
      *error = "--snapshot-at-peak '" + o.snap_peak + "': expected a whole percentage from 1 to 100 (e.g. --snapshot-at-peak=5)";
    else
      add("peak:" + p);
  }
  if (!o.snap_growth.empty()) {
    const std::string &g = o.snap_growth;
    if (g.back() == '%') {
      std::string p = g.substr(0, g.size() - 1);
      if (p.empty() || p.size() > 4 || p.find_first_not_of("0123456789") != std::string::npos || std::stoi(p) < 1 ||
          std::stoi(p) > 1000)
        *error = "--snapshot-on-growth '" + g + "': expected a percentage from 1% to 1000% or a size (e.g. 10%, 64M)";
      else
        add("growth:" + g);
    } else if (!parse_size(g, &v) || v == 0) {
      *error = "--snapshot-on-growth '" + g + "': expected a percentage from 1% to 1000% or a size (e.g. 10%, 64M)";
    } else {
      add("growth:" + std::to_string(v));
    }
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

// The file execvp would run for `name`: itself when it holds a '/', else the first executable
// regular file of that name in $PATH (glibc's default path when PATH is unset). "" if none.
std::string resolve_program(const std::string &name) {
  if (name.empty() || name.find('/') != std::string::npos) return name;
  const char *env = getenv("PATH");
  std::string path = env ? env : "/bin:/usr/bin";
  for (size_t start = 0;;) {
    size_t end = path.find(':', start);
    std::string dir = path.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::string cand = (dir.empty() ? "." : dir) + "/" + name;  // an empty entry is the current directory
    struct stat st;
    if (stat(cand.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(cand.c_str(), X_OK) == 0) return cand;
    if (end == std::string::npos) return "";
    start = end + 1;
  }
}

// Whether an ELF file has a PT_INTERP program header (is dynamically linked). -1: unknown (not
// an ELF executable of this machine's byte order, or unreadable), 0: static (static-pie too), 1: dynamic.
template <typename Ehdr, typename Phdr>
int elf_has_interp(int fd, const unsigned char *head, size_t got) {
  if (got < sizeof(Ehdr)) return -1;
  Ehdr eh;
  memcpy(&eh, head, sizeof(eh));
  if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) return -1;
  if (eh.e_phnum == 0 || eh.e_phnum == PN_XNUM || eh.e_phentsize != sizeof(Phdr)) return -1;
  std::vector<Phdr> ph(eh.e_phnum);
  size_t bytes = ph.size() * sizeof(Phdr);
  if (pread(fd, ph.data(), bytes, off_t(eh.e_phoff)) != ssize_t(bytes)) return -1;
  for (const Phdr &p : ph)
    if (p.p_type == PT_INTERP) return 1;
  return 0;
}

int elf_dynamic(const std::string &path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  unsigned char head[sizeof(Elf64_Ehdr)] = {};
  ssize_t got = pread(fd, head, sizeof(head), 0);
  int result = -1;
  constexpr unsigned char native = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB;
  if (got >= EI_NIDENT && memcmp(head, ELFMAG, SELFMAG) == 0 && head[EI_DATA] == native) {
    if (head[EI_CLASS] == ELFCLASS64) result = elf_has_interp<Elf64_Ehdr, Elf64_Phdr>(fd, head, size_t(got));
    else if (head[EI_CLASS] == ELFCLASS32) result = elf_has_interp<Elf32_Ehdr, Elf32_Phdr>(fd, head, size_t(got));
  }
  close(fd);
  return result;
}

// Why LD_PRELOAD cannot reach the program, found before it runs; "" when it can, or when that
// cannot be told (a file that cannot be read runs as it would without record). Scripts (#!) are
// fine: their interpreter is what runs.
std::string untraceable_reason(const std::string &name) {
  std::string path = resolve_program(name);
  if (path.empty()) return "";
  std::string shown = path == name ? name : name + " (" + path + ")";
  if (elf_dynamic(path) == 0)
    return shown + " is statically linked: LD_PRELOAD cannot trace it (use the client API, heapsnap.h)";
  // Set-user-ID or set-group-ID to another id than ours: the kernel runs it in secure-execution
  // mode (AT_SECURE) and the loader ignores LD_PRELOAD, unless the bits themselves are ignored
  // (a nosuid mount, no_new_privs).
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return "";
  bool setuid = (st.st_mode & S_ISUID) && st.st_uid != getuid();
  bool setgid = (st.st_mode & S_ISGID) && (st.st_mode & S_IXGRP) && st.st_gid != getgid();
  if (!setuid && !setgid) return "";
  struct statvfs vfs;
  if (statvfs(path.c_str(), &vfs) == 0 && (vfs.f_flag & ST_NOSUID)) return "";
  if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1) return "";
  return shown + " is " + (setuid ? "setuid" : "setgid") +
         ": the loader ignores LD_PRELOAD for it, so it cannot be traced (record a copy without the " +
         (setuid ? "setuid" : "setgid") + " bit)";
}

// Creates and removes the file the shim will create (O_CREAT|O_EXCL|O_NOFOLLOW, as it does; %p
// expanded with record's own pid), so that an output the program could not write is refused before
// it runs rather than reported after. 0 on success, else the errno.
int probe_output(const std::string &output, std::string *probe) {
  std::string name = output;
  for (size_t at; (at = name.find("%p")) != std::string::npos;) name.replace(at, 2, std::to_string(getpid()));
  for (int attempt = 0; attempt < 2; ++attempt) {
    *probe = attempt == 0 ? name : name + ".heapsnap-probe." + std::to_string(getpid());
    int fd = open(probe->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      close(fd);
      unlink(probe->c_str());
      return 0;
    }
    if (errno != EEXIST) return errno;
  }
  return 0;  // (both names taken: the directory takes files)
}

// The program's pid while record waits for it, for the forwarding handler.
volatile sig_atomic_t g_child_pid = 0;
// The snapshot signal, and the pipe record asks the shim through instead of sending it on (the
// shim reads it whatever the program does with its signals: the Go runtime takes them all;
// preload/src/snapshot/signal_trigger.h).
volatile sig_atomic_t g_snapshot_signal = 0;
volatile sig_atomic_t g_control_fd = -1;

void forward_signal(int sig, siginfo_t *info, void *) {
  // The kernel's own (a terminal hangup) went to the program's process group as well.
  if (info && info->si_code == SI_KERNEL) return;
  int saved = errno;
  if (sig == g_snapshot_signal && g_control_fd >= 0) (void)!write(g_control_fd, "S", 1);
  else if (g_child_pid > 0) kill(pid_t(g_child_pid), sig);
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
  g_snapshot_signal = snapshot_signal;
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
    // The shim creates the capture inside the program: an output it cannot create would only
    // show after the whole run (and the program would run untraced). Not access(): root passes
    // it for /proc, a read-only mount or a full disk.
    std::string probe;
    if (int err = probe_output(output, &probe)) {
      print_error("record -o %s: cannot create the capture file %s: %s", o.output.empty() ? output.c_str() : o.output.c_str(),
                  probe.c_str(), strerror(err));
      return kExitUsage;
    }
  }
  if (std::string why = untraceable_reason(o.command[0]); !why.empty()) {
    print_error("record: %s", why.c_str());
    return kExitCannotRun;
  }

  // The clock file times come from (the coarse one: the precise clock is ahead of it by up to a
  // tick, and a child's capture made at once would look older than the run).
  timespec started{};
  clock_gettime(CLOCK_REALTIME_COARSE, &started);
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0) return kExitCannotRun;
  // Snapshot requests go through a pipe the program inherits (see forward_signal).
  int control[2] = {-1, -1};
  if (snapshot_signal_number(o.snap_signal) > 0 && pipe2(control, O_CLOEXEC | O_NONBLOCK) != 0) control[0] = control[1] = -1;
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
    unsetenv("HEAPSNAP_CONTROL");
    if (control[0] >= 0 && fcntl(control[0], F_SETFD, 0) == 0)  // kept across exec: the shim's end
      setenv("HEAPSNAP_CONTROL", (std::to_string(control[0]) + ":" + std::to_string(getpid())).c_str(), 1);
    std::vector<char *> argv;
    for (const auto &a : o.command) argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    int err = errno;
    (void)!write(status_pipe[1], &err, sizeof(err));
    _exit(127);
  }
  close(status_pipe[1]);
  if (control[0] >= 0) close(control[0]);
  g_control_fd = control[1];
  // The program owns the terminal's signals: ^C reaches it directly (same process group); the
  // recorder waits for it to finish writing its capture.
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  forward_signals_to(pid, snapshot_signal_number(o.snap_signal));
  int exec_err = 0;
  ssize_t got = read(status_pipe[0], &exec_err, sizeof(exec_err));
  close(status_pipe[0]);
  // Waits for the program's end without reaping it: until record reaps it, a crash-salvage helper
  // still finishing its capture reads how it ended in /proc/PID/stat (preload/src/output/tail_guard.h).
  siginfo_t info{};
  while (waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {}
  // What follows (a wait for a capture still being written) can be interrupted as usual.
  for (int sig : {SIGINT, SIGQUIT, SIGTERM, SIGHUP}) signal(sig, SIG_DFL);
  std::string written = output;
  if (auto at = written.find("%p"); at != std::string::npos) written.replace(at, 2, std::to_string(pid));
  // The program has exited, but its capture may still be written: by the shim's crash-salvage
  // helper, or by a process that shares its descriptor. The shim holds a lock on it until then.
  constexpr double kWaitSeconds = 5;
  bool released = got == sizeof(exec_err) || wait_until_written(written, kWaitSeconds);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  g_child_pid = 0;  // reaped: its pid may be another process's soon
  if (got == sizeof(exec_err)) {
    print_error("record: cannot run %s: %s", o.command[0].c_str(), strerror(exec_err));
    return kExitCannotRun;
  }
  if (!released && !o.quiet)
    print_note("%s is still being written %.0f s after %s exited (a crash-salvage helper, or a process that inherited "
               "its descriptor?): reporting on it as it is now",
               written.c_str(), kWaitSeconds, o.command[0].c_str());
  struct stat st;
  bool have = stat(written.c_str(), &st) == 0;
  std::vector<ChildCapture> children = child_captures(output, written, started);
  std::string ended = WIFSIGNALED(status) ? "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
                                                strsignal(WTERMSIG(status)) + ")"
                                          : "exited with status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
  if (!have && children.empty()) {
    // Static and set-id programs were refused before the run, so the shim either ran and gave up
    // (and said why on stderr), or never ran.
    print_error("record: no capture was written (%s, nor for any process it started); %s %s", written.c_str(),
                o.command[0].c_str(), ended.c_str());
    print_note("the shim says why on stderr above (\"heapsnap: ...\") when it was loaded and gave up; otherwise it was "
               "never loaded: the loader refused it (its message above), the program cleared LD_PRELOAD, or what it "
               "exec'd is not dynamically linked (e.g. a script's interpreter)");
    return kExitCannotRun;
  }
  if (!o.quiet) say_written(written, have, st, children);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    if (!o.quiet) print_warning("%s %s", o.command[0].c_str(), ended.c_str());
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
}  // namespace cmd_record

bool command_is_record(int argc, char **argv) {
  using namespace cmd_record;
  bool only_color;
  int i = command_index(argc, argv, &only_color);
  return only_color && i < argc && std::string(argv[i]) == "record";
}

int split_record_command(int argc, char **argv) {
  using namespace cmd_record;
  // heapsnap record [options] [--] program args...
  // Only when record is the command. "heapsnap leaks --match record app.hsnap" must not split.
  bool only_color;
  int i = command_index(argc, argv, &only_color);
  if (i >= argc || std::string(argv[i]) != "record") return argc;
  static const char *with_value[] = {"-o", "--output", "--sample-bytes", "--stack-depth", "--fork",
                                     "--snapshot-every", "--snapshot-heap-above", "--snapshot-rss-above", "--snapshot-on-growth",
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

void add_record_command(Cmd app, int *rc) {
  using namespace cmd_record;
  auto opts = std::make_shared<Options>();
  Cmd cmd = app.subcommand(
      "record", "Run a program with the heapsnap shim preloaded and write a capture: heapsnap record [OPTIONS] -- PROGRAM [ARGS...]");
  cmd.option("-o,--output", opts->output,
             "capture file; %p becomes the pid (default heapsnap.<program>.<pid>.hsnap)");
  cmd.option("--sample-bytes", opts->sample_bytes,
             "mean bytes between sampled allocations (default 64K; 1 = every allocation with its stack)");
  cmd.option("--stack-depth", opts->stack_depth, "maximum frames per stack (default 64)")
      .range(1, 256);
  cmd.flag("--no-follow", opts->no_follow, "do not trace programs this one execs");
  cmd.option("--fork", opts->fork_mode,
             "forked children: follow (own capture file, name + .<pid>) or stop (untraced)");
  cmd.flag("-f,--force", opts->force, "replace an existing output file");
  cmd.flag("--snapshot-at-exit", opts->snap_exit,
           "heap snapshot (every live block, roots, pointers) after the program's atexit handlers and static "
           "destructors: what they left (leaks)");
  cmd.flag("--snapshot-before-destructors", opts->snap_main,
           "heap snapshot when main returns or the program calls exit(), before atexit handlers and static "
           "destructors: the heap as main left it, globals and statics still alive (retention)");
  Opt on_signal =
      cmd.option("--snapshot-on-signal", opts->snap_signal, "heap snapshot when the program gets this signal (default USR2)")
          .expected(0, 1);
  cmd.option("--snapshot-every", opts->snap_every, "heap snapshot every N seconds");
  cmd.option("--snapshot-heap-above", opts->snap_heap, "heap snapshot when the heap first exceeds SIZE (e.g. 2G)");
  cmd.option("--snapshot-rss-above", opts->snap_rss, "heap snapshot when RSS first exceeds SIZE: seen at the next allocation's check (each 256 KiB of a thread's heap rise), or at the writer's 100 ms tick");
  Opt at_peak =
      cmd.option("--snapshot-at-peak", opts->snap_peak,
                 "a heap snapshot within PCT percent of the heap's maximum (--snapshot-at-peak=PCT, default 5): "
                 "taken each time the heap passes the last one's by PCT (from 256 KiB), only the largest kept "
                 "(not counted in --max-snapshots); peak and the snapshot queries use it")
          .expected(0, 1);
  cmd.option("--snapshot-on-growth", opts->snap_growth,
             "a heap snapshot each time the heap has grown by PCT% or SIZE since the last one (e.g. 10%, 64M; "
             "a percentage counts from 1 MiB); at most --max-snapshots kept, thinned evenly (the step doubles), "
             "appended at the end: heapsnap diff FILE:FIRST FILE:LAST --by type shows what grew");
  cmd.option("--max-snapshots", opts->snap_max, "at most N snapshots (default 10)");
  cmd.flag("--snapshot-on-request", opts->snap_request,
           "heap snapshots when the program calls heapsnap_snapshot() (preload/include/heapsnap.h)");
  cmd.flag("--snapshot-contents", opts->snap_contents, "keep every block's bytes in snapshots");
  cmd.option("--snapshot-registers", opts->snap_registers,
             "the signal that makes the program's other threads hand over their registers (roots) for a "
             "snapshot: RTMAX-N, RTMIN+N, a number, or off (default: the highest real-time signal from RTMAX-3 "
             "down that the program does not handle; threads asleep in a system call are never signalled)");
  cmd.flag("-q,--quiet", opts->quiet, "say nothing on stderr");
  // The program and its arguments are split off by split_record_command() before CLI11 parses,
  // so that the program's own options and "--" reach it untouched.
  cmd.footer(
      "Examples:\n"
      "  heapsnap record -o app.hsnap -- ./app arg1 arg2\n"
      "  heapsnap record --sample-bytes 1 -o all.hsnap -- python3 script.py\n"
      "  heapsnap record --snapshot-at-exit -o app.hsnap -- ./app\n"
      "  heapsnap record --snapshot-at-peak -o app.hsnap -- ./app   (then: heapsnap peak app.hsnap)\n"
      "  heapsnap record --snapshot-on-signal=USR2 -o srv.hsnap -- ./server &  kill -USR2 $!\n"
      "Signals sent to record (TERM, HUP, USR1, USR2, ALRM, the snapshot signal) go on to the program.\n"
      "Before the program runs, record creates and removes the capture file once (exit 2 if it cannot,\n"
      "with the reason), and refuses without running it (exit 3) a program LD_PRELOAD cannot reach:\n"
      "a statically linked one (the client API, heapsnap.h, is the way there) or a setuid/setgid one.\n"
      "After it exits, record waits up to 5 s for its capture while another process still writes it\n"
      "(the shim's crash-salvage helper), then names the captures of the processes it started, and\n"
      "those of them still running (a daemon) whose captures are still being written.\n"
      "The exit status is the program's (128+N if it was killed by signal N), or 3 if no capture at\n"
      "all was written (the message gives the program's own status).");
  cmd.callback([opts, rc, on_signal, at_peak] {
    if (on_signal.count() && opts->snap_signal.empty()) opts->snap_signal = "USR2";
    if (at_peak.count() && opts->snap_peak.empty()) opts->snap_peak = "5";
    opts->command = record_command();
    *rc = run(*opts);
  });
}

}  // namespace heapsnap::cli
