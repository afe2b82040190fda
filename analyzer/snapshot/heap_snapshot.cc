#include "snapshot/heap_snapshot.h"

#include <algorithm>
#include <chrono>

namespace heapsnap::snapshot {

const char *trigger_name(int t) {
  switch (t) {
    case wire::TRIGGER_EXIT: return "exit";
    case wire::TRIGGER_SIGNAL: return "signal";
    case wire::TRIGGER_PERIODIC: return "periodic";
    case wire::TRIGGER_HEAP_THRESHOLD: return "heap-threshold";
    case wire::TRIGGER_RSS_THRESHOLD: return "rss-threshold";
    case wire::TRIGGER_CLIENT: return "client";
    case wire::TRIGGER_BEFORE_DESTRUCTORS: return "before-destructors";
    case wire::TRIGGER_PEAK: return "peak";
    case wire::TRIGGER_GROWTH: return "growth";
    default: return "?";
  }
}

int trigger_from_name(const std::string &name) {
  for (int t = 0; t <= 16; ++t)
    if (name == trigger_name(t) && name != "?") return t;
  return -1;
}

int RootRange::frame_of(uint64_t addr) const {
  auto it = std::upper_bound(frame_cfa.begin(), frame_cfa.end(), addr);
  return it == frame_cfa.end() ? -1 : int(it - frame_cfa.begin());
}

const char *root_kind_name(int k) {
  switch (k) {
    case kGlobal: return "global";
    case kStack: return "stack";
    case kRegisters: return "registers";
    case kTls: return "tls";
    case kAnon: return "anonymous";
    default: return "?";
  }
}

const char *register_name(uint64_t offset) {
  static const char *const kNames[] = {
      "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rdi", "rsi", "rbp", "rbx", "rdx", "rax", "rcx", "rsp", "rip",
      "xmm0", "xmm0+8", "xmm1", "xmm1+8", "xmm2", "xmm2+8", "xmm3", "xmm3+8", "xmm4", "xmm4+8", "xmm5", "xmm5+8",
      "xmm6", "xmm6+8", "xmm7", "xmm7+8", "xmm8", "xmm8+8", "xmm9", "xmm9+8", "xmm10", "xmm10+8", "xmm11", "xmm11+8",
      "xmm12", "xmm12+8", "xmm13", "xmm13+8", "xmm14", "xmm14+8", "xmm15", "xmm15+8"};
  return offset % 8 == 0 && offset / 8 < sizeof(kNames) / sizeof(kNames[0]) ? kNames[offset / 8] : "?";
}

bool snapshot_note(const wire::Marker &m, std::string *text) {
  static const std::string kPrefix = "heapsnap: ";
  const std::string &t = m.text();
  if (m.tid() != 0 || t.rfind(kPrefix, 0) != 0) return false;
  if (t.rfind("heapsnap: snapshot not taken", 0) != 0 && t.find("at-peak snapshot") == std::string::npos &&
      t.rfind("heapsnap: growth snapshots", 0) != 0)
    return false;
  *text = t.substr(kPrefix.size());
  return true;
}

bool snapshot_note_is_warning(const std::string &n) {
  return n.find("not taken") != std::string::npos || n.rfind("no at-peak", 0) == 0 || n.find("lost") != std::string::npos;
}

std::vector<SnapshotInfo> list_snapshots(capture::CaptureReader &reader, std::vector<std::string> *notes) {
  std::vector<SnapshotInfo> out;
  auto get = [&](uint32_t index) -> SnapshotInfo & {
    for (auto &s : out)
      if (s.index == index) return s;
    out.push_back(SnapshotInfo{});
    out.back().index = index;
    return out.back();
  };
  // Only the Begin and End records are parsed; the blocks and edges in between are skipped.
  reader.set_record_filter([notes](uint32_t f) {
    return f == wire::Record::kSnapshotBegin || f == wire::Record::kSnapshotEnd || (notes && f == wire::Record::kMarker);
  });
  reader.for_each_record([&](const wire::Record &r, const capture::RecordPos &) {
    if (r.has_marker()) {
      std::string text;
      if (notes && snapshot_note(r.marker(), &text)) notes->push_back(std::move(text));
    } else if (r.has_snapshot_begin()) {
      const auto &b = r.snapshot_begin();
      SnapshotInfo &s = get(b.index());
      s.have_begin = true;
      s.time_ns = b.time_ns();
      s.trigger = b.trigger();
      s.label = b.label();
      s.pause_ns = b.pause_ns();
      s.totals = b.totals();
    } else if (r.has_snapshot_end()) {
      SnapshotInfo &s = get(r.snapshot_end().index());
      s.have_end = true;
      s.end = r.snapshot_end();
    }
    return true;
  });
  reader.set_record_filter(nullptr);
  std::sort(out.begin(), out.end(), [](const SnapshotInfo &a, const SnapshotInfo &b) { return a.index < b.index; });
  return out;
}

uint64_t WideValues::at(uint64_t index) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), index,
                             [](const Entry &e, uint64_t i) { return e.index < i; });
  return it != entries_.end() && it->index == index ? it->value : 0;
}

