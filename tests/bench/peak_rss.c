// Preloaded by scripts/bench into every process of a measured run: at exit, appends
// "pid comm VmHWM_kB" to the file named by $HEAPSNAP_BENCH_RSS_FILE, so that the traced program's
// own peak RSS is told apart from its tool's helper processes (heaptrack_interpret, zstd, the
// heapsnap launcher). Uses no allocator: open/read/write on static buffers only.
// Processes that end by _exit or a signal write nothing; the bench then falls back to the run's
// getrusage figure (the largest process of the tree).
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long read_file(const char *path, char *buf, long cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  long n = 0;
  while (n < cap - 1) {
    ssize_t r = read(fd, buf + n, (size_t)(cap - 1 - n));
    if (r <= 0) break;
    n += r;
  }
  close(fd);
  buf[n] = 0;
  return n;
}

static char *put_num(char *o, unsigned long v) {
  char tmp[24];
  int k = 0;
  do { tmp[k++] = (char)('0' + v % 10); v /= 10; } while (v);
  while (k) *o++ = tmp[--k];
  return o;
}

__attribute__((destructor)) static void heapsnap_bench_peak_rss(void) {
  const char *out = getenv("HEAPSNAP_BENCH_RSS_FILE");
  if (!out || !*out) return;
  static char status[8192], comm[64], line[160];
  if (!read_file("/proc/self/status", status, sizeof status)) return;
  const char *h = strstr(status, "\nVmHWM:");
  if (!h) return;
  unsigned long kb = strtoul(h + 7, NULL, 10);
  long cn = read_file("/proc/self/comm", comm, sizeof comm);
  while (cn > 0 && (comm[cn - 1] == '\n' || comm[cn - 1] == ' ')) comm[--cn] = 0;
  for (long i = 0; i < cn; ++i)
    if (comm[i] == ' ') comm[i] = '_';
  char *o = put_num(line, (unsigned long)getpid());
  *o++ = ' ';
  memcpy(o, cn ? comm : "?", cn ? (size_t)cn : 1);
  o += cn ? cn : 1;
  *o++ = ' ';
  o = put_num(o, kb);
  *o++ = '\n';
  int fd = open(out, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  ssize_t w = write(fd, line, (size_t)(o - line));
  (void)w;
  close(fd);
}
