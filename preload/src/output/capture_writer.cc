// The capture file: header, zstd frames of records, the writer thread that flushes them at least
// every flush_ms, and the final frame at exit.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_createCCtx_advanced: the tracer allocates from its own heap
#include <zstd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../../../proto/flush_hash.h"
#include "core/config.h"
#include "core/high_fd.h"
#include "sampling/module_map.h"
#include "core/proc_maps.h"
#include "core/private_heap.h"
#include "snapshot/snapshot.h"
#include "core/thread_state.h"
#include "core/tracer.h"

#ifndef HEAPSNAP_VERSION
#define HEAPSNAP_VERSION "dev"
#endif

namespace hs {
namespace {

constexpr uint16_t kFormatMajor = 3;  // 3: a frame spans flushes; 2: alloc_fn and moved in the event kind
constexpr uint16_t kFormatMinor = 1;  // 3.1: FlushEnd records
// Records per frame, before compression. A frame stays open across the writer's flushes (each
// one ends with ZSTD_e_flush: everything flushed is in the file as whole blocks) until it holds
// this much, so that it compresses against the records of earlier flushes. On sqlite3's 58 MB
// of events (--sample-bytes 1) at level 11, frames of 2 MB gave 349 KB, 4 MB 340 KB, 8 MB
// 330 KB, one frame for everything 319 KB (/tmp simulation over the capture's flushes, see
// issue 8's note). A damaged frame is lost whole: bigger frames would lose more.
constexpr size_t kMaxFrameInput = 8u << 20;

pthread_mutex_t g_outbox_mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t g_flush_mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t g_wake_mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_wake = PTHREAD_COND_INITIALIZER;
wire::Buf *g_outbox = nullptr;
wire::Buf *g_pending = nullptr;     // the writer's side of the double buffer
wire::Buf *g_compressed = nullptr;  // zstd's output on its way to the file
size_t g_compressed_cap = 0;
ZSTD_CCtx *g_zstd = nullptr;
int g_fd = -1;
dev_t g_dev = 0;  // identity of the capture file, to recognise g_fd
ino_t g_ino = 0;
pthread_t g_writer;
bool g_writer_running = false;
std::atomic<bool> g_writer_stop{false};
char g_path[4300];

void *zstd_alloc(void *, size_t n) { return heap::alloc(n); }
void zstd_free(void *, void *p) { heap::release(p); }

bool write_all(const void *data, size_t n) {
  const auto *p = static_cast<const uint8_t *>(data);
  while (n) {
    ssize_t w = write(g_fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= size_t(w);
  }
  return true;
}

// Reads a record's length prefix (any varint) at p; returns bytes of prefix + record, or 0.
size_t record_extent(const uint8_t *p, size_t avail) {
  uint64_t len = 0;
  size_t i = 0;
  for (int shift = 0; i < avail && i < 10; shift += 7) {
    uint8_t b = p[i++];
    len |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return i + len <= avail ? i + size_t(len) : 0;
  }
  return 0;
}

// The compression level adapts to the stream. On the very repetitive event streams of most
// programs zstd's level 11 (lazy2, a deeper search) is as fast as the default 5 and its output a
// quarter as big: 58 MB of sqlite3 events (format 2) in 8 MB frames, 1.09 MB at level 5, 458 KB
// at 7, 287 KB at 11, each in 0.07-0.10 s of CPU; python's 80 MB: 550, 474, 464 KB. Its default
// tables (hashLog 22, chainLog 21: 24 MB in the traced process) are cut to 2^18 entries each
// (2 MB), which changes the output by 0.1%. On streams that repeat little level 11 only costs
// time (a 4-thread stress, 44 MB: 19.2 MB at 5 and 19.0 at 11, 0.28 s against 1.01 s of CPU). So
// a frame that compressed kRepetitive-fold or more sends the next one to kRepetitiveLevel, and
// one that did not back to the configured level. HEAPSNAP_ZSTD_LEVEL, when given, holds for
// every frame. (Measured with the zstd command line on the frames' contents, see issue 8's note.)
// At the other end, a stream that compresses less than kPoor-fold (random sizes and addresses from
// many threads) gains almost nothing from the configured level's search: the 4-thread stress's
// events, 42 MB, compress 2.3-fold to 19.16 MB at level 5 in 0.35 s of CPU and to 19.43 MB at
// level 2 in 0.11 s (default sampling: 933 KB to 379 KB and 384 KB). The writer shares the CPUs
// with the program, so such a frame sends the next one to kPoorLevel.
constexpr size_t kRepetitive = 16;
constexpr int kRepetitiveLevel = 11;
constexpr int kRepetitiveTableLog = 18;
constexpr size_t kPoor = 4;
constexpr int kPoorLevel = 2;
// The first frame of events has no earlier frame to go by, and its level mattered: sqlite3's
// (--sample-bytes 1, 2 MB) took 52.5 KB at level 2, where the capture's first frame (the process
// and its modules: strings, about 2 KB) had sent it, 38.7 KB at 5 and 19.9 KB at 11; the 4-thread
// stress's is poor at every level, and level 11 on it cost 8 instructions per operation under
// callgrind. So the capture's first frame leaves the level alone, and the first frame of events
// picks its own from a probe: its first kProbeBytes at level 1 (about 0.1 ms). Measured ratios of
// that probe: sqlite3 6.3, python 3.9, the stress 2.4 (their whole frames at level 11: 105, 7 and
// 2.5).
constexpr size_t kProbeBytes = 64 << 10;
constexpr size_t kProbeRepetitive = 5;
constexpr size_t kProbePoor = 3;
bool g_first_frame = true;  // the next frame is a capture's first (writer_open_capture)
// The level g_zstd is set to; 0 until the first frame of events has probed (a forked child keeps
// its parent's).
int g_frame_level = 0;

void set_frame_level(int level) {
  ZSTD_CCtx_setParameter(g_zstd, ZSTD_c_compressionLevel, level);
  // 0: the level's own table sizes.
  int table_log = level == kRepetitiveLevel ? kRepetitiveTableLog : 0;
  ZSTD_CCtx_setParameter(g_zstd, ZSTD_c_hashLog, table_log);
  ZSTD_CCtx_setParameter(g_zstd, ZSTD_c_chainLog, table_log);
  g_frame_level = level;
}

bool adaptive_level() { return !config.zstd_level_given && config.zstd_level < kRepetitiveLevel; }

// The level for data that compressed from n to z bytes: the repetitive level if it compressed
// `repetitive`-fold or more, the poor level under `poor`-fold, else the configured one.
int level_for(size_t n, size_t z, size_t repetitive, size_t poor) {
  return n >= repetitive * z                                 ? kRepetitiveLevel
         : n < poor * z && config.zstd_level > kPoorLevel ? kPoorLevel
                                                          : config.zstd_level;
}

// The level for the first frame of events, from its first kProbeBytes compressed at level 1.
int probed_level(const uint8_t *data, size_t n) {
  size_t pn = n < kProbeBytes ? n : kProbeBytes;
  set_frame_level(1);
  size_t pz = ZSTD_compress2(g_zstd, g_compressed->data(), ZSTD_compressBound(pn), data, pn);
  if (ZSTD_isError(pz) || pz == 0) return config.zstd_level;
  return level_for(pn, pz, kProbeRepetitive, kProbePoor);
}

// The frame being written, if one is open (see kMaxFrameInput): its input and output so far.
bool g_frame_open = false;
bool g_frame_is_first = false;  // it is the capture's first frame (the level stays as it is)
size_t g_frame_in = 0, g_frame_out = 0;

// Ends the open frame's bookkeeping: the next frame's level follows this one's ratio.
void frame_ended() {
  g_frame_open = false;
  if (!adaptive_level() || g_frame_is_first) return;
  int next = level_for(g_frame_in, g_frame_out, kRepetitive, kPoor);
  if (next != g_frame_level) set_frame_level(next);
}

// Feeds n bytes to the open frame and writes what zstd gives out (mode: go on, flush, end).
bool stream_into_frame(const void *data, size_t n, ZSTD_EndDirective mode) {
  ZSTD_inBuffer in = {data, n, 0};
  for (;;) {
    ZSTD_outBuffer out = {g_compressed->data(), g_compressed_cap, 0};
    size_t left = ZSTD_compressStream2(g_zstd, &out, &in, mode);
    if (ZSTD_isError(left) || (out.pos && !write_all(out.dst, out.pos))) return false;
    g_frame_out += out.pos;
    if (mode == ZSTD_e_continue ? in.pos == in.size : left == 0) return true;
  }
}

// Compresses n bytes of whole records into the open frame, opening one if none is, and writes
// what zstd gives out. end: the frame ends here (its last block, checksum); else the data is
// flushed (ZSTD_e_flush: complete blocks, readable from the file as they are) after a FlushEnd
// record with their hash (see heapsnap.proto), which is what a reader of the frame cut off can
// check them by. A frame that starts and ends in one call is compressed in one pass and declares
// its size.
bool compress_records(const uint8_t *data, size_t n, bool end) {
  if (!g_frame_open) {
    if (!n) return true;
    g_frame_is_first = g_first_frame;
    g_first_frame = false;
    if (!g_frame_is_first && !g_frame_level && adaptive_level()) set_frame_level(probed_level(data, n));
    g_frame_open = true;
    g_frame_in = g_frame_out = 0;
  }
  bool ok;
  if (end) {
    ok = stream_into_frame(data, n, ZSTD_e_end);
  } else {
    // The record: its length (12), Record.flush_end (field 18, 2 bytes of key), FlushEnd's length
    // (9), FlushEnd.hash (field 1, fixed64).
    uint8_t check[13] = {12, uint8_t(wire::kFlushEnd << 3 | 2) | 0x80, uint8_t(wire::kFlushEnd >> 4), 9,
                         1 << 3 | 1};
    uint64_t h = heapsnap_format::flush_hash(data, n);
    memcpy(check + 5, &h, 8);  // little-endian, as fixed64 is
    ok = stream_into_frame(data, n, ZSTD_e_continue) && stream_into_frame(check, sizeof(check), ZSTD_e_flush);
    n += sizeof(check);
  }
  if (!ok) {
    // The frame has a hole: it ends here, unfinished (the reader skips it), and the next write,
    // if the caller goes on, starts a frame of its own.
    ZSTD_CCtx_reset(g_zstd, ZSTD_reset_session_only);
    g_frame_open = false;
    return false;
  }
  g_frame_in += n;
  if (end) frame_ended();
  return true;
}

// The program may close descriptors it did not open (daemons, close_range(3, ~0)) and get our
// number back for a file of its own: the capture then must never be written through it. The
// descriptor lives far from the low numbers programs use (high_fd.h), and its identity is checked
// before each write; if it changed, the capture is reopened by name (only if it is still our file).
bool is_capture(int fd) {
  struct stat st;
  return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == g_dev && st.st_ino == g_ino;
}

bool capture_fd_ok() {
  if (g_fd < 0) return false;
  if (is_capture(g_fd)) return true;
  g_fd = -1;  // no longer ours: never close or write it
  int fd = open(g_path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  if (!is_capture(fd)) {
    close(fd);
    return false;
  }
  g_fd = move_fd_high(fd);
  return true;
}

// Compresses the writer's pending records into the open frame, cut at record boundaries into
// frames of at most kMaxFrameInput bytes. end_frame: the last frame ends too (before a snapshot
// is appended, at exit, and for the capture's first frame).
bool write_pending(bool end_frame) {
  if (!capture_fd_ok()) {
    g_pending->clear();
    return false;
  }
  const uint8_t *p = g_pending->data();
  size_t n = g_pending->size();
  size_t start = 0, at = 0;
  while (at < n) {
    size_t e = record_extent(p + at, n - at);
    if (!e) break;  // cannot happen: records are written whole
    size_t in_frame = g_frame_open ? g_frame_in : 0;
    if ((at > start || g_frame_open) && in_frame + (at - start) + e > kMaxFrameInput) {
      if (!compress_records(p + start, at - start, true)) {  // (ends an open frame)
        g_pending->clear();
        return false;
      }
      start = at;
    }
    at += e;
  }
  bool ok = (at <= start && !(end_frame && g_frame_open)) || compress_records(p + start, at - start, end_frame);
  g_pending->clear();  // (on a failure too: the records went into a frame that is now lost)
  return ok;
}

void collect_thread(ThreadState *s, void *) {
  s->lock.lock();
  outbox_lock();
  s->batch.serialize_to(outbox(), s->tid);
  outbox_unlock();
  s->lock.unlock();
}

TotalsView append_totals_record() {
  TotalsView t = read_totals();
  outbox_lock();
  wire::RecordMark m = wire::begin_record(outbox(), wire::kTotals);
  encode_totals(outbox(), t);
  wire::end_record(outbox(), m);
  outbox_unlock();
  return t;
}

// Must hold g_flush_mutex. Moves every thread's events (and, with_totals, a Totals record) into
// g_pending. The writer thread's periodic flush also drives the snapshot triggers. False if a
// record was cut by an allocation failure: those records are dropped.
bool gather_locked(bool with_totals, bool tick) {
  modules::refresh(false);
  for_each_thread(collect_thread, nullptr);
  if (with_totals) {
    TotalsView t = append_totals_record();
    if (tick) snapshot::writer_tick(t.heap > 0 ? uint64_t(t.heap) : 0, t.rss);
  }
  outbox_lock();
  g_outbox->swap(*g_pending);
  bool oom = g_pending->failed();
  outbox_unlock();
  if (oom) {
    // A record was cut by an allocation failure: the buffer is not trustworthy past that point.
    g_totals.dropped_events.fetch_add(1, std::memory_order_relaxed);
    g_pending->clear();
    return false;
  }
  return true;
}

// Must hold g_flush_mutex. Moves everything pending into the file; end_frame: see write_pending.
bool flush_locked(bool with_totals, bool tick, bool end_frame) {
  if (g_fd < 0) return false;
  // The capture's first frame always ends with its flush (a forked child's first flush is the
  // writer thread's): it keeps the level its parent chose, the next frame adapts.
  return gather_locked(with_totals, tick) && write_pending(end_frame || g_first_frame);
}

// Appends the outbox's records to g_pending's (after them: the order they were made in); the
// outbox's are dropped if a record there was cut by an allocation failure.
void append_outbox_to_pending() {
  outbox_lock();
  if (!g_outbox->failed()) g_pending->bytes(g_outbox->data(), g_outbox->size());
  // (Out of memory for the copy: g_pending keeps its records whole, the outbox's are dropped.)
  if (g_outbox->failed() || g_pending->failed()) g_totals.dropped_events.fetch_add(1, std::memory_order_relaxed);
  g_outbox->clear();
  outbox_unlock();
}

// Whether the writer is the only thread left. After main's pthread_exit (or in a child forked
// from another thread, once that thread returns) the thread-group leader stays a zombie, still
// counted in Threads:, until the process ends. No stdio: nothing here allocates.
bool only_writer_left() {
  char buf[4096];
  if (read_small_file("/proc/self/status", buf, sizeof(buf)) <= 0) return false;
  const char *t = strstr(buf, "\nThreads:");
  if (!t) return false;
  long threads = strtol(t + 9, nullptr, 10);
  if (threads != 2) return threads == 1;
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/stat", g_pid);
  if (read_small_file(path, buf, sizeof(buf)) <= 0) return false;
  const char *paren = strrchr(buf, ')');
  return paren && paren[1] == ' ' && paren[2] == 'Z';
}

// The writer's stack, mapped here rather than by pthread_create: the other way to learn a thread's
// stack (for snapshots, which leave it out), pthread_getattr_np, allocates its CPU set through the
// program's malloc, and that first malloc on the writer's thread made glibc create an arena for
// it: one arena fewer for the program's threads, and memory the program does not have natively.
// Kept across fork: in a child, the parent's writer is gone and its copy serves the child's.
constexpr size_t kWriterStackBytes = size_t(8) << 20, kWriterGuardBytes = 4096;
uint8_t *g_writer_stack = nullptr;  // its guard page, then the stack

void *writer_main(void *) {
  t_local.guard = 1;  // the writer's own allocations are never traced
  // Named, so that top -H, gdb and perf show which thread of the program is the tracer's.
  prctl(PR_SET_NAME, "heapsnap-writer", 0, 0, 0);
  uint64_t lo = reinterpret_cast<uint64_t>(g_writer_stack) + kWriterGuardBytes;
  snapshot::set_writer_stack(lo, lo + kWriterStackBytes);
  while (!g_writer_stop.load(std::memory_order_acquire)) {
    pthread_mutex_lock(&g_wake_mutex);
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = uint64_t(ts.tv_nsec) + uint64_t(config.flush_ms) * 1000000ull;
    ts.tv_sec += time_t(ns / 1000000000ull);
    ts.tv_nsec = long(ns % 1000000000ull);
    if (!g_writer_stop.load(std::memory_order_acquire)) pthread_cond_timedwait(&g_wake, &g_wake_mutex, &ts);
    pthread_mutex_unlock(&g_wake_mutex);
    if (g_writer_stop.load(std::memory_order_acquire)) break;
    pthread_mutex_lock(&g_flush_mutex);
    bool ok = flush_locked(true, true, false);
    pthread_mutex_unlock(&g_flush_mutex);
    if (!ok && g_fd >= 0) {
      stop_tracing("cannot write the capture file");
      break;
    }
    // Every thread of the program has ended (main called pthread_exit, or a child forked from a
    // thread saw that thread return): glibc ends the process with status 0 when its last thread
    // ends, but it counts this one, so it never would. Do what glibc does for the last thread;
    // the shim's destructor finishes the capture.
    if (only_writer_left()) exit(0);
  }
  return nullptr;
}

bool open_output(int pid) {
  char base[4200];
  expand_output_name(config.output, pid, base, sizeof(base));
  // O_EXCL|O_NOFOLLOW: never clobber a file or follow a symlink planted in a shared directory.
  // A name already taken (a forked or exec'd process of the same run) gets a pid/number suffix.
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (attempt == 0) snprintf(g_path, sizeof(g_path), "%s", base);
    else if (attempt == 1) snprintf(g_path, sizeof(g_path), "%s.%d", base, pid);
    else snprintf(g_path, sizeof(g_path), "%s.%d.%d", base, pid, attempt - 1);
    g_fd = open(g_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (g_fd >= 0) {
      struct stat st;
      if (fstat(g_fd, &st) == 0) {
        g_dev = st.st_dev;
        g_ino = st.st_ino;
      }
      g_fd = move_fd_high(g_fd);
      return true;
    }
    if (errno != EEXIST) return false;
  }
  return false;
}

void write_header() {
  uint8_t h[24];
  uint32_t magic = 0x184D2A5E, len = 16;
  memcpy(h, &magic, 4);
  memcpy(h + 4, &len, 4);
  memcpy(h + 8, "HEAPSNAP", 8);
  memcpy(h + 16, &kFormatMajor, 2);
  memcpy(h + 18, &kFormatMinor, 2);
  memset(h + 20, 0, 4);
  write_all(h, sizeof(h));
}

void append_process_info(bool fork_child, int parent_pid) {
  wire::Buf &b = outbox();
  wire::RecordMark m = wire::begin_record(b, wire::kProcess);
  b.u64(1, uint64_t(getpid()));
  b.u64(2, uint64_t(getppid()));
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  exe[n > 0 ? n : 0] = '\0';
  b.str(3, exe);
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char args[8192];
    ssize_t got = read(fd, args, sizeof(args) - 1);
    close(fd);
    for (ssize_t i = 0; i < got;) {
      size_t l = strnlen(args + i, size_t(got - i));
      b.len(4, args + i, l);
      i += ssize_t(l) + 1;
    }
  }
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  b.u64(5, uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec));
  b.u64(6, config.sample_bytes);
  b.u64(7, uint64_t(config.max_stack_depth));
  b.str(8, HEAPSNAP_VERSION);
  b.u64(9, uint64_t(sysconf(_SC_PAGESIZE)));
  b.boolean(10, fork_child);
  b.u64(11, uint64_t(parent_pid));
  utsname u;
  if (uname(&u) == 0) b.str(13, u.nodename);
  wire::end_record(b, m);
}

}  // namespace

const char *writer_capture_path() { return g_path; }

bool writer_append_file(const char *path) {
  if (!capture_fd_ok()) return false;
  // What the outbox holds goes first: a snapshot's SnapshotBegin must come before the records of
  // its child (at exit the snapshot is started and finished before the outbox is written again,
  // and its Begin came after its own records).
  // The frame ends before the file's frames are appended (even with nothing pending); written
  // in one go, a short program's only frame of events is compressed in one pass.
  append_outbox_to_pending();
  if (!write_pending(true)) return false;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const size_t kChunk = 1u << 20;
  auto *buf = static_cast<uint8_t *>(heap::alloc(kChunk));
  bool ok = buf != nullptr;
  while (ok) {
    ssize_t n = read(fd, buf, kChunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = n == 0;
      break;
    }
    ok = write_all(buf, size_t(n));
  }
  heap::release(buf);
  close(fd);
  return ok;
}

void outbox_lock() { pthread_mutex_lock(&g_outbox_mutex); }
void outbox_unlock() { pthread_mutex_unlock(&g_outbox_mutex); }
wire::Buf &outbox() { return *g_outbox; }
void outbox_poke_writer() { pthread_cond_signal(&g_wake); }

void outbox_append_marker(uint32_t tid, const char *text, size_t n) {
  outbox_lock();
  wire::RecordMark m = wire::begin_record(outbox(), wire::kMarker);
  outbox().u64(1, now_rel_ns());
  outbox().u64(2, tid);
  outbox().len(3, text, n);
  wire::end_record(outbox(), m);
  outbox_unlock();
}

bool writer_open_capture(bool fork_child, int parent_pid) {
  if (!g_outbox) {
    g_outbox = new (heap::alloc_zeroed(sizeof(wire::Buf))) wire::Buf();
    g_pending = new (heap::alloc_zeroed(sizeof(wire::Buf))) wire::Buf();
    g_compressed = new (heap::alloc_zeroed(sizeof(wire::Buf))) wire::Buf();
    size_t probe = ZSTD_compressBound(kProbeBytes);
    g_compressed_cap = ZSTD_CStreamOutSize() > probe ? ZSTD_CStreamOutSize() : probe;
    if (!g_compressed->reserve(g_compressed_cap)) return false;
  }
  if (!g_zstd) {
    ZSTD_customMem mem = {zstd_alloc, zstd_free, nullptr};
    g_zstd = ZSTD_createCCtx_advanced(mem);
    if (!g_zstd) return false;
    ZSTD_CCtx_setParameter(g_zstd, ZSTD_c_compressionLevel, config.zstd_level);
    ZSTD_CCtx_setParameter(g_zstd, ZSTD_c_contentSizeFlag, 1);
    ZSTD_CCtx_setParameter(g_zstd, ZSTD_c_checksumFlag, 1);
  }
  if (!open_output(getpid())) return false;
  g_first_frame = true;
  write_header();
  outbox_lock();
  g_outbox->clear();
  append_process_info(fork_child, parent_pid);
  outbox_unlock();
  modules::refresh(true);
  return true;
}

bool writer_start_thread() {
  // A child forked by the writer thread itself (the program's atexit handlers run on it when only
  // it is left, see only_writer_left) runs on that stack: its writer needs another one.
  uint8_t here;
  if (g_writer_stack && &here >= g_writer_stack && &here < g_writer_stack + kWriterGuardBytes + kWriterStackBytes)
    g_writer_stack = nullptr;
  if (!g_writer_stack) {
    void *m = mmap(nullptr, kWriterGuardBytes + kWriterStackBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED) return false;
    if (mprotect(m, kWriterGuardBytes, PROT_NONE) != 0) {
      munmap(m, kWriterGuardBytes + kWriterStackBytes);
      return false;
    }
    g_writer_stack = static_cast<uint8_t *>(m);
  }
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return false;
  if (pthread_attr_setstack(&attr, g_writer_stack + kWriterGuardBytes, kWriterStackBytes) != 0) {
    pthread_attr_destroy(&attr);
    return false;
  }
  sigset_t all, old;
  sigfillset(&all);
  // The writer must never run the program's signal handlers.
  pthread_sigmask(SIG_SETMASK, &all, &old);
  g_writer_stop.store(false);
  int rc = pthread_create(&g_writer, &attr, writer_main, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
  g_writer_running = rc == 0;
  return g_writer_running;
}

void writer_stop_thread() {
  if (!g_writer_running) return;
  g_writer_stop.store(true, std::memory_order_release);
  pthread_mutex_lock(&g_wake_mutex);
  pthread_cond_signal(&g_wake);
  pthread_mutex_unlock(&g_wake_mutex);
  if (!pthread_equal(pthread_self(), g_writer)) pthread_join(g_writer, nullptr);
  g_writer_running = false;
}

void writer_collect_batches() { for_each_thread(collect_thread, nullptr); }

void writer_flush_now() {
  pthread_mutex_lock(&g_flush_mutex);
  flush_locked(true, false, true);
  pthread_mutex_unlock(&g_flush_mutex);
}

void writer_finish(const char *reason) {
  writer_stop_thread();
  pthread_mutex_lock(&g_flush_mutex);
  if (g_fd >= 0) {
    // The events and the end record in one go: a short program's only frame of events is then
    // compressed in one pass (with tables sized to it, and its size declared).
    gather_locked(false, false);
    TotalsView t = read_totals();
    outbox_lock();
    wire::RecordMark m = wire::begin_record(outbox(), wire::kEnd);
    size_t at = outbox().open(1);
    encode_totals(outbox(), t);
    outbox().close(at);
    outbox().str(2, reason);
    wire::end_record(outbox(), m);
    outbox_unlock();
    append_outbox_to_pending();
    write_pending(true);
    close(g_fd);
    g_fd = -1;
  }
  pthread_mutex_unlock(&g_flush_mutex);
}

void writer_note_failure(const char *what) {
  if (config.debug) {
    char msg[512];
    int n = snprintf(msg, sizeof(msg), "heapsnap: tracing stopped: %s (%.300s)\n", what, g_path);
    if (n > int(sizeof(msg)) - 1) n = int(sizeof(msg)) - 1;  // snprintf returns what it would have written
    if (n > 0) (void)!write(2, msg, size_t(n));
  }
}

void writer_fork_prepare() {
  pthread_mutex_lock(&g_flush_mutex);
}

void writer_fork_parent() { pthread_mutex_unlock(&g_flush_mutex); }

void writer_after_fork_child() {
  pthread_mutex_init(&g_flush_mutex, nullptr);
  pthread_mutex_init(&g_outbox_mutex, nullptr);
  pthread_mutex_init(&g_wake_mutex, nullptr);
  pthread_cond_init(&g_wake, nullptr);
  g_writer_running = false;
  if (is_capture(g_fd)) close(g_fd);  // the parent's file: the parent keeps writing it
  g_fd = -1;
  if (g_outbox) g_outbox->clear();  // the parent writes what it had pending
  if (g_pending) g_pending->clear();
  // The parent's open frame goes on in the parent's file; the child starts its own.
  if (g_zstd) ZSTD_CCtx_reset(g_zstd, ZSTD_reset_session_only);
  g_frame_open = false;
}

}  // namespace hs
