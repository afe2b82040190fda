// Streaming reader of a capture file: header, then zstd frames of length-delimited records.
//
// Every byte is untrusted: lengths are bounded before anything is allocated, a damaged frame is
// skipped (the reader resynchronises on the next zstd frame magic) and reported with its file
// offset, and a file cut off mid-frame yields every record before the cut.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "heapsnap.pb.h"

namespace heapsnap::capture {

class DecodedBatch;  // decoded_batch.h
struct DecodeRing;   // capture_reader.cc

inline constexpr uint16_t kReaderMajor = 3;  // and every older one
inline constexpr uint16_t kReaderMinor = 5;  // 3.3: SnapshotMemory; 3.4: Totals.rss_parts; 3.5: vector triples
// A frame's decompressed size above this is treated as damage (the writer cuts at 8 MiB; 2 MiB
// in format 2, 8 MiB before 52f3b95).
inline constexpr uint64_t kMaxFrameBytes = 256ull << 20;
// The writer's frames hold at most this much (preload/src/output/capture_writer.cc, kMaxFrameInput),
// unless one record is bigger.
inline constexpr size_t kWriterFrameBytes = size_t(8) << 20;
// Zero bytes after every decompressed frame (see set_raw_events_handler).
inline constexpr size_t kRawEventsPadding = 16;

struct Problem {
  uint64_t offset;       // file offset the problem was found at
  std::string what;
};

struct RecordPos {
  uint64_t frame_offset;  // file offset of the zstd frame holding the record
  uint64_t offset_in_frame;
};

class CaptureReader {
 public:
  ~CaptureReader();
  // Opens and checks the header. On failure returns nullptr and sets *error (with the offset).
  static std::unique_ptr<CaptureReader> open(const std::string &path, std::string *error);

  using RecordFn = std::function<bool(const wire::Record &, const RecordPos &)>;
  // Calls fn for every record in file order; fn returns false to stop early.
  // Returns false only if reading stopped on an unrecoverable problem (see problems()).
  bool for_each_record(const RecordFn &fn);

  uint16_t major() const { return major_; }
  uint16_t minor() const { return minor_; }
  uint64_t file_size() const { return size_; }
  const std::string &path() const { return path_; }
  // The file ends inside a frame (the process was killed or the disk filled up).
  bool truncated() const { return truncated_; }
  uint64_t bytes_skipped() const { return skipped_; }
  const std::vector<Problem> &problems() const { return problems_; }
  uint64_t frames_read() const { return frames_; }
  uint64_t records_read() const { return records_; }
  // Frames not decompressed: their frame hints (proto/frame_hint.h) say they hold only records
  // the filter skips, and their bytes hash to the hint's value.
  uint64_t frames_stepped_over() const { return stepped_over_; }

  // Only records whose body field (see Record in proto/heapsnap.proto) passes `keep` are parsed;
  // the others are skipped unparsed (a query that needs no events skips them cheaply).
  void set_record_filter(std::function<bool(uint32_t field)> keep) { filter_ = std::move(keep); }

  // Records that hold only an EventBatch are offered to `raw` as the batch's bytes before any
  // parsing (see event_columns.h); when it returns false the record is parsed and passed to the
  // record callback as usual. At least kRawEventsPadding readable bytes follow the batch (the
  // frame buffer's padding; see batch_decoder.h, which reads varints without bounds checks).
  using RawEventsFn = std::function<bool(const uint8_t *batch, size_t n, const RecordPos &)>;
  void set_raw_events_handler(RawEventsFn raw) { raw_events_ = std::move(raw); }

  // Records holding one length-delimited field (the field's key, the message's length, the
  // message: what the shim writes) are offered to `raw` as that field's number and message bytes
  // before any parsing, after the record filter. It answers parse (parse the record and pass it
  // to the record callback as usual), taken (the record is handled), or stop (handled; end the
  // pass as if the record callback had returned false). The bytes stay valid until the frame
  // done callback (set_frame_done) returns.
  enum class RawRecord { parse, taken, stop };
  using RawRecordFn = std::function<RawRecord(uint32_t field, const uint8_t *msg, size_t n, const RecordPos &)>;
  void set_raw_record_handler(RawRecordFn raw) { raw_records_ = std::move(raw); }
  // Called on the parsing thread after each frame's records, before the frame's buffer is reused
  // (work on the raw records' bytes finishes here); false ends the pass.
  void set_frame_done(std::function<bool()> fn) { frame_done_ = std::move(fn); }

