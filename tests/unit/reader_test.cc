// The reader on damaged files: cut anywhere in the last frame, flipped bytes, a newer version.
#include <doctest/doctest.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_frameHeaderSize
#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "capture/capture_file_writer.h"
#include "capture/capture_reader.h"
#include "../../proto/frame_hint.h"

using heapsnap::capture::CaptureFileWriter;
using heapsnap::capture::CaptureReader;

namespace {

std::string temp_path(const char *name) {
  return std::string(P_tmpdir) + "/heapsnap-test-" + std::to_string(getpid()) + "-" + name;
}

// A capture of `frames` frames, each holding `per_frame` Marker records numbered in order, the
// first a Process record too; with `hints`, each frame after a frame hint (proto/frame_hint.h).
std::vector<uint64_t> write_markers(const std::string &path, int frames, int per_frame, bool hints = false) {
  CaptureFileWriter w(path);
  w.set_frame_hints(hints);
  std::vector<uint64_t> frame_ends;
  heapsnap::wire::Record r;
  r.mutable_process()->set_pid(4242);
  w.add(r);
  int n = 0;
  for (int f = 0; f < frames; ++f) {
    for (int i = 0; i < per_frame; ++i) {
      heapsnap::wire::Record m;
      m.mutable_marker()->set_time_ns(uint64_t(n));
      m.mutable_marker()->set_text("marker " + std::to_string(n++));
      w.add(m);
    }
    w.end_frame();
    frame_ends.push_back(w.bytes_written());
  }
  REQUIRE(w.close());
  return frame_ends;
}

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string &path, const std::string &data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), std::streamsize(data.size()));
}

// Markers read in order, and whether they are 0..n-1 without gaps.
std::vector<uint64_t> read_markers(CaptureReader &r) {
  std::vector<uint64_t> got;
  r.for_each_record([&](const heapsnap::wire::Record &rec, const heapsnap::capture::RecordPos &) {
    if (rec.has_marker()) got.push_back(rec.marker().time_ns());
    return true;
  });
  return got;
}

// The capture at path, opened (the test stops if it does not open).
std::unique_ptr<CaptureReader> open_capture(const std::string &path) {
  std::string err;
  auto r = CaptureReader::open(path, &err);
  REQUIRE_MESSAGE(r, err);
  return r;
}

// The capture at path reads whole: `markers` markers, not truncated, no problem. Returns the
// reader after that pass.
std::unique_ptr<CaptureReader> check_reads_whole(const std::string &path, size_t markers) {
  auto r = open_capture(path);
  CHECK(read_markers(*r).size() == markers);
  CHECK(!r->truncated());
  CHECK(r->problems().empty());
  return r;
}

}  // namespace

TEST_CASE("reader: a capture cut at every byte offset of its last frame keeps all earlier frames") {
  std::string path = temp_path("cut.hsnap");
  auto ends = write_markers(path, 4, 50);
  std::string whole = slurp(path);
  REQUIRE(whole.size() == ends.back());
  uint64_t last_start = ends[ends.size() - 2];
  std::string cut_path = temp_path("cut-part.hsnap");
  for (uint64_t cut = last_start; cut < whole.size(); ++cut) {
    spit(cut_path, whole.substr(0, cut));
    auto r = open_capture(cut_path);
    auto got = read_markers(*r);
    // The three complete frames; of the cut one, nothing (its one block is cut), or everything
    // when only its checksum is.
    bool checksum_cut = cut >= whole.size() - 4;
    REQUIRE(got.size() == (checksum_cut ? 200u : 150u));
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == i);
    if (cut > last_start) {
      CHECK(r->truncated());
      REQUIRE(!r->problems().empty());
      CHECK(r->problems().back().offset == last_start);
    }
  }
  // And the whole file reads completely, untruncated.
  check_reads_whole(path, 200);
  unlink(path.c_str());
  unlink(cut_path.c_str());
}

