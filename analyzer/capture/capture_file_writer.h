// Writes a capture file from the analyzer side (libprotobuf + zstd): used by the synthetic
// workload generator and by tests that need captures with known content. Same layout as the
// shim's writer (see proto/heapsnap.proto): header frame, then zstd frames, each of one or more
// flushes.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

#include "heapsnap.pb.h"

struct ZSTD_CCtx_s;
typedef struct ZSTD_CCtx_s ZSTD_CCtx;

namespace heapsnap::capture {

class CaptureFileWriter {
 public:
  // Creates (truncates) path. major/minor default to the current format.
  explicit CaptureFileWriter(const std::string &path, uint16_t major = 1, uint16_t minor = 0,
                             int level = 3);
  ~CaptureFileWriter();
  bool ok() const { return f_ != nullptr && !failed_; }

  void add(const wire::Record &r);  // appends to the current frame
  // Appends a record given as its bytes, valid or not (tests of damaged records).
  void add_bytes(const std::string &record);
  void end_frame();                 // writes the pending records and ends the frame
  // Writes the pending records as the complete blocks of a frame that stays open (format 3).
  void flush();
  bool close();                     // ends the last frame, closes the file
  uint64_t bytes_written() const { return written_; }
  // Frames auto-end when the pending records reach this many bytes (0 = only on end_frame()).
  void set_auto_frame_bytes(size_t n) { auto_frame_ = n; }
  // Frames begun and ended in one call get a frame hint before them (proto/frame_hint.h), as the
  // shim's snapshot child writes; off by default (tests place damage at known offsets).
  void set_frame_hints(bool on) { hints_ = on; }

 private:
  void compress(bool end);
  FILE *f_ = nullptr;
  ZSTD_CCtx *cctx_ = nullptr;
  bool frame_open_ = false;
  bool hints_ = false;
  std::string pending_;
  bool failed_ = false;
  int level_;
  size_t auto_frame_ = 8u << 20;
  uint64_t written_ = 0;
};

}  // namespace heapsnap::capture
