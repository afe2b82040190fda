#include "capture/capture_reader.h"
#include "capture/decoded_batch.h"
#include "capture/varint.h"
#include "../../proto/flush_hash.h"
#include "../../proto/frame_hint.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_d_stableOutBuffer
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace heapsnap::capture {
namespace {

constexpr uint32_t kSkippableMagic = 0x184D2A5E;
constexpr uint32_t kZstdMagic = 0xFD2FB528;
constexpr size_t kHeaderSize = 24;

uint32_t le32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
uint16_t le16(const uint8_t *p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}

std::string hex_offset(uint64_t off) {
  char b[32];
  snprintf(b, sizeof(b), "0x%llx", static_cast<unsigned long long>(off));
  return b;
}

// CPUs this process may run on.
int available_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return CPU_COUNT(&set);
}

// The length prefix of the record at p (before end): its bytes, 0 if it is unreadable or the
// record would run past end. parse_frame and decode_ahead walk a frame's records with it.
size_t record_header(const uint8_t *p, const uint8_t *end, uint64_t *len) {
  size_t used = read_varint(p, end, len);
  return used && *len <= uint64_t(end - p - used) ? used : 0;
}

// A record holding only its events field (the field's key, the batch's length, the batch): *b
// and *bn locate the batch.
bool events_batch(const uint8_t *p, uint64_t len, const uint8_t **b, size_t *bn) {
  constexpr uint64_t kEventsKey = uint64_t(wire::Record::kEventsFieldNumber) << 3 | 2;
  uint64_t key = 0, blen = 0;
  size_t u1 = read_varint(p, p + len, &key);
  size_t u2 = u1 && key == kEventsKey ? read_varint(p + u1, p + len, &blen) : 0;
  if (!u2 || blen != len - u1 - u2) return false;
  *b = p + u1 + u2;
  *bn = size_t(blen);
  return true;
}

// A record holding only one length-delimited field: *field, and *m / *mn locate the message.
bool single_message(const uint8_t *p, uint64_t len, uint32_t *field, const uint8_t **m, size_t *mn) {
  uint64_t key = 0, mlen = 0;
  size_t u1 = read_varint(p, p + len, &key);
  size_t u2 = u1 && (key & 7) == 2 ? read_varint(p + u1, p + len, &mlen) : 0;
  if (!u2 || mlen != len - u1 - u2 || (key >> 3) > UINT32_MAX) return false;
  *field = uint32_t(key >> 3);
  *m = p + u1 + u2;
  *mn = size_t(mlen);
  return true;
}

// Frame buffers. Release builds take the writer's frame size at once: growing step by step (1.5,
// 2.3, 3.5, 5.3 MB for a python capture) faulted every new buffer in afresh, and freed buffers
// moved glibc's mmap threshold so that the next ones came from the heap top, faulted in again: a
// quarter of a replay's page faults. Untouched pages cost nothing. AddressSanitizer builds (the
// unit suite and the fuzz targets) allocate exactly what a growing frame needs, so that a decoder
// reading past the padding (see set_raw_events_handler) is caught.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kExactFrameBuffers = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kExactFrameBuffers = true;
#else
constexpr bool kExactFrameBuffers = false;
#endif
#else
constexpr bool kExactFrameBuffers = false;
#endif

// The block walk of a frame that does not end inside the file (see scan()): extent covers its
// header and its complete blocks; last: they include the frame's last block (what is cut is its
// checksum); cut: the walk stopped only because the file ends (inside the header, a block
// header, a block or the checksum). Else it stopped at a block header no writer makes (a
// reserved type, more than zstd's 128 KiB block): damage, and the blocks before it are suspect.
struct BlockWalk {
  size_t extent = 0;
  bool last = false, cut = false;
};

// A zstd block header (3 bytes, little-endian, RFC 8878): the frame's last block, its type
// (0 raw, 1 RLE, 2 compressed, 3 reserved), its size field, and the bytes the block takes in the
// file, header included (an RLE block holds one byte, repeated).
struct BlockHeader {
  bool last;
  uint32_t type, size;
  size_t span() const { return 3 + (type == 1 ? 1 : size); }
};

BlockHeader block_header(const uint8_t *h) {
  uint32_t b = uint32_t(h[0]) | uint32_t(h[1]) << 8 | uint32_t(h[2]) << 16;
  return {bool(b & 1), (b >> 1) & 3, b >> 3};
}

BlockWalk walk_blocks(const uint8_t *p, size_t avail) {
  BlockWalk w;
  size_t at = ZSTD_frameHeaderSize(p, avail);
  if (ZSTD_isError(at) || at > avail) {
    w.cut = at > avail || ZSTD_getErrorCode(at) == ZSTD_error_srcSize_wrong;
    return w;
  }
  w.extent = at;
  while (!w.last) {
    if (avail - at < 3) {
      w.cut = true;
      return w;
    }
    BlockHeader b = block_header(p + at);
    if (b.type == 3 || b.size > ZSTD_BLOCKSIZE_MAX) return w;
    if (avail - at < b.span()) {
      w.cut = true;
      return w;
    }
    at += b.span();
    w.extent = at;
    w.last = b.last;
  }
  w.cut = true;  // (the last block is whole: the checksum is cut)
  return w;
}

// The offset (from p, 4 to within) of the first frame start after the one at p: a frame that is
// whole, or cut by the end of the file (avail bytes from p); 0 if there is none. (The writer's
// open frame after a frame cut short, say by a snapshot child that died writing it.)
size_t next_frame_start(const uint8_t *p, size_t within, size_t avail) {
  for (size_t i = 4; i < within && i + 4 <= avail; ++i)
    if (le32(p + i) == kZstdMagic &&
        (!ZSTD_isError(ZSTD_findFrameCompressedSize(p + i, avail - i)) || walk_blocks(p + i, avail - i).cut))
      return i;
  return 0;
}

// A FlushEnd record (heapsnap.proto; the shim writes it by hand) at p, len bytes: *hash gets its
// hash. Record.flush_end is field 18 (key 0x92 0x01); FlushEnd.hash is field 1, fixed64 (key 0x09),
// absent when 0 (proto3).
bool flush_end(const uint8_t *p, uint64_t len, uint64_t *hash) {
  if (len < 3 || p[0] != 0x92 || p[1] != 0x01 || p[2] != len - 3) return false;
  if (len == 3) {
    *hash = 0;
    return true;
  }
  if (len != 12 || p[3] != 0x09) return false;
  memcpy(hash, p + 4, 8);
  return true;
}

// The length of what a cut frame's data (n bytes, decompressed from its complete blocks) holds
// that can be trusted. Nothing checks those blocks (the frame's checksum is what is cut): since
// format 3.1 each flush ends with a FlushEnd record holding the hash of the flush's records, and
// what is kept ends at the last FlushEnd that matches. A frame without one (format 3.0, or a cut
// inside its first flush) keeps its whole records up to the first that does not parse.
size_t trusted_records(const uint8_t *data, size_t n) {
  const uint8_t *p = data, *end = data + n, *flush_start = data;
  const uint8_t *verified = nullptr;
  uint64_t len = 0, hash = 0;
  wire::Record rec;
  while (p < end) {
    size_t used = record_header(p, end, &len);
    if (!used) break;
    if (flush_end(p + used, len, &hash)) {
      if (heapsnap_format::flush_hash(flush_start, size_t(p - flush_start)) != hash) return size_t((verified ? verified : data) - data);
      verified = flush_start = p + used + len;
    } else if (!verified && !rec.ParseFromArray(p + used, int(len))) {
      break;
    }
    p += used + len;
  }
  return size_t((verified ? verified : p) - data);
}

}  // namespace