// Format 3: a frame spans flushes. `flushes` flushes of `per_flush` markers, the frame ended
// after every `per_frame` of them (0: left open, as a killed process leaves it); returns the file
// size after each flush.
// *first_frame_end: where the process record's frame ends (the next frame starts).
std::vector<uint64_t> write_flushed_markers(const std::string &path, int flushes, int per_flush, int per_frame,
                                            size_t text_bytes = 20, uint64_t *first_frame_end = nullptr) {
  CaptureFileWriter w(path, 3, 0);
  heapsnap::wire::Record r;
  r.mutable_process()->set_pid(4242);
  w.add(r);
  w.end_frame();
  if (first_frame_end) *first_frame_end = w.bytes_written();
  std::vector<uint64_t> flush_ends;
  int n = 0;
  for (int f = 1; f <= flushes; ++f) {
    for (int i = 0; i < per_flush; ++i) {
      heapsnap::wire::Record m;
      m.mutable_marker()->set_time_ns(uint64_t(n));
      std::string text = "marker " + std::to_string(n++) + " ";
      while (text.size() < text_bytes) text += char('a' + (text.size() * 7 + size_t(n)) % 26);
      m.mutable_marker()->set_text(text);
      w.add(m);
    }
    if (per_frame && f % per_frame == 0) w.end_frame();
    else w.flush();
    flush_ends.push_back(w.bytes_written());
  }
  return flush_ends;  // (the writer's destructor ends an open frame)
}

TEST_CASE("reader: a frame that spans flushes, cut anywhere, reads every flush before the cut") {
  std::string path = temp_path("flushes.hsnap");
  uint64_t frame_start = 0;
  std::vector<uint64_t> ends = write_flushed_markers(path, 6, 30, 0, 20, &frame_start);
  std::string whole = slurp(path);
  // The writer's destructor ends the frame: what a killed process leaves is the file up to the
  // last flush.
  REQUIRE(whole.size() > ends.back());
  std::string cut_path = temp_path("flushes-part.hsnap");
  size_t prev = 0;
  for (uint64_t cut = frame_start; cut <= ends.back(); ++cut) {
    spit(cut_path, whole.substr(0, cut));
    auto r = open_capture(cut_path);
    auto got = read_markers(*r);
    for (size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == i);  // a prefix, in order
    CHECK(got.size() >= prev);  // a later cut never reads less
    prev = got.size();
    auto at_end = std::find(ends.begin(), ends.end(), cut);
    if (at_end != ends.end()) {
      // Cut where a flush ended: every record flushed so far, nothing reported lost.
      CHECK(got.size() == size_t(at_end - ends.begin() + 1) * 30);
      CHECK(r->problems().empty());
      CHECK(!r->truncated());
    } else if (cut > ends[0]) {
      size_t flushes_before = size_t(std::upper_bound(ends.begin(), ends.end(), cut) - ends.begin());
      CHECK(got.size() >= flushes_before * 30);
      CHECK(r->truncated());
      REQUIRE(!r->problems().empty());
      CHECK(r->problems().back().offset == frame_start);  // the cut frame's
    }
  }
  // The whole file: one frame of six flushes, ended by the writer's destructor.
  CHECK(check_reads_whole(path, 180)->frames_read() == 2);
  unlink(path.c_str());
  unlink(cut_path.c_str());
}

// Markers first..first+n-1, added to w.
void add_markers(CaptureFileWriter &w, int first, int n) {
  for (int i = first; i < first + n; ++i) {
    heapsnap::wire::Record m;
    m.mutable_marker()->set_time_ns(uint64_t(i));
    m.mutable_marker()->set_text("marker " + std::to_string(i) + " of a frame that spans flushes");
    w.add(m);
  }
}

