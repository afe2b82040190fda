#include "snapshot/spare_capacity.h"

#include <algorithm>

namespace heapsnap::snapshot {
namespace {

constexpr uint32_t kSaturatedOffset = 0xffffffffu;  // the child's cap for offsets past 4 GiB

struct Candidate {
  uint32_t buffer;
  uint64_t size;
  size_t header;  // index into s.vectors
};

// The block whose edge group holds edge k.
uint32_t source_of_edge(const HeapSnapshot &s, uint32_t k) {
  auto it = std::upper_bound(s.edge_begin.begin(), s.edge_begin.end(), k);
  return uint32_t(it - s.edge_begin.begin()) - 1;
}

}  // namespace

SpareCapacity spare_capacity_edges(const HeapSnapshot &s) {
  SpareCapacity out;
  out.triples = s.vectors.size();
  const size_t edges = s.edge_target.size();
  if (s.vectors.empty() || s.edge_offset.size() != edges || s.edge_begin.size() != size_t(s.blocks()) + 1 ||
      s.edge_interior.size() != edges)
    return out;
  std::vector<Candidate> cand;
  for (size_t i = 0; i < s.vectors.size(); ++i) {
    const HeapSnapshot::VectorHeader &v = s.vectors[i];
    uint32_t buffer;
    if (v.from_root) {
      if (v.pointer >= s.root_target.size() || s.root_interior[v.pointer]) continue;
      buffer = s.root_target[v.pointer];
    } else {
      if (v.pointer >= edges || s.edge_interior[v.pointer]) continue;
      buffer = s.edge_target[v.pointer];
    }
    // (Size 0 is left alone: a std::deque's start iterator, cur == first and last at the end of
    // its first chunk, reads as an empty vector of the chunk, whose elements from cur on live.)
    if (buffer >= s.blocks() || v.capacity != s.size[buffer] || v.size == 0 || v.size >= v.capacity) continue;
    if (!s.type.empty() && s.type[buffer]) continue;
    cand.push_back({buffer, v.size, i});
  }
  // One owner per buffer: a buffer two triples name is left alone.
  std::sort(cand.begin(), cand.end(), [](const Candidate &a, const Candidate &b) { return a.buffer < b.buffer; });
  std::vector<Candidate> one;
  for (size_t i = 0; i < cand.size();) {
    size_t j = i;
    while (j < cand.size() && cand[j].buffer == cand[i].buffer) ++j;
    if (j - i == 1) one.push_back(cand[i]);
    i = j;
  }
  // A header whose own word is in another candidate's spare capacity is stale itself.
  auto live_of = [&](uint32_t block) -> const Candidate * {
    auto it = std::lower_bound(one.begin(), one.end(), block, [](const Candidate &c, uint32_t b) { return c.buffer < b; });
    return it != one.end() && it->buffer == block ? &*it : nullptr;
  };
  std::vector<Candidate> confirmed;
  for (const Candidate &c : one) {
    const HeapSnapshot::VectorHeader &v = s.vectors[c.header];
    if (!v.from_root) {
      const uint32_t owner = source_of_edge(s, v.pointer);
      const Candidate *o = live_of(owner);
      const uint32_t at = s.edge_offset[v.pointer];
      if (o && o->buffer != c.buffer && at != kSaturatedOffset && at >= o->size) continue;
    }
    confirmed.push_back(c);
  }
  for (const Candidate &c : confirmed) {
    for (uint32_t k = s.edge_begin[c.buffer]; k < s.edge_begin[c.buffer + 1]; ++k) {
      const uint32_t at = s.edge_offset[k];
      if (at == kSaturatedOffset || at < c.size) continue;  // (a saturated offset: not known to be past)
      if (out.drop.empty()) out.drop.assign(edges, false);
      out.drop[k] = true;
      ++out.dropped;
    }
    ++out.buffers;
  }
  return out;
}

}  // namespace heapsnap::snapshot
