#include "core/proc_maps.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hs {
namespace {

uint64_t dec(const char *&p) {
  uint64_t v = 0;
  while (*p >= '0' && *p <= '9') v = v * 10 + uint64_t(*p++ - '0');
  return v;
}

}  // namespace

uint64_t parse_hex(const char *&p) {
  if (p[0] == '0' && p[1] == 'x') p += 2;
  uint64_t v = 0;
  for (;; ++p) {
    char c = *p;
    if (c >= '0' && c <= '9') v = v * 16 + uint64_t(c - '0');
    else if (c >= 'a' && c <= 'f') v = v * 16 + uint64_t(c - 'a' + 10);
    else break;
  }
  return v;
}

long read_small_file(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n;
  do n = read(fd, buf, cap - 1);
  while (n < 0 && errno == EINTR);
  close(fd);
  if (n < 0) return -1;
  buf[n] = '\0';
  return n;
}

namespace {

// Parses one line of the maps ([p, line_end)) into m; false if it is not a mapping's line.
bool parse_line(const char *p, const char *line_end, Mapping &m) {
  m.start = parse_hex(p);
  if (*p++ != '-') return false;
  m.end = parse_hex(p);
  if (line_end - p < 6) return false;
  ++p;
  m.readable = p[0] == 'r';
  m.writable = p[1] == 'w';
  m.executable = p[2] == 'x';
  m.shared = p[3] == 's';
  p += 5;
  m.offset = parse_hex(p);
  ++p;
  parse_hex(p);  // dev major
  ++p;
  parse_hex(p);  // dev minor
  ++p;
  m.inode = dec(p);
  while (*p == ' ') ++p;
  size_t len = p < line_end ? size_t(line_end - p) : 0;
  if (len >= sizeof(m.path)) len = sizeof(m.path) - 1;
  memcpy(m.path, p, len);
  m.path[len] = '\0';
  return true;
}

}  // namespace

bool find_mapping(uint64_t addr, Mapping *out) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  size_t have = 0;
  bool found = false, done = false;
  while (!done) {
    ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    have += size_t(n);
    buf[have] = '\0';
    char *p = buf;
    for (char *e; (e = strchr(p, '\n')) != nullptr; p = e + 1) {
      Mapping m;
      if (!parse_line(p, e, m)) continue;
      if (m.start > addr) {  // the maps are in address order: it is not there
        done = true;
        break;
      }
      if (addr < m.end) {
        *out = m;
        found = done = true;
        break;
      }
    }
    // The cut line moves to the front for the next read (a line longer than the buffer is dropped).
    size_t rest = size_t(buf + have - p);
    if (rest == sizeof(buf) - 1) rest = 0;
    memmove(buf, p, rest);
    have = rest;
  }
  close(fd);
  return found;
}

long read_proc_maps(Mapping *out, size_t cap, char *scratch, size_t scratch_size) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t used = 0;
  for (;;) {
    if (used + 1 >= scratch_size) break;  // maps larger than the scratch: keep what fits
    ssize_t n = read(fd, scratch + used, scratch_size - 1 - used);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    used += size_t(n);
  }
  close(fd);
  scratch[used] = '\0';
  long count = 0;
  const char *p = scratch;
  while (*p && size_t(count) < cap) {
    const char *line_end = strchr(p, '\n');
    if (!line_end) break;  // a cut last line is dropped
    if (!parse_line(p, line_end, out[count])) break;
    p = line_end + 1;
    ++count;
  }
  return count;
}

}  // namespace hs