TEST_CASE("reader: an unfinished frame before the open one loses only itself") {
  // What a snapshot child that died while writing its frames, then the killed process, leave: a
  // whole frame (markers 0-49), half a frame (markers 1000-1199), then the open frame's three
  // flushes (markers 50-109), cut where its last flush ended.
  std::string a_path = temp_path("open-a.hsnap"), b_path = temp_path("open-b.hsnap");
  uint64_t whole_end = 0, open_end = 0;
  {
    CaptureFileWriter w(a_path, 3, 0);
    heapsnap::wire::Record r;
    r.mutable_process()->set_pid(4242);
    w.add(r);
    add_markers(w, 0, 50);
    w.end_frame();
    whole_end = w.bytes_written();
    for (int f = 0; f < 3; ++f) {
      add_markers(w, 50 + 20 * f, 20);
      w.flush();
    }
    open_end = w.bytes_written();
  }
  uint64_t other_start = 0, other_end = 0;
  {
    CaptureFileWriter w(b_path, 3, 0);
    other_start = w.bytes_written();
    add_markers(w, 1000, 200);
    w.end_frame();
    other_end = w.bytes_written();
  }
  std::string a = slurp(a_path), b = slurp(b_path);
  uint64_t half = other_start + (other_end - other_start) / 2;
  std::string spliced = a.substr(0, whole_end) + b.substr(other_start, half - other_start) +
                        a.substr(whole_end, open_end - whole_end);
  spit(a_path, spliced);
  auto r = open_capture(a_path);
  auto got = read_markers(*r);
  REQUIRE(got.size() == 110);
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == i);
  REQUIRE(r->problems().size() == 1);
  CHECK(r->problems()[0].offset == whole_end);  // the unfinished frame, reported as damaged
  unlink(a_path.c_str());
  unlink(b_path.c_str());
}

TEST_CASE("reader: a frame cut where a flush ended, then another frame, keeps both (the tail guard's salvage)") {
  // What the shim's tail guard leaves when the writer died inside a flush: the file truncated to
  // where its last complete write ended (flush 2 of the open frame, markers 0-39), then a frame of
  // the guard's own with what was still pending (markers 40-69).
  std::string a_path = temp_path("salvage-a.hsnap"), b_path = temp_path("salvage-b.hsnap");
  uint64_t cut = 0;
  {
    CaptureFileWriter w(a_path, 3, 0);
    heapsnap::wire::Record r;
    r.mutable_process()->set_pid(4242);
    w.add(r);
    w.end_frame();
    for (int f = 0; f < 2; ++f) {
      add_markers(w, 20 * f, 20);
      w.flush();
    }
    cut = w.bytes_written();
    add_markers(w, 1000, 20);  // the flush the writer died in: truncated away
    w.flush();
  }
  uint64_t other_start = 0, other_end = 0;
  {
    CaptureFileWriter w(b_path, 3, 0);
    other_start = w.bytes_written();
    add_markers(w, 40, 30);
    w.end_frame();
    other_end = w.bytes_written();
  }
  std::string spliced = slurp(a_path).substr(0, cut) + slurp(b_path).substr(other_start, other_end - other_start);
  spit(a_path, spliced);
  auto r = open_capture(a_path);
  auto got = read_markers(*r);
  REQUIRE(got.size() == 70);
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == i);
  CHECK(r->problems().empty());  // nothing lost: the cut frame ends where a flush ended
  CHECK(!r->truncated());
  unlink(a_path.c_str());
  unlink(b_path.c_str());
}