CaptureReader::~CaptureReader() {
  if (map_) munmap(const_cast<uint8_t *>(map_), size_);
  if (dctx_) ZSTD_freeDCtx(static_cast<ZSTD_DCtx *>(dctx_));
}

void CaptureReader::problem(uint64_t offset, std::string what) {
  problems_.push_back({offset, std::move(what)});
}

std::unique_ptr<CaptureReader> CaptureReader::open(const std::string &path, std::string *error) {
  std::unique_ptr<CaptureReader> r(new CaptureReader());
  r->path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = path + ": " + strerror(errno);
    return nullptr;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *error = path + ": not a regular file";
    close(fd);
    return nullptr;
  }
  r->size_ = uint64_t(st.st_size);
  if (r->size_ < kHeaderSize) {
    close(fd);
    *error = path + ": offset " + hex_offset(r->size_) + ": the file ends there, " + std::to_string(r->size_) +
             " bytes is too short for a heapsnap capture (header is 24 bytes)";
    return nullptr;
  }
  void *m = mmap(nullptr, r->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED) {
    *error = path + ": mmap: " + strerror(errno);
    return nullptr;
  }
  madvise(m, r->size_, MADV_SEQUENTIAL);
  r->map_ = static_cast<const uint8_t *>(m);
  const uint8_t *h = r->map_;
  if (le32(h) != kSkippableMagic || le32(h + 4) != 16 || memcmp(h + 8, "HEAPSNAP", 8) != 0) {
    *error = path + ": offset 0x0: not a heapsnap capture (bad magic)";
    return nullptr;
  }
  r->major_ = le16(h + 16);
  r->minor_ = le16(h + 18);
  if (r->major_ > kReaderMajor) {
    *error = path + ": offset 0x10: capture format " + std::to_string(r->major_) + "." +
             std::to_string(r->minor_) + " is newer than this heapsnap reads (" +
             std::to_string(kReaderMajor) + ".x): upgrade heapsnap";
    return nullptr;
  }
  uint32_t flags = le32(h + 20);
  if (flags && r->minor_ <= kReaderMinor)  // (a newer minor may define flags this reader ignores)
    r->problem(20, "header flags " + hex_offset(flags) + " are reserved (0) in format " +
                       std::to_string(r->major_) + "." + std::to_string(r->minor_) + ": damaged header? ignored");
  r->body_offset_ = kHeaderSize;
  r->dctx_ = ZSTD_createDCtx();
  return r;
}

