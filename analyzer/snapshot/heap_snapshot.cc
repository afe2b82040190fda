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
         root_target.capacity() * 4 + root_offset.capacity() * 8 + root_interior.capacity() / 8 + type.capacity() * 4 +
         vectors.capacity() * sizeof(VectorHeader);
}

}  // namespace heapsnap::snapshot