TEST_CASE("reader: a flipped bit in a block header of the open last frame keeps the flushes before it") {
  // The file ends inside the open frame (nine flushes of 40 markers), whose checksum is not there
  // to check: the flushes before a damaged block header are read whole, a loss is reported, and
  // nothing after the damage gets through (each flush's FlushEnd hash: a flip that moved a block
  // by two bytes once decoded to markers 0-53 then 80-90, all parsing, before there were any).
  std::string path = temp_path("flip-open.hsnap");
  uint64_t frame_start = 0;
  std::vector<uint64_t> ends = write_flushed_markers(path, 9, 40, 0, 60, &frame_start);
  std::string whole = slurp(path).substr(0, ends.back());
  // The block headers: the first after the frame header, each next one after the previous block.
  std::vector<uint64_t> headers;
  {
    size_t at = ZSTD_frameHeaderSize(whole.data() + frame_start, whole.size() - frame_start);
    REQUIRE(!ZSTD_isError(at));
    for (uint64_t h = frame_start + at; h + 3 <= whole.size();) {
      headers.push_back(h);
      auto *b = reinterpret_cast<const uint8_t *>(whole.data() + h);
      uint32_t bh = uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16;
      h += 3 + (((bh >> 1) & 3) == 1 ? 1 : bh >> 3);
    }
  }
  REQUIRE(headers.size() >= 9);
  int flips = 0, looks_whole = 0;
  for (uint64_t h : headers) {
    // The flushes that ended before this block: their markers must all be read.
    size_t intact = size_t(std::upper_bound(ends.begin(), ends.end(), h) - ends.begin()) * 40;
    for (int bit = 0; bit < 24; ++bit) {
      std::string bad = whole;
      bad[h + bit / 8] = char(bad[h + bit / 8] ^ (1 << (bit % 8)));
      spit(path, bad);
      auto r = open_capture(path);
      auto got = read_markers(*r);
      ++flips;
      if (!ZSTD_isError(ZSTD_findFrameCompressedSize(bad.data() + frame_start, bad.size() - frame_start))) {
        // The flip made the frame look whole (the "last block" bit, or a size that lands on
        // something that parses as a last block and a checksum): it fails to decompress or its
        // checksum, and a damaged whole frame is skipped whole, as in format 2.
        CHECK(!r->problems().empty());
        ++looks_whole;
        continue;
      }
      REQUIRE(got.size() >= intact);
      for (size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == i);  // a prefix: nothing invented
      CHECK(got.size() % 40 == 0);                                     // whole flushes
      if (got.size() < 360) CHECK(!r->problems().empty());
    }
  }
  CHECK(flips >= 9 * 24);
  CHECK(looks_whole < flips / 4);  // most flips leave it cut: the case this test is about
  unlink(path.c_str());
}

TEST_CASE("reader: frames that span flushes and hold more than the writer's frame size") {
  // 3 flushes of 40,000 markers of 100 bytes: about 12 MB in one frame, beyond the 8 MB the
  // reader's buffer starts at; then a second frame of 2 flushes.
  std::string path = temp_path("big-flushes.hsnap");
  write_flushed_markers(path, 5, 40000, 3, 100);
  auto r = open_capture(path);
  auto got = read_markers(*r);
  REQUIRE(got.size() == 200000);
  for (size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == i);
  CHECK(r->problems().empty());
  CHECK(r->frames_read() == 3);
  unlink(path.c_str());
}

TEST_CASE("reader: a flipped byte inside a frame loses that frame only, with its offset") {
  std::string path = temp_path("flip.hsnap");
  auto ends = write_markers(path, 5, 40);
  std::string data = slurp(path);
  uint64_t start = ends[1], end = ends[2];  // the third frame
  int tried = 0;
  for (uint64_t at = start + 8; at < end; at += (end - start) / 7) {
    std::string bad = data;
    bad[at] = char(bad[at] ^ 0x5a);
    spit(path, bad);
    auto r = open_capture(path);
    auto got = read_markers(*r);
    // Frames 1, 2, 4, 5 survive intact; the damaged one is reported, never half-read as garbage.
    CHECK(got.size() >= 160);
    for (size_t i = 1; i < got.size(); ++i) CHECK(got[i] > got[i - 1]);
    CHECK(!r->problems().empty());
    ++tried;
  }
  CHECK(tried >= 5);
  unlink(path.c_str());
}

TEST_CASE("reader: refuses a newer major version and a foreign file, with a clear message") {
  std::string path = temp_path("newer.hsnap");
  { CaptureFileWriter w(path, heapsnap::capture::kReaderMajor + 1, 3); }
  std::string err;
  CHECK(!CaptureReader::open(path, &err));
  CHECK(err.find(std::to_string(heapsnap::capture::kReaderMajor + 1) + ".3 is newer") != std::string::npos);
  spit(path, "this is not a capture at all, just text");
  CHECK(!CaptureReader::open(path, &err));
  CHECK(err.find("offset 0x0") != std::string::npos);
  spit(path, "short");
  CHECK(!CaptureReader::open(path, &err));
  CHECK(err.find("too short") != std::string::npos);
  unlink(path.c_str());
}

