#include "capture/capture_file_writer.h"

#include <zstd.h>

#include "../../proto/flush_hash.h"
#include "../../proto/frame_hint.h"

#include <cstring>
#include <vector>

namespace heapsnap::capture {

CaptureFileWriter::CaptureFileWriter(const std::string &path, uint16_t major, uint16_t minor,
                                     int level)
    : level_(level) {
  f_ = fopen(path.c_str(), "wb");
  if (!f_) return;
  uint8_t h[24];
  uint32_t magic = 0x184D2A5E, len = 16;
  memcpy(h, &magic, 4);
  memcpy(h + 4, &len, 4);
  memcpy(h + 8, "HEAPSNAP", 8);
  memcpy(h + 16, &major, 2);
  memcpy(h + 18, &minor, 2);
  memset(h + 20, 0, 4);
  failed_ = fwrite(h, 1, sizeof(h), f_) != sizeof(h);
  written_ = sizeof(h);
}

CaptureFileWriter::~CaptureFileWriter() {
  close();
  ZSTD_freeCCtx(cctx_);
}

void CaptureFileWriter::add(const wire::Record &r) { add_bytes(r.SerializeAsString()); }

void CaptureFileWriter::add_bytes(const std::string &body) {
  uint64_t n = body.size();
  while (n >= 0x80) {
    pending_.push_back(char(uint8_t(n) | 0x80));
    n >>= 7;
  }
  pending_.push_back(char(n));
  pending_ += body;
  if (auto_frame_ && pending_.size() >= auto_frame_) end_frame();
}

void CaptureFileWriter::end_frame() { compress(true); }

// Like the shim's writer, a flush that leaves the frame open ends with a FlushEnd record holding
// the hash of the frame's records since the last one (heapsnap.proto; encoded here by protobuf,
// by hand in the shim).
void CaptureFileWriter::flush() {
  if (!f_ || pending_.empty()) return;
  wire::Record r;
  r.mutable_flush_end()->set_hash(heapsnap_format::flush_hash(pending_.data(), pending_.size()));
  std::string body = r.SerializeAsString();
  pending_.push_back(char(body.size()));  // (under 128 bytes: a one-byte length)
  pending_ += body;
  compress(false);
}

void CaptureFileWriter::compress(bool end) {
  if (!f_ || (pending_.empty() && !(end && frame_open_))) return;
  if (!cctx_) {
    cctx_ = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level_);
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1);
  }
  // As the shim's writer does (preload/src/output/capture_writer.cc): a frame begun and ended in one
  // call declares its size; flushed ones do not.
  ZSTD_inBuffer in = {pending_.data(), pending_.size(), 0};
  std::vector<char> out(ZSTD_CStreamOutSize());
  // A hinted frame is kept whole until its size and hash are known.
  const bool hinted = hints_ && end && !frame_open_;
  std::string whole;
  for (;;) {
    ZSTD_outBuffer o = {out.data(), out.size(), 0};
    size_t left = ZSTD_compressStream2(cctx_, &o, &in, end ? ZSTD_e_end : ZSTD_e_flush);
    if (ZSTD_isError(left) || (!hinted && fwrite(out.data(), 1, o.pos, f_) != o.pos)) {
      failed_ = true;
      break;
    }
    if (hinted) whole.append(out.data(), o.pos);
    written_ += o.pos;
    if (left == 0) break;
  }
  if (hinted && !failed_) {
    using namespace heapsnap_format;
    const auto *z = reinterpret_cast<const uint8_t *>(whole.data());
    uint8_t h[kFrameHintBytes];
    put_frame_hint(h, FrameHint{record_fields(reinterpret_cast<const uint8_t *>(pending_.data()), pending_.size()),
                                whole.size(), flush_hash(z, whole.size())});
    failed_ = fwrite(h, 1, sizeof(h), f_) != sizeof(h) || fwrite(z, 1, whole.size(), f_) != whole.size();
    written_ += sizeof(h);
  }
  frame_open_ = !end;
  pending_.clear();
}

bool CaptureFileWriter::close() {
  if (!f_) return false;
  end_frame();
  bool ok = !failed_ && fclose(f_) == 0;
  f_ = nullptr;
  return ok;
}

}  // namespace heapsnap::capture
