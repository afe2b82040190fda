#include "output/frame_writer.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_createCCtx_advanced: the tracer allocates from its own heap
#include <zstd.h>

#include <cstdio>
#include <cstring>
#include <new>

#include "../../../proto/flush_hash.h"
#include "core/config.h"
#include "core/high_fd.h"
#include "core/private_heap.h"

namespace hs::frames {
namespace {

constexpr uint16_t kFormatMajor = 3;  // 3: a frame spans flushes; 2: alloc_fn and moved in the event kind
constexpr uint16_t kFormatMinor = 5;  // 3.1: FlushEnd records; 3.2: SnapshotTypes records; 3.3: SnapshotMemory; 3.4: Totals.rss_parts; 3.5: vector triples
// Records per frame, before compression. A frame stays open across the writer's flushes (each
// one ends with ZSTD_e_flush: everything flushed is in the file as whole blocks) until it holds
// this much, so that it compresses against the records of earlier flushes. On sqlite3's 58 MB
// of events (--sample-bytes 1) at level 11, frames of 2 MB gave 349 KB, 4 MB 340 KB, 8 MB
// 330 KB, one frame for everything 319 KB (/tmp simulation over the capture's flushes, see
// issue 8's note). A damaged frame is lost whole: bigger frames would lose more.
constexpr size_t kMaxFrameInput = 8u << 20;

wire::Buf *g_compressed = nullptr;  // zstd's output on its way to the file
size_t g_compressed_cap = 0;
ZSTD_CCtx *g_zstd = nullptr;
int g_fd = -1;
dev_t g_dev = 0;  // identity of the capture file, to recognise g_fd
ino_t g_ino = 0;
char g_path[4300];
// Bytes written to the file, and how many of them up to the end of the last complete write (a
// whole flush, frame or appended file): where a salvage goes on if the writer died mid-write.
uint64_t g_written = 0, g_good = 0;

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
    g_written += uint64_t(w);
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
  int fd = ::open(g_path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  if (!is_capture(fd)) {
    ::close(fd);
    return false;
  }
  g_fd = move_fd_high(fd);
  return true;
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
    g_fd = ::open(g_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (g_fd >= 0) {
      struct stat st;
      if (fstat(g_fd, &st) == 0) {
        g_dev = st.st_dev;
        g_ino = st.st_ino;
      }
      g_fd = move_fd_high(g_fd);
      // Held until every descriptor of this open file is closed (see frame_writer.h).
      while (flock(g_fd, LOCK_EX) != 0 && errno == EINTR) {}
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

}  // namespace

bool init() {
  if (!g_compressed) {
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
  return true;
}

bool open(int pid) {
  if (!open_output(pid)) return false;
  g_first_frame = true;
  g_written = g_good = 0;
  write_header();
  g_good = g_written;
  return true;
}

const char *path() { return g_path; }
bool fd_ok() { return capture_fd_ok(); }
int fd() { return g_fd; }
bool first_frame_pending() { return g_first_frame; }

bool write_records(wire::Buf &pending, bool end_frame) {
  if (!capture_fd_ok()) {
    pending.clear();
    return false;
  }
  const uint8_t *p = pending.data();
  size_t n = pending.size();
  size_t start = 0, at = 0;
  while (at < n) {
    size_t e = record_extent(p + at, n - at);
    if (!e) break;  // cannot happen: records are written whole
    size_t in_frame = g_frame_open ? g_frame_in : 0;
    if ((at > start || g_frame_open) && in_frame + (at - start) + e > kMaxFrameInput) {
      if (!compress_records(p + start, at - start, true)) {  // (ends an open frame)
        pending.clear();
        return false;
      }
      start = at;
    }
    at += e;
  }
  bool ok = (at <= start && !(end_frame && g_frame_open)) || compress_records(p + start, at - start, end_frame);
  pending.clear();  // (on a failure too: the records went into a frame that is now lost)
  if (ok) g_good = g_written;
  return ok;
}

bool append_raw(const void *data, size_t n) {
  if (!capture_fd_ok()) return false;
  bool ok = write_all(data, n);
  if (ok) g_good = g_written;
  return ok;
}

void close() {
  if (g_fd >= 0) ::close(g_fd);
  g_fd = -1;
}

void after_fork_child() {
  if (is_capture(g_fd)) ::close(g_fd);  // the parent's file: the parent keeps writing it
  g_fd = -1;
  // The parent's open frame goes on in the parent's file; the child starts its own.
  if (g_zstd) ZSTD_CCtx_reset(g_zstd, ZSTD_reset_session_only);
  g_frame_open = false;
}

bool salvage_begin(int fd, bool mid_write) {
  if (!is_capture(fd)) return false;
  g_fd = fd;
  if (mid_write) abandon_partial_write();
  else lseek(g_fd, off_t(g_written), SEEK_SET);
  return true;
}

void abandon_partial_write() {
  if (g_fd < 0) return;
  if (g_written != g_good) {
    (void)!ftruncate(g_fd, off_t(g_good));
    g_written = g_good;
  }
  lseek(g_fd, off_t(g_good), SEEK_SET);
  // The frame the writer was adding to has what the file keeps of it; what comes next is a frame
  // of its own (the reader keeps a frame's complete flushes when another frame follows it).
  if (g_zstd) ZSTD_CCtx_reset(g_zstd, ZSTD_reset_session_only);
  g_frame_open = false;
}

}  // namespace hs::frames