TEST_CASE("reader: garbage between frames is skipped and reported") {
  std::string path = temp_path("garbage.hsnap");
  auto ends = write_markers(path, 3, 10);
  std::string data = slurp(path);
  std::string bad = data.substr(0, ends[0]) + std::string(333, 'x') + data.substr(ends[0]);
  spit(path, bad);
  auto r = open_capture(path);
  CHECK(read_markers(*r).size() == 30);
  REQUIRE(r->problems().size() == 1);
  CHECK(r->problems()[0].offset == ends[0]);
  CHECK(r->bytes_skipped() == 333);
  unlink(path.c_str());
}

TEST_CASE("reader: the read-ahead thread gives the same records, problems and figures") {
  std::string path = temp_path("ahead.hsnap");
  auto ends = write_markers(path, 12, 30);
  std::string data = slurp(path);
  // Damage of every kind the scan handles: garbage between frames, a frame repeated byte for
  // byte, a flipped byte inside a frame, and a cut inside the last one.
  std::string bad = data.substr(0, ends[1]) + std::string(100, 'x') +
                    data.substr(ends[1], ends[3] - ends[1]) + data.substr(ends[2], ends[3] - ends[2]) +
                    data.substr(ends[3], ends[11] - 20 - ends[3]);
  bad[ends[5] + 150 + (ends[6] - ends[5]) / 2] ^= 0x41;
  spit(path, bad);
  using Mode = CaptureReader::ReadAhead;
  struct Seen {
    std::vector<uint64_t> markers;
    std::vector<std::pair<uint64_t, std::string>> problems;
    uint64_t skipped, frames;
    bool truncated;
  };
  auto read = [&](Mode m, int passes) {
    auto r = open_capture(path);
    r->set_read_ahead(m);
    Seen out;
    for (int i = 0; i < passes; ++i) out.markers = read_markers(*r);
    for (auto &p : r->problems()) out.problems.push_back({p.offset, p.what});
    out.skipped = r->bytes_skipped();
    out.frames = r->frames_read();
    out.truncated = r->truncated();
    return out;
  };
  Seen one = read(Mode::never, 1), two = read(Mode::always, 1);
  CHECK(one.markers == two.markers);
  CHECK(one.problems == two.problems);
  CHECK(one.skipped == two.skipped);
  CHECK(one.frames == two.frames);
  CHECK(one.truncated == two.truncated);
  CHECK(one.truncated);
  CHECK(one.problems.size() >= 4);
  CHECK(one.markers.size() >= 8 * 30);
  // A second pass over the same reader reads it all again.
  Seen again = read(Mode::always, 2);
  CHECK(again.markers == one.markers);
  // Stopping early: the thread is told to quit and the rest is not read.
  auto r = open_capture(path);
  r->set_read_ahead(Mode::always);
  int seen = 0;
  r->for_each_record([&](const heapsnap::wire::Record &rec, const heapsnap::capture::RecordPos &) {
    return !(rec.has_marker() && ++seen == 45);
  });
  CHECK(seen == 45);
  unlink(path.c_str());
}

// Frame hints: a reader that wants only Process records steps over the frames of markers alone.
namespace {
int count_processes(CaptureReader &r) {
  int n = 0;
  r.set_record_filter([](uint32_t f) { return f == heapsnap::wire::Record::kProcessFieldNumber; });
  r.for_each_record([&](const heapsnap::wire::Record &rec, const heapsnap::capture::RecordPos &) {
    n += rec.has_process();
    return true;
  });
  return n;
}
}  // namespace

TEST_CASE("frame hints: the fields of a frame's records") {
  heapsnap::wire::Record a, b;
  a.mutable_process()->set_pid(1);
  b.mutable_marker()->set_text("x");
  std::string bytes;
  for (auto *r : {&a, &b}) {
    std::string body = r->SerializeAsString();
    bytes.push_back(char(body.size()));
    bytes += body;
  }
  const auto *p = reinterpret_cast<const uint8_t *>(bytes.data());
  CHECK(heapsnap_format::record_fields(p, bytes.size()) ==
        (heapsnap_format::field_bit(heapsnap::wire::Record::kProcessFieldNumber) |
         heapsnap_format::field_bit(heapsnap::wire::Record::kMarkerFieldNumber)));
  // A length past the end: every field (a reader then steps over nothing).
  CHECK(heapsnap_format::record_fields(p, bytes.size() - 1) == ~uint64_t(0));
  CHECK(heapsnap_format::record_fields(p, 0) == 0);
}

