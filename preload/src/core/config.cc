#include "core/config.h"

#include <sys/auxv.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace hs {

Config config;

namespace {

bool parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s) return false;
  char *end = nullptr;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end == 'k' || *end == 'K') { v *= 1024; ++end; }
  else if (*end == 'm' || *end == 'M') { v *= 1024 * 1024; ++end; }
  if (*end != '\0') return false;
  *out = v;
  return true;
}

bool parse_size(const char *s, uint64_t *out) {
  if (!s || !*s) return false;
  char *end = nullptr;
  unsigned long long v = strtoull(s, &end, 10);
  switch (*end) {
    case 'k': case 'K': v <<= 10; ++end; break;
    case 'm': case 'M': v <<= 20; ++end; break;
    case 'g': case 'G': v <<= 30; ++end; break;
    default: break;
  }
  if (*end != '\0') return false;
  *out = v;
  return true;
}

bool parse_signal(const char *s, int *out) {
  static const struct { const char *name; int sig; } names[] = {
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP}, {"PROF", SIGPROF},
      {"WINCH", SIGWINCH}, {"URG", SIGURG}, {"PWR", SIGPWR}};
  if (strncmp(s, "SIG", 3) == 0) s += 3;
  for (const auto &n : names)
    if (strcmp(s, n.name) == 0) { *out = n.sig; return true; }
  uint64_t v;
  if (!parse_u64(s, &v) || v < 1 || v > 64) return false;
  int sig = int(v);
  for (const auto &n : names)
    if (sig == n.sig) { *out = sig; return true; }
  // Besides the names above, only real-time signals: any other number has a meaning the
  // snapshot handler (which sets a flag and returns) would take from the program. With SIGSEGV,
  // SIGBUS, SIGFPE or SIGILL a crash would return to its faulting instruction for ever.
  if (sig >= SIGRTMIN && sig <= SIGRTMAX) { *out = sig; return true; }
  return false;
}

// Parses HEAPSNAP_SNAPSHOT (see config.h). Unknown items make the whole setting invalid, so a
// typo never silently records nothing.
bool parse_snapshot(const char *spec) {
  char buf[512];
  if (strlen(spec) >= sizeof(buf)) return false;
  strcpy(buf, spec);
  config.snapshot_max = 10;
  config.snapshot_client = true;
  for (char *save = nullptr, *item = strtok_r(buf, ",", &save); item; item = strtok_r(nullptr, ",", &save)) {
    char *arg = strchr(item, ':');
    if (arg) *arg++ = '\0';
    uint64_t v = 0;
    if (strcmp(item, "exit") == 0 && !arg) config.snapshot_at_exit = true;
    else if (strcmp(item, "main") == 0 && !arg) config.snapshot_before_destructors = true;
    else if (strcmp(item, "signal") == 0) { if (!parse_signal(arg ? arg : "USR2", &config.snapshot_signal)) return false; }
    else if (strcmp(item, "every") == 0 && arg && parse_u64(arg, &v) && v > 0) config.snapshot_every_ns = v * 1000000000ull;
    else if (strcmp(item, "heap") == 0 && arg && parse_size(arg, &v) && v > 0) config.snapshot_heap_above = v;
    else if (strcmp(item, "peak") == 0 && arg && parse_u64(arg, &v) && v > 0 && v <= 100) config.snapshot_peak_pct = uint32_t(v);
    else if (strcmp(item, "growth") == 0 && arg && *arg && arg[strlen(arg) - 1] == '%') {
      arg[strlen(arg) - 1] = '\0';
      if (!parse_u64(arg, &v) || v < 1 || v > 1000) return false;
      config.snapshot_growth_pct = uint32_t(v);
    } else if (strcmp(item, "growth") == 0 && arg && parse_size(arg, &v) && v > 0) config.snapshot_growth_bytes = v;
    else if (strcmp(item, "rss") == 0 && arg && parse_size(arg, &v) && v > 0) config.snapshot_rss_above = v;
    else if (strcmp(item, "max") == 0 && arg && parse_u64(arg, &v) && v > 0 && v < 100000) config.snapshot_max = uint32_t(v);
    else if (strcmp(item, "contents") == 0 && !arg) config.snapshot_contents = true;
    else if (strcmp(item, "client") == 0 && !arg) config.snapshot_client = true;
    else return false;
  }
  config.snapshots = true;
  return true;
}

}  // namespace

