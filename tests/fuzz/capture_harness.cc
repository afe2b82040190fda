#include "capture_harness.h"

#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <string_view>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "capture/capture_reader.h"
#include "capture/stack_tree.h"
#include "replay/capture_summary.h"
#include "replay/replay.h"
#include "replay/stack_symbolizer.h"
#include "snapshot/heap_snapshot.h"
#include "snapshot/object_graph.h"
#include "snapshot/reachability.h"
#include "../graph/snapshot_compare.h"

namespace heapsnap::fuzz {
namespace {

// The reader takes a path and maps the file: one memfd, rewritten for every input.
struct MemFile {
  int fd = -1;
  std::string path;
  MemFile() {
    fd = memfd_create("heapsnap-fuzz", MFD_CLOEXEC);
    if (fd < 0) {
      perror("memfd_create");
      abort();
    }
    path = "/proc/self/fd/" + std::to_string(fd);
  }
  void set(const void *data, size_t n) {
    if (ftruncate(fd, 0) != 0) abort();
    const char *p = static_cast<const char *>(data);
    for (size_t done = 0; done < n;) {
      ssize_t w = pwrite(fd, p + done, n - done, off_t(done));
      if (w <= 0) abort();
      done += size_t(w);
    }
  }
};

MemFile &mem_file() {
  static MemFile f;
  return f;
}

// Keeps the optimizer from dropping work whose result is otherwise unused.
volatile uint64_t g_sink;

// Every snapshot the capture lists (a few at most): each decoder's load compared (aborts on a
// difference), then what snapshots, unreachable, top-retainers and dominators load and compute.
void run_snapshots(const std::string &path) {
  std::string err;
  auto reader = capture::CaptureReader::open(path, &err);
  if (!reader) return;
  std::vector<snapshot::SnapshotInfo> list = snapshot::list_snapshots(*reader);
  uint64_t sink = list.size();
  for (size_t i = 0; i < list.size() && i < 4; ++i) {
    // The raw block/edge decoder, on one thread and on lanes, gives what libprotobuf's does.
    snapshot::testing::DecodeComparison c = snapshot::testing::compare_decoders(path, list[i].index);
    if (!c.difference.empty()) {
      fprintf(stderr, "snapshot %u: %s\n", list[i].index, c.difference.c_str());
      abort();
    }
    auto r = capture::CaptureReader::open(path, &err);  // load_snapshot sets a record filter
    if (!r) abort();
    snapshot::HeapSnapshot s;
    if (!snapshot::load_snapshot(*r, list[i].index, &s, &err)) continue;
    sink += s.memory_bytes() + s.find(s.addr.empty() ? 0 : s.addr.back());
    for (bool interior : {true, false}) {
      snapshot::Reachability reach = snapshot::classify(s, interior);
      sink += reach.totals.blocks[int(snapshot::Reach::kDefinite)];
    }
    snapshot::ObjectGraph g = snapshot::build_object_graph(s, true, true);
    sink += g.total_bytes();
    for (uint32_t node = 1; node < g.csr.num_nodes && node < 64; ++node)
      sink += snapshot::top_dominator(g, node);
  }
  g_sink = sink;
}

void run_path(const std::string &path) {
  std::string err;
  uint64_t sink = 0;
  {
    auto reader = capture::CaptureReader::open(path, &err);
    if (!reader) return;  // bad header: nothing else reads it either
    replay::CaptureSummary s = replay::summarize(*reader);
    sink += s.records + s.problems.size() + s.sampled_allocs + s.threads;
  }
  // The reader with its read-ahead thread and without it: the same records (a hash of their
  // sizes and places) and the same problems, or the harness aborts.
  uint64_t seen[2] = {0, 0};
  size_t problems[2] = {0, 0};
  for (int m = 0; m < 2; ++m) {
    auto rd = capture::CaptureReader::open(path, &err);
    if (!rd) abort();
    rd->set_read_ahead(m ? capture::CaptureReader::ReadAhead::always : capture::CaptureReader::ReadAhead::never);
    rd->for_each_record([&](const wire::Record &rec, const capture::RecordPos &pos) {
      seen[m] = seen[m] * 1000003 + rec.ByteSizeLong() * 31 + pos.frame_offset * 7 + pos.offset_in_frame;
      return true;
    });
    problems[m] = rd->problems().size();
  }
  if (seen[0] != seen[1] || problems[0] != problems[1]) abort();
  sink += seen[0];

  // The replay with event batches decoded on the read-ahead thread and without it: the same
  // figures, or the harness aborts.
  {
    using Mode = capture::CaptureReader::ReadAhead;
    const Mode modes[3] = {Mode::never, Mode::always, Mode::after_first};
    replay::ReplayResult rr[3];
    for (int m = 0; m < 3; ++m) {
      auto rd = capture::CaptureReader::open(path, &err);
      if (!rd) abort();
      rd->set_read_ahead(modes[m]);
      rr[m] = replay::replay(*rd);
    }
    for (int m = 1; m < 3; ++m)
      if (rr[0].events != rr[m].events || rr[0].problems.size() != rr[m].problems.size() ||
          rr[0].sampled_peak_event != rr[m].sampled_peak_event || rr[0].unknown_frees != rr[m].unknown_frees ||
          rr[0].live_blocks_peak != rr[m].live_blocks_peak)
        abort();
    sink += rr[0].events;
  }

  // What every replay command does: two passes (find the peak, then take it).
  replay::ReplayResult r = replay::replay_with_peak(path, &err);
  if (!err.empty()) abort();  // the header read once already: a second open cannot fail
  sink += r.events + r.problems.size() + r.timeline.size() + r.unknown_frees;

  // The tree itself: every node's frames (bounded work: the walk is quadratic in depth).
  std::vector<uint64_t> frames;
  uint64_t budget = 1u << 22;
  for (uint32_t id = 1; id <= r.stacks.nodes() && budget > 0; ++id) {
    r.stacks.frames(id, &frames);
    budget -= std::min<uint64_t>(budget, frames.size() + 1);
    if (!frames.empty()) sink += frames.front();
  }
  r.stacks.frames(0, &frames);
  r.stacks.frames(uint32_t(r.stacks.nodes() + 1), &frames);
  r.stacks.frames(UINT32_MAX, &frames);

  // The stack symbolizer over the capture's own modules, without files behind them.
  std::vector<replay::ModuleRecord> modules = r.modules;
  for (auto &m : modules) m.path.clear();
  symbolize::SymbolizerOptions so;
  so.debug_dirs.clear();
  replay::StackSymbolizer sym(modules, so);
  // As top-allocators, leaks and peak walk it: every stack with figures.
  for (uint32_t id = 1; id < r.by_stack.size(); ++id) {
    const auto &f = r.by_stack[id];
    if (f.unused() && f.peak_calls <= 0) continue;
    for (const auto &d : sym.stack(r.stacks, id)) sink += d.label().size() + d.label(false).size();
  }
  g_sink = sink;
}

ZSTD_CCtx *cctx() {
  static ZSTD_CCtx *c = [] {
    ZSTD_CCtx *c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 1);
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
    return c;
  }();
  return c;
}

}  // namespace