// The event batches of the frames the read-ahead thread walked, in file order, for the parser
// (see set_decoded_events_handler): the slots [tail, head) are queued or decoded; the thread
// queues at head while the parser applies the slot at tail. Both decode: the thread from the
// front, and the parser, rather than wait for the slot it needs, that slot if no one has started
// it, else the last one queued (work taken from the far end, as in a work-stealing deque).
// Decoding took the thread longer than applying took the parser (37% and 22% of a python
// replay's samples) and the parser spent 13% of them waiting. A batch takes 10-20 us either
// side, so a side that must wait spins a little before it sleeps: sleeping and waking at every
// batch (a futex call each) cost more than the decoding it moved (2,100 context switches in a
// replay of 12 M events).
struct DecodeRing {
  static constexpr unsigned kSlots = 16;
  // A slot's state: queued by the thread, then decoded by one side (kDecoding, kDone).
  enum : uint8_t { kQueued, kDecoding, kDone };
  struct Slot {
    DecodedBatch batch;
    uint64_t frame_offset = 0, at = 0;  // the record's place (the parser checks it)
    const uint8_t *bytes = nullptr;     // the batch, in the frame's buffer (padding after it)
    size_t n = 0;
    bool ok = false;                    // batch holds it (else the parser takes the record)
    std::atomic<uint8_t> state{kDone};
  };
  Slot slot[kSlots];
  SiteCursors cursors, parser_cursors;  // each side's (a batch's cursors start empty)
  alignas(64) std::atomic<uint64_t> head{0};  // written by the thread
  std::atomic<bool> done{false};              // the thread fills no more slots
  // 1 + the offset of the last frame the thread walked through: a record of that frame or an
  // earlier one that has no slot by then will not get one.
  std::atomic<uint64_t> walked{0};
  uint64_t front = 0;                         // the thread's: the next slot it tries to decode
  alignas(64) std::atomic<uint64_t> tail{0};  // written by the parser
  // Each side's: it sleeps on cv (the other side wakes it).
  std::atomic<bool> parser_sleeps{false}, decoder_sleeps{false};
  std::atomic<uint64_t> by_parser{0};  // batches the parser decoded (tests, benchmarks)
  unsigned delay_us = 0;               // the thread sleeps this long per batch (tests)
  bool leave_odd = false;              // the thread leaves every other slot to the parser (tests)
  std::mutex *mu;
  std::condition_variable *cv;
  const bool *quit;  // under *mu