bool read_config() {
  // A setuid/setgid program must not be made to write files by its caller's environment.
  if (getauxval(AT_SECURE)) return false;
  const char *out = getenv("HEAPSNAP_OUTPUT");
  if (!out || !*out || strlen(out) >= sizeof(config.output) - 32) return false;
  if (out[0] == '/') {
    strcpy(config.output, out);
  } else {
    // Relative to where the program started: a later chdir (or a forked child's) must not move
    // the capture.
    // (Joined by length, checked here: snprintf drew a -Wformat-truncation warning that the check
    // answers but the compiler cannot see.)
    char cwd[2048];
    if (!getcwd(cwd, sizeof(cwd))) return false;
    const size_t nc = strlen(cwd), no = strlen(out);
    if (nc + no + 2 >= sizeof(config.output) - 32) return false;
    memcpy(config.output, cwd, nc);
    config.output[nc] = '/';
    memcpy(config.output + nc + 1, out, no + 1);
  }
  config.sample_bytes = kDefaultSampleBytes;
  if (const char *s = getenv("HEAPSNAP_SAMPLE_BYTES")) {
    uint64_t v;
    if (parse_u64(s, &v) && v > 0) config.sample_bytes = v;
  }
  config.max_stack_depth = 64;
  if (const char *s = getenv("HEAPSNAP_STACK_DEPTH")) {
    uint64_t v;
    if (parse_u64(s, &v) && v >= 1 && v <= 256) config.max_stack_depth = int(v);
  }
  config.fork_mode = ForkMode::follow;
  if (const char *s = getenv("HEAPSNAP_FORK"); s && strcmp(s, "stop") == 0)
    config.fork_mode = ForkMode::stop;
  const char *nf = getenv("HEAPSNAP_NO_FOLLOW");
  config.no_follow_exec = nf && strcmp(nf, "1") == 0;
  config.flush_ms = 100;
  if (const char *s = getenv("HEAPSNAP_FLUSH_MS")) {
    uint64_t v;
    if (parse_u64(s, &v) && v >= 1 && v <= 10000) config.flush_ms = uint32_t(v);
  }
  // RSS parts over time (issue 32): smaps_rollup walks every mapping's page tables, so it is read
  // on one writer tick in ten (about 1 s), not every flush.
  config.rss_parts_ticks = 10;
  if (const char *s = getenv("HEAPSNAP_RSS_PARTS_TICKS")) {
    uint64_t v;
    if (parse_u64(s, &v) && v <= 100000) config.rss_parts_ticks = uint32_t(v);
  }
  config.unwinder = 0;  // unwind::kFast
  config.unwind_check[0] = 0;
  if (const char *s = getenv("HEAPSNAP_UNWINDER")) {
    if (strcmp(s, "libunwind") == 0) config.unwinder = 1;    // unwind::kLibunwindOnly
    else if (strcmp(s, "check") == 0) config.unwinder = 2;   // unwind::kCheck
  }
  if (const char *s = getenv("HEAPSNAP_UNWIND_CHECK")) snprintf(config.unwind_check, sizeof(config.unwind_check), "%s", s);
  config.test_child_handshake[0] = 0;
  if (const char *s = getenv("HEAPSNAP_TEST_CHILD_HANDSHAKE"); s && strlen(s) < sizeof(config.test_child_handshake) - 16)
    strcpy(config.test_child_handshake, s);
  const char *child_error = getenv("HEAPSNAP_TEST_CHILD_ERROR");
  config.test_child_error = child_error && strcmp(child_error, "1") == 0;
  const char *tick_hook = getenv("HEAPSNAP_TEST_TICK_IN_SNAPSHOT_APPEND");
  config.test_tick_in_snapshot_append = tick_hook && strcmp(tick_hook, "1") == 0;
  const char *no_scan = getenv("HEAPSNAP_TEST_NO_PAGEMAP_SCAN"), *refuse_guard = getenv("HEAPSNAP_TEST_REFUSE_SCAN_GUARD");
  config.test_no_pagemap_scan = no_scan && strcmp(no_scan, "1") == 0;
  config.test_refuse_scan_guard = refuse_guard && strcmp(refuse_guard, "1") == 0;
  // The snapshot child's scan threads (snapshot/child_threads.h); 1 scans on one thread as before.
  config.snapshot_threads = 0;
  if (const char *s = getenv("HEAPSNAP_SNAPSHOT_THREADS")) {
    uint64_t v;
    if (parse_u64(s, &v) && v >= 1 && v <= 64) config.snapshot_threads = uint32_t(v);
  }
  config.test_snapshot_piece_bytes = 0;
  if (const char *s = getenv("HEAPSNAP_TEST_SNAPSHOT_PIECE_BYTES")) {
    uint64_t v;
    if (parse_u64(s, &v) && v >= 16 && v <= (uint64_t(1) << 40) && !(v & (v - 1))) config.test_snapshot_piece_bytes = v;
  }
  config.zstd_level = kDefaultZstdLevel;
  config.zstd_level_given = false;
  if (const char *s = getenv("HEAPSNAP_ZSTD_LEVEL")) {
    uint64_t v;
    if (parse_u64(s, &v) && v >= 1 && v <= 19) {
      config.zstd_level = int(v);
      config.zstd_level_given = true;
    }
  }
  const char *dbg = getenv("HEAPSNAP_DEBUG");
  config.debug = dbg && strcmp(dbg, "1") == 0;
  if (const char *s = getenv("HEAPSNAP_SNAPSHOT"); s && *s) {
    if (!parse_snapshot(s)) {
      static const char msg[] = "heapsnap: HEAPSNAP_SNAPSHOT is not understood; tracing without snapshots\n";
      (void)!write(2, msg, sizeof(msg) - 1);
      config.snapshots = false;
      config.snapshot_at_exit = false;
      config.snapshot_before_destructors = false;
      config.snapshot_signal = 0;
      config.snapshot_every_ns = config.snapshot_heap_above = config.snapshot_rss_above = 0;
      config.snapshot_peak_pct = config.snapshot_growth_pct = 0;
      config.snapshot_growth_bytes = 0;
    }
  }
  return true;
}

void expand_output_name(const char *pattern, int pid, char *out, size_t cap) {
  size_t o = 0;
  for (const char *p = pattern; *p && o + 24 < cap; ++p) {
    if (p[0] == '%' && p[1] == 'p') {
      o += size_t(snprintf(out + o, cap - o, "%d", pid));
      ++p;
    } else {
      out[o++] = *p;
    }
  }
  out[o] = '\0';
}

}  // namespace hs