TEST_CASE("frame hints: frames with nothing wanted are stepped over, everything else is read as before") {
  std::string path = temp_path("hinted.hsnap");
  write_markers(path, 5, 40, true);
  {
    auto r = open_capture(path);
    CHECK(count_processes(*r) == 1);
    CHECK(r->frames_stepped_over() == 4);  // the first frame holds the Process record
    CHECK(r->frames_read() == 1);
    CHECK(r->problems().empty());
  }
  {
    // No filter: every frame read, every marker there (an older reader skips the hints alike).
    auto r = check_reads_whole(path, 200);
    CHECK(r->frames_stepped_over() == 0);
  }
  unlink(path.c_str());
}

TEST_CASE("frame hints: a damaged frame is read, and reported, whatever its hint says") {
  std::string path = temp_path("hinted-flip.hsnap");
  auto ends = write_markers(path, 5, 40, true);
  std::string data = slurp(path);
  // The third frame: its hint's 32 bytes, then the frame; a byte flipped in the frame's middle.
  uint64_t start = ends[1] + heapsnap_format::kFrameHintBytes, end = ends[2];
  std::string bad = data;
  bad[(start + end) / 2] = char(bad[(start + end) / 2] ^ 0x5a);
  spit(path, bad);
  {
    auto r = open_capture(path);
    CHECK(count_processes(*r) == 1);
    CHECK(r->frames_stepped_over() == 3);
    CHECK(!r->problems().empty());
  }
  // A damaged hint (here the size it names) is reported at its offset, and ignored: the frame
  // after it is read, whole.
  bad = data;
  uint64_t size;
  memcpy(&size, bad.data() + ends[1] + 16, 8);
  size += 1;
  memcpy(bad.data() + ends[1] + 16, &size, 8);
  spit(path, bad);
  {
    auto r = open_capture(path);
    CHECK(count_processes(*r) == 1);
    CHECK(r->frames_stepped_over() == 3);
    CHECK(r->frames_read() == 2);
    REQUIRE(r->problems().size() == 1);
    CHECK(r->problems()[0].offset == ends[1]);
    CHECK(r->problems()[0].what.find("frame hint") != std::string::npos);
    r = open_capture(path);
    CHECK(read_markers(*r).size() == 200);
  }
  // Hint and check both rewritten to name a wrong size: the hint passes its own check but does
  // not describe its frame; said, and the frame is read.
  bad = data;
  heapsnap_format::FrameHint h;
  REQUIRE(heapsnap_format::get_frame_hint(reinterpret_cast<const uint8_t *>(bad.data()) + ends[1],
                                          heapsnap_format::kFrameHintBytes, &h) == heapsnap_format::HintRead::kHint);
  h.frame_size += 1;
  heapsnap_format::put_frame_hint(reinterpret_cast<uint8_t *>(bad.data()) + ends[1], h);
  spit(path, bad);
  {
    auto r = open_capture(path);
    CHECK(count_processes(*r) == 1);
    CHECK(r->frames_read() == 2);
    REQUIRE(r->problems().size() == 1);
    CHECK(r->problems()[0].what.find("does not describe") != std::string::npos);
  }
  // A hint repeated (a duplicated frame, as damaged_cases makes): the first describes no frame.
  bad = data.substr(0, ends[1] + heapsnap_format::kFrameHintBytes) + data.substr(ends[1]);
  spit(path, bad);
  {
    auto r = open_capture(path);
    CHECK(count_processes(*r) == 1);
    CHECK(r->frames_stepped_over() == 4);
    REQUIRE(r->problems().size() == 1);
    CHECK(r->problems()[0].offset == ends[1]);
    CHECK(r->problems()[0].what.find("does not describe") != std::string::npos);
  }
  unlink(path.c_str());
}