  // Waits until ready(); false if it slept and the parser had asked the thread to quit (the
  // thread notices at its next sleep: at most a ring's worth of batches later). ready() reads the
  // atomics only, sequentially consistent: a side stores `sleeping` and then reads the other's
  // counter, the other stores its counter and then reads `sleeping`; one of them sees the other's.
  template <typename Ready>
  bool wait(std::atomic<bool> &sleeping, Ready ready) {
    for (int i = 0; i < 4000; ++i) {
      if (ready()) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    std::unique_lock<std::mutex> lock(*mu);
    sleeping.store(true);
    cv->wait(lock, [&] { return ready() || *quit; });
    sleeping.store(false);
    return !*quit;
  }
  // After a change the other side may wait for.
  void wake(std::atomic<bool> &sleeping) {
    if (!sleeping.load()) return;
    { std::lock_guard<std::mutex> lock(*mu); }
    cv->notify_all();
  }

  // Decodes slot s if no one has started it; false if someone had.
  bool claim_and_decode(Slot &s, SiteCursors &c, std::atomic<bool> &other_sleeps) {
    uint8_t queued = kQueued;
    if (!s.state.compare_exchange_strong(queued, kDecoding)) return false;
    if (delay_us) std::this_thread::sleep_for(std::chrono::microseconds(&c == &cursors ? delay_us : 0));
    s.ok = s.batch.decode(s.bytes, s.n, c);
    s.state.store(kDone);
    wake(other_sleeps);
    return true;
  }
  // The thread: decodes the first queued slot from the front; false if none is left.
  bool decode_front() {
    front = std::max(front, tail.load());  // slots before the tail are settled (and reused)
    for (uint64_t h = head.load(std::memory_order_relaxed); front < h;) {
      const uint64_t i = front++;
      if (leave_odd && (i & 1)) continue;  // the parser's, whatever the timing (tests)
      if (claim_and_decode(slot[i % kSlots], cursors, parser_sleeps)) return true;
    }
    return false;
  }
  // The parser, waiting for slot t: decodes the last queued slot after it; false if none.
  bool decode_back(uint64_t t) {
    for (uint64_t j = head.load(); j-- > t + 1;)
      if (claim_and_decode(slot[j % kSlots], parser_cursors, decoder_sleeps)) {
        by_parser.fetch_add(1, std::memory_order_relaxed);
        return true;
      }
    return false;
  }
};

// Whether a frame whose hint names these fields may hold a record the filter keeps (always, with
// no filter, or with a field the hint cannot name: bit 63).
bool CaptureReader::wants_any(uint64_t fields) const {
  if (!filter_ || (fields >> 63)) return true;
  for (uint32_t f = 0; f < 63; ++f)
    if ((fields >> f & 1) && filter_(f)) return true;
  return false;
}

// Whether the record at p (len bytes) is skipped unparsed (see set_record_filter).
bool CaptureReader::filtered(const uint8_t *p, uint64_t len) const {
  uint64_t tag = 0;
  return filter_ && len && read_varint(p, p + len, &tag) && !filter_(uint32_t(tag >> 3));
}

// The read-ahead thread, after handing frame f over: queues its event batches in the ring, in
// order, decoding from the front while the ring is full (see DecodeRing), and calling
// ring_full() when it finds the ring full with nothing left to decode. It walks the records as
// parse_frame does (same lengths, same filter, same batches), so each slot is the one
// parse_frame will ask for at that place. Returns with every slot of f claimed (decoded here,
// or being decoded or decoded by the parser), unless the parser asked it to quit.
void CaptureReader::decode_ahead(const Frame &f, DecodeRing &ring, const std::function<void()> &ring_full) {
  const uint8_t *data = f.buf.get(), *p = data, *end = data + f.got;
  while (p < end) {
    uint64_t len = 0;
    size_t used = record_header(p, end, &len);
    uint64_t at = uint64_t(p - data);
    if (!used) break;  // parse_frame reports it
    p += used;
    const uint8_t *b;
    size_t bn;
    if (len && !filtered(p, len) && events_batch(p, len, &b, &bn)) {
      uint64_t h = ring.head.load(std::memory_order_relaxed);
      while (h - ring.tail.load() >= DecodeRing::kSlots) {
        if (ring.decode_front()) continue;
        ring_full();
        if (!ring.wait(ring.decoder_sleeps, [&] { return h - ring.tail.load() < DecodeRing::kSlots; })) return;
      }
      DecodeRing::Slot &s = ring.slot[h % DecodeRing::kSlots];
      s.frame_offset = f.off;
      s.at = at;
      s.bytes = b;
      s.n = bn;
      s.ok = false;
      s.state.store(DecodeRing::kQueued, std::memory_order_relaxed);  // published by head's store
      ring.head.store(h + 1);
      ring.wake(ring.parser_sleeps);
    }
    p += len;
  }
  while (ring.decode_front()) {
  }
}

// The parser at the event batch at (frame_offset, at): hands the read-ahead thread's decoding of
// it to the decoded events handler. False: the thread could not take it (the caller does).
// The two walks agree (see decode_ahead); were they ever to differ, slots for records the
// parser did not ask for are dropped, and a record without a slot is parsed here: nothing
// waits for a slot that will not come.
bool CaptureReader::take_decoded(uint64_t frame_offset, uint64_t at) {
  DecodeRing &ring = *ring_;
  for (;;) {
    uint64_t t = ring.tail.load(std::memory_order_relaxed);
    ring.wait(ring.parser_sleeps,
              [&] { return ring.head.load() != t || ring.done.load() || ring.walked.load() > frame_offset; });
    if (ring.head.load() == t) return false;  // no slot will come for this record
    DecodeRing::Slot &s = ring.slot[t % DecodeRing::kSlots];
    bool behind = s.frame_offset < frame_offset || (s.frame_offset == frame_offset && s.at < at);
    if (!behind && (s.frame_offset != frame_offset || s.at != at)) return false;  // ahead: not this one's
    // The slot must be settled before the tail passes it (the thread then reuses it): decoded
    // here if no one has started it, else waited for, decoding later slots meanwhile. A slot
    // behind (for a record this parser passed: the two walks disagreed) is settled undecoded if
    // no one has started it: its bytes may lie in a frame buffer already handed back.
    uint8_t queued = DecodeRing::kQueued;
    if (behind && s.state.compare_exchange_strong(queued, DecodeRing::kDone)) {
      s.ok = false;
    } else if (!behind && ring.claim_and_decode(s, ring.parser_cursors, ring.decoder_sleeps)) {
      ring.by_parser.fetch_add(1, std::memory_order_relaxed);
    } else {
      while (s.state.load() != DecodeRing::kDone) {
        if (ring.decode_back(t)) continue;
        uint64_t h = ring.head.load();
        ring.wait(ring.parser_sleeps, [&] { return s.state.load() == DecodeRing::kDone || ring.head.load() != h; });
      }
    }
    bool ok = !behind && s.ok;
    if (ok) decoded_events_(s.batch, RecordPos{frame_offset, at});
    ring.tail.store(t + 1);
    ring.wake(ring.decoder_sleeps);
    if (!behind) return ok;
  }
}

bool CaptureReader::parse_frame(const uint8_t *data, size_t n, uint64_t frame_offset,
                                const RecordFn &fn, bool *stop) {
  const uint8_t *p = data, *end = data + n;
  wire::Record rec;
  while (p < end) {
    uint64_t len = 0;
    size_t used = record_header(p, end, &len);
    uint64_t at = uint64_t(p - data);
    if (!used) {
      problem(frame_offset, "frame at " + hex_offset(frame_offset) + ": record at byte " +
                                std::to_string(at) + " of the frame has a bad length; rest of frame skipped");
      return false;
    }
    p += used;
    uint64_t hash;
    if (flush_end(p, len, &hash) || filtered(p, len)) {  // (FlushEnd: the reader's, see scan())
      p += len;
      continue;
    }
    const uint8_t *b;
    size_t bn;
    if ((raw_events_ || ring_) && len && events_batch(p, len, &b, &bn) &&
        ((ring_ && take_decoded(frame_offset, at)) || (raw_events_ && raw_events_(b, bn, RecordPos{frame_offset, at})))) {
      ++records_;
      p += len;
      continue;
    }
    uint32_t field;
    if (raw_records_ && len && single_message(p, len, &field, &b, &bn)) {
      RawRecord r = raw_records_(field, b, bn, RecordPos{frame_offset, at});
      if (r != RawRecord::parse) {
        ++records_;
        p += len;
        if (r == RawRecord::stop) {
          *stop = true;
          return true;
        }
        continue;
      }
    }
    if (!rec.ParseFromArray(p, int(len))) {
      problem(frame_offset, "frame at " + hex_offset(frame_offset) + ": record at byte " +
                                std::to_string(at) + " does not parse; skipped");
    } else {
      ++records_;
      if (!fn(rec, RecordPos{frame_offset, at})) {
        *stop = true;
        return true;
      }
    }
    p += len;
  }
  return true;
}

// The file's pages before `upto` have been read: out of this process's resident set with them
// (they stay in the page cache; a later look at them, as the repeated-frame check may take, reads
// them back). A capture is read once, front to back: without this a 19 MB capture added 19 MB to
// the analyzer's peak memory.
void CaptureReader::release_read(uint64_t upto) {
  uint64_t end = upto & ~uint64_t(4095);
  if (end <= released_) return;
  madvise(const_cast<uint8_t *>(map_) + released_, size_t(end - released_), MADV_DONTNEED);
  released_ = end;
}

// Scans from `off` to the next frame that decompresses, into f: what it skipped on the way
// (with the problems, in file order), the frame's bytes, where the scan goes on. f.last: the file
// ends (nothing more to scan). Touches only f, dctx_ and the mapped file: the read-ahead thread
// runs it.
void CaptureReader::scan(uint64_t off, Frame &f, SeenFrames &seen) {
  auto *dctx = static_cast<ZSTD_DCtx *>(dctx_);
  f.problems.clear();
  f.skipped = 0;
  f.stepped_over = 0;
  f.truncated = false;
  f.last = false;
  f.has_data = false;
  auto problem = [&f](uint64_t at, std::string what) { f.problems.push_back({at, std::move(what)}); };
  heapsnap_format::FrameHint hint{};
  uint64_t hint_at = 0, hint_for = UINT64_MAX;  // the last hint's offset, and that of the frame it describes
  auto stray_hint = [&] {
    problem(hint_at, "frame hint at " + hex_offset(hint_at) + " does not describe the frame after it; ignored");
  };
  while (off < size_) {
    const uint8_t *p = map_ + off;
    size_t avail = size_t(size_ - off);
    size_t fsize = ZSTD_findFrameCompressedSize(p, avail);
    if (ZSTD_isError(fsize)) {
      // Either the file ends inside this frame, or the frame is damaged. A frame whose header
      // parses and that runs past the end of the file is a cut; anything else is damage.
      bool starts_like_frame = avail >= 4 && le32(p) == kZstdMagic;
      if (starts_like_frame && ZSTD_getFrameContentSize(p, avail) != ZSTD_CONTENTSIZE_ERROR) {
        // Look for another frame start after this one (whole or cut by the end of the file): if
        // none, this is the cut-off tail.
        size_t at = next_frame_start(p, avail, avail);
        const uint8_t *next = at ? p + at : nullptr;
        if (!next) {
          // The file's last frame: the records in its complete blocks are read, everything the
          // writer had flushed before the cut (it flushes whole records, and a frame spans
          // flushes). A file that ends where a flush ended (the process was killed) lost
          // nothing: the capture is incomplete, which its missing end record says, but not
          // damaged. A block header no writer makes, or a block that does not decompress, ends
          // what is read: the blocks before it are kept.
          BlockWalk w = walk_blocks(p, avail);
          size_t decoded = 0;
          bool complete = false;
          const char *why = w.extent ? inflate(p, w.extent, f, &decoded, &complete, true) : nullptr;
          size_t got = trusted_records(f.buf.get(), decoded);
          std::string read = "read the " + std::to_string(got) + " bytes of whole records before it";
          if (!w.cut)
            problem(off, "damaged frame at " + hex_offset(off) + ", the file's last: its block header at " +
                             hex_offset(off + w.extent) + " cannot be; " + read + ", lost the rest");
          else if (why)
            problem(off, "file ends inside the frame at " + hex_offset(off) + ", and a block of it does not decompress (" +
                             why + "); " + read + ", lost the rest");
          else if (w.extent < avail || got < decoded || w.last)
            problem(off, "file ends inside the frame at " + hex_offset(off) + ": the capture was cut off; read the " +
                             std::to_string(got) + " bytes of whole records in its complete blocks, lost what followed (" +
                             std::to_string(avail - w.extent) + " bytes of the file, " + std::to_string(decoded - got) +
                             " decompressed bytes after the last whole flush)");
          else if (!got)
            problem(off, "file ends inside the frame at " + hex_offset(off) + " (" + std::to_string(avail) +
                             " bytes lost): the capture was cut off");
          if (!f.problems.empty() && f.problems.back().offset == off) f.truncated = true;
          if (!got) {
            f.skipped += avail;
            break;
          }
          f.skipped += avail - w.extent;
          finish_frame(f, off, got, size_);
          break;
        }
        // A frame cut short with another after it: a writer that stopped inside a write (the
        // shim's tail guard, salvaging a process that ended mid-flush, goes on with a frame of its
        // own where the last complete write ended). Its complete flushes are kept, as for the
        // file's last frame.
        size_t span = size_t(next - p);
        BlockWalk w = walk_blocks(p, span);
        size_t decoded = 0;
        bool complete = false;
        const char *why = w.cut && w.extent ? inflate(p, w.extent, f, &decoded, &complete, true) : nullptr;
        size_t got = w.cut && w.extent && !why ? trusted_records(f.buf.get(), decoded) : 0;
        if (got) {
          if (w.extent < span || got < decoded)
            problem(off, "frame at " + hex_offset(off) + " was cut short before the next one: read the " +
                             std::to_string(got) + " bytes of whole records in its complete blocks, skipped " +
                             std::to_string(span - w.extent) + " bytes");
          f.skipped += span - w.extent;
          finish_frame(f, off, got, off + span);
          return;
        }
        f.skipped += span;
        problem(off, "damaged frame at " + hex_offset(off) + ": skipped " + std::to_string(span) + " bytes");
        off += span;
        continue;
      }
      // Not a frame start: resynchronise on the next zstd magic.
      const uint8_t *next = nullptr;
      for (size_t i = 1; i + 4 <= avail; ++i)
        if (le32(p + i) == kZstdMagic) { next = p + i; break; }
      size_t skip = next ? size_t(next - p) : avail;
      f.skipped += skip;
      problem(off, "unreadable bytes at " + hex_offset(off) + ": skipped " + std::to_string(skip));
      if (!next) {
        f.truncated = true;
        break;
      }
      off += skip;
      continue;
    }
    if (le32(p) != kZstdMagic) {
      // A skippable frame (ours or anyone's): nothing to read in it, but a frame hint about the next.
      // A damaged hint is reported (and ignored): it loses nothing, but it is damage in the file.
      // So is one followed by another (a hint repeated, frames swapped): it describes no frame.
      if (hint_for != UINT64_MAX && le32(p) == heapsnap_format::kFrameHintMagic) {
        stray_hint();
        hint_for = UINT64_MAX;
      }
      switch (heapsnap_format::get_frame_hint(p, fsize, &hint)) {
        case heapsnap_format::HintRead::kHint: hint_at = off; hint_for = off + fsize; break;
        case heapsnap_format::HintRead::kDamaged:
          problem(off, "frame hint at " + hex_offset(off) + " is damaged (its length or its check); ignored");
          hint_for = UINT64_MAX;
          break;
        case heapsnap_format::HintRead::kNone: break;
      }
      off += fsize;
      continue;
    }
    if (hint_for != UINT64_MAX) {
      // The frame a hint describes comes right after it, with the size it names.
      const bool described = hint_for == off && hint.frame_size == fsize;
      hint_for = UINT64_MAX;
      if (!described) {
        stray_hint();
      } else if (!wants_any(hint.fields)) {
        // Stepped over undecompressed when it holds nothing wanted and its bytes are the ones the
        // hint hashed (a damaged frame is read, and reported, as any other).
        if (heapsnap_format::flush_hash(p, fsize) == hint.hash) {
          ++f.stepped_over;
          // Its pages, read by the hash, out of the resident set (as release_read does for frames
          // read; released_ is the consumer's, so only whole pages inside this frame): a run of
          // stepped-over frames (500 MB at 10^8 blocks) otherwise stayed resident until the next
          // frame read.
          const uint64_t lo = (off + 4095) & ~uint64_t(4095), hi = (off + fsize) & ~uint64_t(4095);
          if (hi > lo) madvise(const_cast<uint8_t *>(map_) + lo, size_t(hi - lo), MADV_DONTNEED);
          off += fsize;
          continue;
        }
      }
    }
    uint64_t key = (uint64_t(le32(p + fsize - 4)) << 32) ^ fsize;
    bool repeated = false;
    for (auto [it, end] = seen.equal_range(key); it != end && !repeated; ++it)
      if (memcmp(map_ + it->second, p, fsize) == 0) {
        repeated = true;
        f.skipped += fsize;
        problem(off, "frame at " + hex_offset(off) + " repeats the frame at " + hex_offset(it->second) +
                         " byte for byte; skipped");
      }
    if (repeated) {
      off += fsize;
      continue;
    }
    seen.emplace(key, off);
    unsigned long long content = ZSTD_getFrameContentSize(p, fsize);
    if (content == ZSTD_CONTENTSIZE_ERROR || (content != ZSTD_CONTENTSIZE_UNKNOWN && content > kMaxFrameBytes)) {
      f.skipped += fsize;
      problem(off, "frame at " + hex_offset(off) + " declares " +
                       (content > kMaxFrameBytes && content != ZSTD_CONTENTSIZE_UNKNOWN &&
                                content != ZSTD_CONTENTSIZE_ERROR
                            ? std::to_string(content) + " bytes (limit " + std::to_string(kMaxFrameBytes) + ")"
                            : std::string("no valid size")) + "; skipped");
      off += fsize;
      continue;
    }
    size_t got = 0;
    const char *why = nullptr;
    if (content == ZSTD_CONTENTSIZE_UNKNOWN) {
      // A frame that spanned flushes (format 3): its size is known once it is decompressed.
      bool complete = false;
      why = inflate(p, fsize, f, &got, &complete);
      if (!why && !complete) why = "its blocks end before the frame does";
    } else {
      reserve_frame(f, size_t(content));
      got = ZSTD_decompressDCtx(dctx, f.buf.get(), size_t(content), p, fsize);
      why = ZSTD_isError(got) ? ZSTD_getErrorName(got) : got != content ? "size mismatch" : nullptr;
    }
    if (why) {
      // Its extent came from its own block headers, which may be what is damaged (a frame cut
      // short, then the next one): skipped up to the first frame start inside it, if any.
      size_t skip = next_frame_start(p, fsize, avail);
      if (!skip) skip = fsize;
      f.skipped += skip;
      problem(off, "frame at " + hex_offset(off) + " does not decompress (" + why + "); skipped " +
                       std::to_string(skip) + " bytes");
      off += skip;
      continue;
    }
    finish_frame(f, off, got, off + fsize);
    return;
  }
  f.last = true;
}

// A frame's buffer: room for content bytes and the padding. Grown without copying or clearing,
// the old buffer freed first: a vector's resize held both (4 + 8 MB at once) and zeroed what the
// decompressor writes anyway.
void CaptureReader::reserve_frame(Frame &f, size_t content) {
  size_t want = content + kRawEventsPadding;
  if (f.cap >= want) return;
  f.buf.reset();
  f.cap = kExactFrameBuffers
              ? want
              : std::max(want, std::min(std::max(f.cap * 3 / 2, kWriterFrameBytes), size_t(kMaxFrameBytes)) +
                                   kRawEventsPadding);
  f.buf.reset(new uint8_t[f.cap]);
}

// f holds got bytes of the frame at off; scanning goes on at next.
void CaptureReader::finish_frame(Frame &f, uint64_t off, size_t got, uint64_t next) {
  if (kExactFrameBuffers && f.cap != got + kRawEventsPadding) {
    // (A frame of unknown size was decompressed into a bigger buffer: sanitizer builds want the
    // padding to end the allocation.)
    std::unique_ptr<uint8_t[]> exact(new uint8_t[got + kRawEventsPadding]);
    memcpy(exact.get(), f.buf.get(), got);
    f.buf = std::move(exact);
    f.cap = got + kRawEventsPadding;
  }
  memset(f.buf.get() + got, 0, kRawEventsPadding);
  f.has_data = true;
  f.off = off;
  f.got = got;
  f.next = next;
}

// Decompresses the n bytes at p (a frame, or a cut frame's header and complete blocks) into
// f.buf, whose size it finds by trying: the writer's frame size first, then twice as much, up to
// kMaxFrameBytes. The stream decoder writes straight into f.buf (ZSTD_d_stableOutBuffer): no
// window buffer of the size the frame asks for, no copy. *complete: the frame ended (and its
// checksum matched). Returns why it failed, or nullptr.
const char *CaptureReader::inflate(const uint8_t *p, size_t n, Frame &f, size_t *got, bool *complete,
                                   bool by_block) {
  auto *dctx = static_cast<ZSTD_DCtx *>(dctx_);
  // (Sanitizer builds start from the input's size: an 8 MiB buffer per frame, allocated and
  // poisoned for real there, made the fuzz targets slower.)
  size_t room = kExactFrameBuffers ? std::min(kWriterFrameBytes, std::max(n * 4, size_t(4096)))
                                   : std::max(f.cap > kRawEventsPadding ? f.cap - kRawEventsPadding : 0, kWriterFrameBytes);
  for (;;) {
    reserve_frame(f, room);
    ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
    ZSTD_DCtx_setParameter(dctx, ZSTD_d_stableOutBuffer, 1);
    // by_block: the input is offered a block at a time (its header and blocks are whole, see
    // walk_blocks), so that out.pos holds the blocks before one that fails: a call that fails
    // leaves it where it was.
    size_t fed = by_block ? ZSTD_frameHeaderSize(p, n) : n;
    if (ZSTD_isError(fed) || fed > n) fed = n;
    ZSTD_inBuffer in = {p, fed, 0};
    ZSTD_outBuffer out = {f.buf.get(), f.cap - kRawEventsPadding, 0};
    size_t left;
    for (;;) {
      size_t in_was = in.pos, out_was = out.pos;
      left = ZSTD_decompressStream(dctx, &out, &in);
      if (ZSTD_isError(left) || left == 0) break;
      if (in.pos == in.size && in.size < n) {
        in.size = std::min(n, in.size + block_header(p + in.size).span());  // the next block
        continue;
      }
      if (in.pos == in_was && out.pos == out_was) break;
    }
    ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);  // (parameters change only between frames)
    ZSTD_DCtx_setParameter(dctx, ZSTD_d_stableOutBuffer, 0);
    bool full = (ZSTD_isError(left) && ZSTD_getErrorCode(left) == ZSTD_error_dstSize_tooSmall) ||
                (!ZSTD_isError(left) && left != 0 && out.pos == out.size);
    if (full) {
      static_assert(kMaxFrameBytes == 256u << 20, "the message below says 256 MiB");
      if (room >= kMaxFrameBytes) return "it holds more than the limit of 256 MiB";
      room = std::min(room * 2, size_t(kMaxFrameBytes));
      continue;
    }
    *got = out.pos;  // (on an error too: the blocks before it, for a cut frame's caller)
    if (ZSTD_isError(left)) return ZSTD_getErrorName(left);
    *complete = left == 0;
    return nullptr;
  }
}