void quiet_protobuf_logs() { google::protobuf::SetLogHandler(nullptr); }

void run_capture_bytes(const uint8_t *data, size_t size, bool snapshots) {
  MemFile &f = mem_file();
  f.set(data, size);
  run_path(f.path);
  if (snapshots) run_snapshots(f.path);
}

std::string wrap_record_stream(const uint8_t *data, size_t size) {
  std::string out(24, '\0');
  uint32_t magic = 0x184D2A5E, len = 16;
  uint16_t major = 1, minor = 0;
  memcpy(&out[0], &magic, 4);
  memcpy(&out[4], &len, 4);
  memcpy(&out[8], "HEAPSNAP", 8);
  memcpy(&out[16], &major, 2);
  memcpy(&out[18], &minor, 2);
  std::string_view in(reinterpret_cast<const char *>(data), size), cut(kFrameCut);
  unsigned frames = 0;
  for (size_t start = 0;;) {
    size_t at = in.find(cut, start);
    std::string_view piece = in.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start);
    // Every other frame as the shim writes a frame that spans flushes (format 3): a first flush
    // of half of it, then the rest, and no size declared; the others in one pass, with their size.
    size_t half = ++frames % 2 ? 0 : piece.size() / 2;
    ZSTD_inBuffer in[2] = {{piece.data(), half, 0}, {piece.data() + half, piece.size() - half, 0}};
    for (int part = half ? 0 : 1; part < 2; ++part) {
      for (size_t left = 1; left;) {
        size_t base = out.size();
        out.resize(base + ZSTD_CStreamOutSize());
        ZSTD_outBuffer o = {&out[base], out.size() - base, 0};
        left = ZSTD_compressStream2(cctx(), &o, &in[part], part ? ZSTD_e_end : ZSTD_e_flush);
        if (ZSTD_isError(left)) abort();
        out.resize(base + o.pos);
      }
    }
    if (at == std::string_view::npos) break;
    start = at + cut.size();
  }
  return out;
}

std::string delimited_to_stream(const uint8_t *data, size_t size) {
  std::string_view in(reinterpret_cast<const char *>(data), size);
  std::string out;
  out.reserve(size + size / 8 + 16);
  const std::string_view rec_cut(kRecordCut), frame_cut(kFrameCut);
  size_t start = 0;
  while (start <= in.size()) {
    size_t r = in.find(rec_cut, start), f = in.find(frame_cut, start);
    size_t end = std::min({r, f, in.size()});
    std::string_view body = in.substr(start, end - start);
    if (!body.empty()) {
      for (uint64_t n = body.size(); ; n >>= 7) {
        if (n < 0x80) {
          out.push_back(char(n));
          break;
        }
        out.push_back(char(uint8_t(n) | 0x80));
      }
      out.append(body);
    }
    if (end == in.size()) break;
    if (end == f) {
      out.append(frame_cut);
      start = end + frame_cut.size();
    } else {
      start = end + rec_cut.size();
    }
  }
  return out;
}

void run_delimited_records(const uint8_t *data, size_t size, bool snapshots) {
  std::string stream = delimited_to_stream(data, size);
  run_record_stream(reinterpret_cast<const uint8_t *>(stream.data()), stream.size(), snapshots);
}

void run_record_stream(const uint8_t *data, size_t size, bool snapshots) {
  std::string file = wrap_record_stream(data, size);
  run_capture_bytes(reinterpret_cast<const uint8_t *>(file.data()), file.size(), snapshots);
}

}  // namespace heapsnap::fuzz
