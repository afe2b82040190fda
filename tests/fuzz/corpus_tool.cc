// Makes fuzz seeds from a real capture (scripts/fuzz runs it over captures of tests/programs):
//   OUT/capture/NAME            the capture as recorded
//   OUT/capture/NAME.cutK       the capture cut after its K-th frame, and in the middle of frame K+1
//   OUT/records/NAME            the decompressed record stream, frames joined by "HSFRAME!"
//                               (capture_records_fuzz's format), and its cut after the first frame
//   OUT/delimited/NAME          the records without length prefixes, joined by "HSREC!", frames
//                               by "HSFRAME!" (snapshot_fuzz's format)
// usage: corpus_tool OUT CAPTURE...
#include <zstd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "capture_harness.h"

namespace fs = std::filesystem;

static void spit(const fs::path &p, const std::string &data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(data.data(), std::streamsize(data.size()));
}

// One frame's records (varint length + body) as bodies joined by kRecordCut.
static std::string to_delimited(const char *p, size_t n) {
  std::string out;
  for (size_t at = 0; at < n;) {
    uint64_t len = 0;
    int shift = 0;
    while (at < n && shift < 64) {
      uint8_t b = uint8_t(p[at++]);
      len |= uint64_t(b & 0x7f) << shift;
      shift += 7;
      if (!(b & 0x80)) break;
    }
    if (len > n - at) break;
    if (!out.empty()) out += heapsnap::fuzz::kRecordCut;
    out.append(p + at, len);
    at += len;
  }
  return out;
}

// The frame at p (n bytes), decompressed as a stream (a format 3 frame does not declare its
// size); false if it does not decompress or holds more than 64 MiB.
bool inflate(const char *p, size_t n, std::string *out) {
  static ZSTD_DCtx *d = ZSTD_createDCtx();
  ZSTD_DCtx_reset(d, ZSTD_reset_session_only);
  ZSTD_inBuffer in = {p, n, 0};
  for (;;) {
    char chunk[1 << 16];
    ZSTD_outBuffer o = {chunk, sizeof chunk, 0};
    size_t in_was = in.pos;
    size_t left = ZSTD_decompressStream(d, &o, &in);
    if (ZSTD_isError(left) || out->size() + o.pos > (64u << 20)) return false;
    out->append(chunk, o.pos);
    if (left == 0) return true;
    if (o.pos == 0 && in.pos == in_was) return false;  // the frame's blocks end early
  }
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s OUT CAPTURE...\n", argv[0]);
    return 2;
  }
  fs::path out(argv[1]);
  fs::create_directories(out / "capture");
  fs::create_directories(out / "records");
  fs::create_directories(out / "delimited");
  int seeds = 0;
  for (int a = 2; a < argc; ++a) {
    std::ifstream in(argv[a], std::ios::binary);
    std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string name = fs::path(argv[a]).filename().string();
    if (file.size() < 24 || memcmp(file.data() + 8, "HEAPSNAP", 8) != 0) {
      fprintf(stderr, "%s: not a capture, skipped\n", argv[a]);
      continue;
    }
    spit(out / "capture" / name, file);
    ++seeds;
    std::string records, first_frame_records, delimited;
    size_t off = 24;
    int k = 0;
    while (off < file.size()) {
      const char *p = file.data() + off;
      size_t n = ZSTD_findFrameCompressedSize(p, file.size() - off);
      if (ZSTD_isError(n)) break;  // cut off: the capture as recorded already has it
      std::string buf;
      if (inflate(p, n, &buf)) {
        size_t got = buf.size();
        {
          if (!records.empty()) records += heapsnap::fuzz::kFrameCut;
          records.append(buf.data(), got);
          if (!delimited.empty()) delimited += heapsnap::fuzz::kFrameCut;
          delimited += to_delimited(buf.data(), got);
          if (k == 0) first_frame_records = records;
        }
      }
      ++k;
      // Cut in the middle of this frame, and right after it (unless it is the last one).
      spit(out / "capture" / (name + ".cut" + std::to_string(k) + "m"), file.substr(0, off + n / 2));
      off += n;
      if (off < file.size()) spit(out / "capture" / (name + ".cut" + std::to_string(k)), file.substr(0, off));
      seeds += 2;
    }
    if (!records.empty()) {
      spit(out / "records" / name, records);
      ++seeds;
      spit(out / "delimited" / name, delimited);
      ++seeds;
      if (first_frame_records.size() < records.size()) {
        spit(out / "records" / (name + ".frame1"), first_frame_records);
        ++seeds;
      }
    }
  }
  printf("%d seeds in %s\n", seeds, argv[1]);
  return 0;
}