// Takes in what scan() found, in file order; false when fn asked to stop.
bool CaptureReader::consume(Frame &f, const RecordFn &fn) {
  for (auto &pr : f.problems) problems_.push_back(std::move(pr));
  f.problems.clear();
  skipped_ += f.skipped;
  stepped_over_ += f.stepped_over;
  f.stepped_over = 0;
  if (f.truncated) truncated_ = true;
  if (!f.has_data) return true;
  ++frames_;
  bool stop = false;
  parse_frame(f.buf.get(), f.got, f.off, fn, &stop);
  if (frame_done_ && !frame_done_()) stop = true;
  if (stop) return false;
  release_read(f.next);
  return true;
}

// Whether the file holds something after its first frame (another frame, or damage the scan
// will report): a look at the first frame's block headers, nothing decompressed.
bool CaptureReader::more_than_one_frame() const {
  if (body_offset_ >= size_) return false;
  size_t first = ZSTD_findFrameCompressedSize(map_ + body_offset_, size_t(size_ - body_offset_));
  return ZSTD_isError(first) || body_offset_ + first < size_;
}

bool CaptureReader::for_each_record(const RecordFn &fn) {
  // Frames already read, by (checksum or last 4 bytes, size): a frame repeated byte for byte (a
  // copy that went wrong) is skipped. Every frame the writer makes differs from every other one
  // (each holds a Totals record with its time, or a snapshot's index and block numbers).
  SeenFrames seen;
  // With a second CPU, a second frame is worth the thread (the writer's frames compress 50 to 160
  // times: a 0.5 MB capture can hold 12 M events). The thread that loads debug files during a
  // replay competes for that CPU: on one 2-CPU machine, with libc's debug file inflated at each
  // query, the read-ahead thread lost a little at 12 M events (0.124 s without it, 0.131 s with)
  // and won from about 30 M on (36 M: 0.337 s, 0.276 s); on another (AMD Zen 4, 2 CPUs) it won at
  // 12 M (0.190 s, 0.156 s, medians of 10, libc's debug file inflated meanwhile). With that file
  // served from the debug cache (symbolize/debug_cache.h) the other thread has little to do.
  // A file of more than one frame starts the thread at once: the first frame read on this thread
  // alone left the other CPU idle (on the python capture's 28 frames, 0.167 -> 0.163 s medians
  // of 25, minimum 0.946x, an idle machine before each query).
  bool automatic_ahead = read_ahead_ == ReadAhead::automatic &&
                         (size_ - body_offset_ >= kReadAheadMin || (available_cpus() >= 2 && more_than_one_frame()));
  if (read_ahead_ == ReadAhead::always || automatic_ahead) return read_ahead(body_offset_, fn, seen);
  bool ahead_after_first = read_ahead_ == ReadAhead::after_first;
  uint64_t off = body_offset_;
  for (;;) {
    if (progress_) progress_(off, size_);
    scan(off, frame_, seen);
    if (!consume(frame_, fn)) return true;
    if (frame_.last) break;
    off = frame_.next;
    if (ahead_after_first && off < size_) return read_ahead(off, fn, seen);
  }
  if (progress_) progress_(size_, size_);
  return true;
}