  // Event batches decoded ahead: with a read-ahead thread, that thread also decodes each batch
  // in the shim's layout (what the raw events handler would be offered) into a DecodedBatch,
  // and `fn` gets it here, in its place among the records, instead of the raw handler. Batches
  // it cannot take, and every batch when no thread reads ahead (and those of the first frame in
  // after_first mode), go the raw handler's way. The record filter is then called on the
  // read-ahead thread too, at the same time: it must be a pure function of the field number,
  // not changed during a pass.
  using DecodedEventsFn = std::function<void(const DecodedBatch &, const RecordPos &)>;
  void set_decoded_events_handler(DecodedEventsFn fn) { decoded_events_ = std::move(fn); }

  // Whether a thread scans and decompresses the next frame while the current one is parsed:
  // always, never, after_first (the first frame read on the caller's thread, the thread started
  // if there is a second), automatic (always for files of kReadAheadMin bytes or more, and for
  // files of more than one frame with two CPUs or more; else never). The records, problems and figures are the
  // same either way.
  enum class ReadAhead { automatic, always, never, after_first };
  void set_read_ahead(ReadAhead mode) { read_ahead_ = mode; }

  // Event batches queued for decoding ahead in the passes so far, and how many of them the
  // parser decoded itself (see DecodeRing in capture_reader.cc).
  uint64_t batches_decoded_ahead() const { return batches_ahead_; }
  uint64_t batches_decoded_by_parser() const { return batches_by_parser_; }
  // Tests: the read-ahead thread sleeps this long before each batch it decodes (the parser then
  // decodes more of them itself).
  void set_decode_delay_for_test(unsigned us) { decode_delay_us_ = us; }
  // The thread decodes no odd-numbered slot: the parser decodes them, however the two are timed.
  void set_leave_to_parser_for_test(bool on) { leave_to_parser_ = on; }

  // Progress callback (bytes consumed so far), called about once per frame.
  void set_progress(std::function<void(uint64_t done, uint64_t total)> fn) { progress_ = std::move(fn); }

 private:
  CaptureReader() = default;
  bool parse_frame(const uint8_t *data, size_t n, uint64_t frame_offset, const RecordFn &fn,
                   bool *stop);
  void problem(uint64_t offset, std::string what);
  void release_read(uint64_t upto);

  // What scanning for the next frame found (see scan()).
  struct Frame {
    std::vector<Problem> problems;
    uint64_t skipped = 0;
    uint64_t stepped_over = 0;  // frames left compressed: their hints say no wanted record is in them
    bool truncated = false;
    bool last = false;      // the file ends: nothing more to scan
    bool has_data = false;  // buf holds a decompressed frame (and its padding)
    uint64_t off = 0, next = 0;  // the frame's file offset; where scanning goes on
    size_t got = 0;
    std::unique_ptr<uint8_t[]> buf;
    size_t cap = 0;
  };
  using SeenFrames = std::unordered_multimap<uint64_t, uint64_t>;
  // Files this large are read with a read-ahead thread whatever the CPUs (see for_each_record).
  static constexpr uint64_t kReadAheadMin = 1u << 20;
  void scan(uint64_t off, Frame &f, SeenFrames &seen);
  bool consume(Frame &f, const RecordFn &fn);
  static void reserve_frame(Frame &f, size_t content);
  static void finish_frame(Frame &f, uint64_t off, size_t got, uint64_t next);
  const char *inflate(const uint8_t *p, size_t n, Frame &f, size_t *got, bool *complete, bool by_block = false);
  bool read_ahead(uint64_t start, const RecordFn &fn, SeenFrames &seen);
  void decode_ahead(const Frame &f, DecodeRing &ring, const std::function<void()> &ring_full);
  bool take_decoded(uint64_t frame_offset, uint64_t at);
  bool filtered(const uint8_t *p, uint64_t len) const;
  bool wants_any(uint64_t fields) const;
  bool more_than_one_frame() const;

  std::string path_;
  const uint8_t *map_ = nullptr;
  uint64_t size_ = 0;
  uint16_t major_ = 0, minor_ = 0;
  uint64_t body_offset_ = 0;
  bool truncated_ = false;
  uint64_t skipped_ = 0;
  uint64_t frames_ = 0, records_ = 0, stepped_over_ = 0;
  std::vector<Problem> problems_;
  Frame frame_;  // the frame being read (its buffer kept from pass to pass)
  ReadAhead read_ahead_ = ReadAhead::automatic;
  uint64_t released_ = 0;  // file bytes before this were read and dropped from memory
  void *dctx_ = nullptr;
  std::function<void(uint64_t, uint64_t)> progress_;
  std::function<bool(uint32_t)> filter_;
  RawEventsFn raw_events_;
  RawRecordFn raw_records_;
  std::function<bool()> frame_done_;
  DecodedEventsFn decoded_events_;
  DecodeRing *ring_ = nullptr;  // while a read-ahead thread decodes batches
  uint64_t batches_ahead_ = 0, batches_by_parser_ = 0;
  unsigned decode_delay_us_ = 0;
  bool leave_to_parser_ = false;
};

}  // namespace heapsnap::capture
