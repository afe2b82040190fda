#include "config.h"

#include <sys/auxv.h>
#include <unistd.h>

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

}  // namespace

bool read_config() {
  // A setuid/setgid program must not be made to write files by its caller's environment.
  if (getauxval(AT_SECURE)) return false;
  const char *out = getenv("HEAPSNAP_OUTPUT");
  if (!out || !*out || strlen(out) >= sizeof(config.output) - 32) return false;
  strcpy(config.output, out);
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
  config.zstd_level = kDefaultZstdLevel;
  if (const char *s = getenv("HEAPSNAP_ZSTD_LEVEL")) {
    uint64_t v;
    if (parse_u64(s, &v) && v >= 1 && v <= 19) config.zstd_level = int(v);
  }
  const char *dbg = getenv("HEAPSNAP_DEBUG");
  config.debug = dbg && strcmp(dbg, "1") == 0;
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