// for_each_record from `start` with a thread that scans and decompresses the next frame while
// this one parses the last (decompression was 15% of a replay's time), and decodes the frame's
// event batches if asked to (decode_ahead). Two frame buffers take turns.
bool CaptureReader::read_ahead(uint64_t start, const RecordFn &fn, SeenFrames &seen) {
  Frame frames[2];
  frames[0].buf = std::move(frame_.buf);
  frames[0].cap = frame_.cap;
  frame_.cap = 0;
  std::mutex mu;
  std::condition_variable cv;
  // Handoff state, under mu: ready[i] = frames[i] holds a scan result the parser has not taken.
  bool ready[2] = {false, false};
  bool quit = false;
  std::unique_ptr<DecodeRing> ring;
  if (decoded_events_) {
    ring = std::make_unique<DecodeRing>();
    ring->mu = &mu;
    ring->cv = &cv;
    ring->quit = &quit;
    ring->delay_us = decode_delay_us_;
    ring->leave_odd = leave_to_parser_;
    ring_ = ring.get();
  }
  std::thread scanner([&] {
    pthread_setname_np(pthread_self(), "hs-read-ahead");  // for top -H and perf's --sort comm
    uint64_t off = start;
    // Frames scanned and handed over, frames decoded (or passed by): frame n is in frames[n % 2].
    uint64_t scanned = 0, decoded = 0;
    bool end = false;  // the last scan found the end of the file
    // Scans the next frame into its buffer and hands it over. wait: until the parser has handed
    // that buffer back (else only if it has). False if nothing was scanned.
    auto scan_next = [&](bool wait) {
      Frame &f = frames[scanned % 2];
      {
        std::unique_lock<std::mutex> lock(mu);
        if (wait) cv.wait(lock, [&] { return !ready[scanned % 2] || quit; });
        if (end || quit || ready[scanned % 2]) return false;
      }
      scan(off, f, seen);
      end = f.last;
      off = f.next;
      {
        std::lock_guard<std::mutex> lock(mu);
        ready[scanned % 2] = true;
      }
      cv.notify_all();
      ++scanned;
      return true;
    };
    for (;;) {
      if (decoded == scanned && !scan_next(true)) break;
      const Frame &f = frames[decoded % 2];
      // The parser reads f meanwhile (decode_ahead reads its buf, got and off only); nothing
      // writes them until the parser hands the frame back and this thread has decoded it.
      if (ring && f.has_data) {
        // While the ring is full, the next frame is decompressed into the other buffer (once the
        // parser has handed it back): without that the parser waited for a decompression at
        // every frame's end.
        decode_ahead(f, *ring, [&] {
          if (scanned == decoded + 1) scan_next(false);
        });
        ring->walked.store(f.off + 1);
        ring->wake(ring->parser_sleeps);
      }
      bool last = f.last;
      ++decoded;
      if (last) break;
    }
    if (ring) {
      ring->done.store(true);
      ring->wake(ring->parser_sleeps);
    }
  });
  bool stopped = false;
  for (int i = 0;; i ^= 1) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return ready[i]; });
    }
    Frame &f = frames[i];
    if (progress_) progress_(f.has_data ? f.off : size_, size_);
    bool last = f.last;
    if (!consume(f, fn)) stopped = true;
    {
      std::lock_guard<std::mutex> lock(mu);
      ready[i] = false;
      if (stopped) quit = true;
    }
    cv.notify_all();
    if (stopped || last) break;
  }
  scanner.join();
  if (ring) {
    batches_ahead_ += ring->head.load();
    batches_by_parser_ += ring->by_parser.load();
  }
  ring_ = nullptr;
  // Keep the larger buffer for another pass.
  int keep = frames[0].cap >= frames[1].cap ? 0 : 1;
  frame_.buf = std::move(frames[keep].buf);
  frame_.cap = frames[keep].cap;
  if (!stopped && progress_) progress_(size_, size_);
  return true;
}

}  // namespace heapsnap::capture