void AddressColumn::reserve(size_t n) {
  offset_.reserve(n);
  base_.reserve((n >> kChunkBits) + 1);
}

size_t AddressColumn::upper_bound(uint64_t a) const {
  // The chunk bases are the addresses of blocks 0, 256, 512...: find the chunk first.
  auto chunk = std::upper_bound(base_.begin(), base_.end(), a);
  if (chunk == base_.begin()) return 0;
  size_t lo = size_t(chunk - base_.begin() - 1) << kChunkBits;
  size_t hi = std::min(size(), lo + kChunkMask + 1);
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if ((*this)[mid] <= a)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

size_t AddressColumn::memory_bytes() const {
  return base_.capacity() * 8 + offset_.capacity() * 4 + wide_.memory_bytes();
}

uint32_t SiteColumn::intern(uint64_t site) {
  if (site == 0) {
    if (zero_index_ == UINT32_MAX) {
      zero_index_ = uint32_t(sites_.size());
      sites_.push_back(0);
    }
    return zero_index_;
  }
  uint32_t &slot = lookup_[site];
  if (slot == 0) {
    sites_.push_back(site);
    slot = uint32_t(sites_.size());  // index + 1: 0 means "new"
  }
  return slot - 1;
}

uint32_t HeapSnapshot::find(uint64_t a) const {
  size_t it = addr.upper_bound(a);
  if (it == 0) return UINT32_MAX;
  uint32_t b = uint32_t(it - 1);
  return a < addr[b] + std::max<uint64_t>(size[b], 1) ? b : UINT32_MAX;
}

size_t HeapSnapshot::memory_bytes() const {
  return addr.memory_bytes() + size.memory_bytes() + call_site.memory_bytes() + id.capacity() * 8 +
         (stack.capacity() + time_ms.capacity() + pool.capacity()) * 4 + edge_begin.capacity() * 4 +
         edge_target.capacity() * 4 + edge_offset.capacity() * 4 + edge_interior.capacity() / 8 +
         root_target.capacity() * 4 + root_offset.capacity() * 8 + root_interior.capacity() / 8 + type.capacity() * 4;
}

bool load_snapshot(capture::CaptureReader &reader, uint32_t index, HeapSnapshot *out, std::string *error,
                   const LoadOptions &opts) {
  const auto t0 = std::chrono::steady_clock::now();
  HeapSnapshot &s = *out;
  s = HeapSnapshot{};
  s.info.index = index;
  bool found = false;
  uint64_t last_source = 0;
  bool any_source = false;
  std::string err;
  auto fail = [&](const capture::RecordPos &pos, const std::string &what) {
    if (err.empty()) err = "snapshot " + std::to_string(index) + ", record in frame at offset " +
                           std::to_string(pos.frame_offset) + ": " + what;
  };
  reader.set_record_filter([](uint32_t f) {
    return (f >= wire::Record::kSnapshotBegin && f < wire::Record::kSnapshotContents) || f == wire::Record::kSnapshotTypes;
  });
  // Capacity hint from the exact live-block count in the Begin record, bounded by what the file
  // could possibly describe (a hostile count must not drive a giant allocation).
  auto reserve = [&](uint64_t blocks) {
    uint64_t cap = std::min<uint64_t>(blocks, reader.file_size() * 4);
    s.addr.reserve(cap);
    s.size.reserve(cap);
    s.call_site.reserve(cap);
    s.stack.reserve(cap);
    if (opts.identity) {
      s.id.reserve(cap);
      s.time_ms.reserve(cap);
      s.pool.reserve(cap);
    }
  };
  reader.for_each_record([&](const wire::Record &r, const capture::RecordPos &pos) {
    switch (r.body_case()) {
      case wire::Record::kSnapshotBegin:
        if (r.snapshot_begin().index() != index) break;
        if (s.addr.empty()) reserve(r.snapshot_begin().totals().live_blocks());
        found = true;
        s.info.have_begin = true;
        s.info.time_ns = r.snapshot_begin().time_ns();
        s.info.trigger = r.snapshot_begin().trigger();
        s.info.label = r.snapshot_begin().label();
        s.info.pause_ns = r.snapshot_begin().pause_ns();
        s.info.totals = r.snapshot_begin().totals();
        break;
      case wire::Record::kSnapshotBlocks: {
        const auto &b = r.snapshot_blocks();
        if (b.index() != index) break;
        found = true;
        int n = b.addr_delta_size();
        if (!s.edge_begin.empty()) {
          // Edges are numbered against the blocks read before them: later blocks cannot follow.
          fail(pos, "block records after edge records");
          return false;
        }
        if (b.first_block() != s.addr.size() || b.size_size() != n || b.call_site_delta_size() != n ||
            b.stack_size() != n || b.id_size() != n || b.time_ms_size() != n) {
          fail(pos, "block columns out of order or of unequal length");
          return false;
        }
        uint64_t a = 0, site = 0;
        for (int i = 0; i < n; ++i) {
          a += uint64_t(b.addr_delta(i));
          site += uint64_t(b.call_site_delta(i));
          if (!s.addr.empty() && a <= s.addr.back()) {
            fail(pos, "block addresses not ascending");
            return false;
          }
          s.addr.push_back(a);
          s.size.push_back(b.size(i));
          s.call_site.push_back(site);
          s.stack.push_back(b.stack(i));
          if (opts.identity) {
            s.id.push_back(b.id(i));
            s.time_ms.push_back(b.time_ms(i));
            s.pool.push_back(i < b.pool_size() ? b.pool(i) : 0);
          }
        }
        break;
      }
      case wire::Record::kSnapshotEdges: {
        const auto &e = r.snapshot_edges();
        if (e.index() != index) break;
        if (s.edge_begin.empty()) {
          // One spare entry: the object graph takes these arrays over for its own offsets
          // (one more node, the super root) and targets (the root edges go in front).
          s.edge_begin.reserve(s.addr.size() + 2);
          s.edge_begin.assign(s.addr.size() + 1, 0);
          // About two edges per block in real heaps; the vector grows past that if needed.
          s.edge_target.reserve(std::min<uint64_t>(2 * s.addr.size() + 4096, reader.file_size() * 4));
        }
        if (e.from_delta_size() != e.count_size()) {
          fail(pos, "edge columns of unequal length");
          return false;
        }
        if (s.edge_target.size() + uint64_t(e.to_delta_size()) >= UINT32_MAX) {
          fail(pos, "more than 2^32 - 2 edges in one snapshot (not supported)");
          return false;
        }
        uint64_t source = e.base_block();
        int t = 0, interior_at = 0;
        uint64_t next_interior = e.interior_edge_size() ? e.interior_edge(0) : UINT64_MAX;
        uint64_t ordinal = 0;
        for (int k = 0; k < e.from_delta_size(); ++k) {
          source += e.from_delta(k);
          if (source >= s.addr.size() || (any_source && source <= last_source)) {
            fail(pos, "edge source " + std::to_string(source) + " out of range or order");
            return false;
          }
          // Sources without edges between the previous one and this one: empty ranges.
          for (uint64_t q = any_source ? last_source + 1 : 0; q <= source; ++q) s.edge_begin[q] = uint32_t(s.edge_target.size());
          any_source = true;
          last_source = source;
          uint32_t count = e.count(k);
          if (uint64_t(t) + count > uint64_t(e.to_delta_size()) || uint64_t(t) + count > uint64_t(e.offset_size())) {
            fail(pos, "edge targets run short");
            return false;
          }
          for (uint32_t c = 0; c < count; ++c, ++t, ++ordinal) {
            int64_t target = int64_t(source) + e.to_delta(t);
            if (target < 0 || uint64_t(target) >= s.addr.size()) {
              fail(pos, "edge target out of range");
              return false;
            }
            s.edge_target.push_back(uint32_t(target));
            if (opts.edge_offsets) s.edge_offset.push_back(e.offset(t));
            bool interior = ordinal == next_interior;
            if (interior) {
              ++interior_at;
              next_interior = interior_at < e.interior_edge_size() ? next_interior + e.interior_edge(interior_at) : UINT64_MAX;
            }
            s.edge_interior.push_back(interior);
          }
        }
        break;
      }
      case wire::Record::kSnapshotRoots: {
        const auto &rt = r.snapshot_roots();
        if (rt.index() != index) break;
        // (A heap without blocks may still have roots: a thread's stack is written even when it
        // points at nothing. Targets past the blocks are refused below.)
        if (rt.target_delta_size() != rt.root_offset_size()) {
          fail(pos, "root columns of unequal length");
          return false;
        }
        RootRange range{RootKind(rt.kind() <= 4 ? rt.kind() : 4), rt.detail(), rt.start(), rt.length(), rt.name(),
                        uint32_t(s.root_target.size()), uint32_t(rt.target_delta_size()), rt.thread_name(), {}, {}};
        // (Frames that do not go up the stack, or columns of unequal length, are dropped: they
        // only name the functions of stack roots.)
        if (rt.frame_cfa_size() == rt.frame_pc_size() && rt.frame_cfa_size() <= 4096 &&
            std::is_sorted(rt.frame_cfa().begin(), rt.frame_cfa().end())) {
          range.frame_cfa.assign(rt.frame_cfa().begin(), rt.frame_cfa().end());
          range.frame_pc.assign(rt.frame_pc().begin(), rt.frame_pc().end());
        }
        int64_t t = 0;
        uint64_t off = 0;
        int inter_at = 0;
        uint64_t next_inter = rt.interior_edge_size() ? rt.interior_edge(0) : UINT64_MAX;
        for (int i = 0; i < rt.target_delta_size(); ++i) {
          t += rt.target_delta(i);
          off += rt.root_offset(i);
          if (t < 0 || uint64_t(t) >= s.addr.size()) {
            fail(pos, "root target out of range");
            return false;
          }
          s.root_target.push_back(uint32_t(t));
          s.root_offset.push_back(off);
          bool interior = uint64_t(i) == next_inter;
          if (interior) {
            ++inter_at;
            next_inter = inter_at < rt.interior_edge_size() ? next_inter + rt.interior_edge(inter_at) : UINT64_MAX;
          }
          s.root_interior.push_back(interior);
        }
        s.roots.push_back(std::move(range));
        break;
      }
      case wire::Record::kSnapshotTypes: {
        const auto &t = r.snapshot_types();
        if (t.index() != index || !opts.types) break;
        if (t.first_type() != s.type_names.size() + 1 || t.name_size() != t.vtable_size() ||
            t.block_delta_size() != t.block_type_size()) {
          fail(pos, "type records out of order or of unequal length");
          return false;
        }
        for (const std::string &n : t.name()) s.type_names.push_back(n);
        if (t.block_delta_size() && s.type.empty()) s.type.assign(s.addr.size(), 0);
        uint64_t b = t.base_block();
        for (int i = 0; i < t.block_delta_size(); ++i) {
          b += t.block_delta(i);
          if (b >= s.type.size() || t.block_type(i) == 0 || t.block_type(i) > s.type_names.size()) {
            fail(pos, "a typed block or its type out of range");
            return false;
          }
          s.type[b] = t.block_type(i);
        }
        break;
      }
      case wire::Record::kSnapshotEnd:
        if (r.snapshot_end().index() != index) break;
        s.info.have_end = true;
        s.info.end = r.snapshot_end();
        return !s.info.have_begin;  // the Begin (written by the parent) may come after the End
      default: break;
    }
    return true;
  });
  if (!err.empty()) {
    *error = err;
    return false;
  }
  if (!found) {
    *error = "no snapshot " + std::to_string(index) + " in " + reader.path();
    return false;
  }
  if (s.edge_begin.empty()) {
    s.edge_begin.reserve(s.addr.size() + 2);
    s.edge_begin.assign(s.addr.size() + 1, 0);
  }
  for (uint64_t q = any_source ? last_source + 1 : 0; q <= s.addr.size(); ++q) s.edge_begin[q] = uint32_t(s.edge_target.size());
  s.call_site.done_loading();
  s.load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!s.info.have_end) *error = "snapshot " + std::to_string(index) + " has no end record (the snapshot child did not finish)";
  return true;
}

}  // namespace heapsnap::snapshot
