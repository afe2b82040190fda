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
    Mapping &m = out[count];
    m.start = parse_hex(p);
    if (*p++ != '-') break;
    m.end = parse_hex(p);
    ++p;
    m.readable = p[0] == 'r';
    m.writable = p[1] == 'w';
    m.executable = p[2] == 'x';
    p += 5;
    m.offset = parse_hex(p);
    ++p;
    parse_hex(p);  // dev major
    ++p;
    parse_hex(p);  // dev minor
    ++p;
    m.inode = dec(p);
    while (*p == ' ') ++p;
    size_t len = size_t(line_end - p);
    if (len >= sizeof(m.path)) len = sizeof(m.path) - 1;
    memcpy(m.path, p, len);
    m.path[len] = '\0';
    p = line_end + 1;
    ++count;
  }
  return count;
}

}  // namespace hs
