#include "snapshot/top_rows.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "graph/dominators.h"

namespace heapsnap::snapshot {

void RootChildren::build(const ObjectGraph &g) {
  kids.clear();
  rep.assign(g.num_roots, 0);
  for (uint32_t i = 0; i < g.num_roots; ++i) rep[i] = g.root_node(i);
  if (!g.num_roots) return;
  // Two sequential passes over the blocks' dominators (root objects are numbered after them):
  // count each root object's children, then place them. The blocks come in increasing order, so
  // this is the (object, node) order a sort would give, without sorting: a static container's
  // nodes are millions of direct children of their variable (a list node is reached from the
  // header both ways), and sorting them was a tenth of top-retainers' time at 10^7 blocks.
  const uint32_t *idom = g.dom.idom.data();
  std::vector<uint32_t> at(size_t(g.num_roots) + 1, 0);
  for (uint32_t v = 1; v <= g.num_blocks; ++v)
    if (idom[v] != graph::kNoIdom && g.is_root(idom[v])) ++at[g.root_object(idom[v]) + 1];
  for (size_t i = 1; i < at.size(); ++i) at[i] += at[i - 1];
  kids.resize(at.back());
  for (uint32_t v = 1; v <= g.num_blocks; ++v)
    if (idom[v] != graph::kNoIdom && g.is_root(idom[v])) kids[at[g.root_object(idom[v])]++] = {g.root_object(idom[v]), v};
  for (size_t i = 0; i < kids.size();) {
    size_t j = i;
    uint32_t best = kids[i].second;
    for (; j < kids.size() && kids[j].first == kids[i].first; ++j)
      if (g.retained.bytes[kids[j].second] > g.retained.bytes[best]) best = kids[j].second;
    const uint32_t obj = kids[i].first;
    if (g.retained.bytes[best] && g.retained.bytes[best] == g.retained.bytes[g.root_node(obj)]) rep[obj] = best;
    i = j;
  }
}

std::span<const std::pair<uint32_t, uint32_t>> RootChildren::kid_pairs(uint32_t obj) const {
  auto lo = std::lower_bound(kids.begin(), kids.end(), std::make_pair(obj, 0u));
  auto hi = std::lower_bound(lo, kids.end(), std::make_pair(obj + 1, 0u));
  return {lo, hi};
}

std::vector<uint32_t> RootChildren::kids_of(uint32_t obj) const {
  std::vector<uint32_t> out;
  for (auto [o, v] : kid_pairs(obj)) out.push_back(v);
  return out;
}

namespace {

// The nodes top_rows considers, best first, a batch at a time: each batch is the best ones after
// the previous batch, found by one pass over the nodes with a bounded heap. (A list of every
// candidate, sorted as needed, cost 4 bytes a node at the query's peak: 400 MB at 10^8 nodes.)
// 'cheap' and 'costly' together say whether a node is a candidate; the costly test runs only on
// nodes good enough to enter the heap.
template <class Cheap, class Costly, class Before>
class Candidates {
 public:
  Candidates(uint32_t num_nodes, size_t first_batch, Cheap cheap, Costly costly, Before before)
      : num_(num_nodes), first_(first_batch), cheap_(cheap), costly_(costly), before_(before) {}

  bool next(uint32_t &v) {
    if (pos_ == batch_.size()) {
      if (done_) return false;
      refill();
      if (batch_.empty()) return false;
    }
    v = batch_[pos_++];
    return true;
  }

 private:
  void refill() {
    const size_t k = std::max(taken_ * 3, first_);
    batch_.clear();
    pos_ = 0;
    // A heap whose front is the worst node kept: a better one takes its place.
    for (uint32_t v = 1; v < num_; ++v) {
      if (!cheap_(v) || (taken_ && !before_(last_, v))) continue;  // not a candidate, or taken
      if (batch_.size() == k && !before_(v, batch_.front())) continue;
      if (!costly_(v)) continue;
      if (batch_.size() == k) {
        std::pop_heap(batch_.begin(), batch_.end(), before_);
        batch_.back() = v;
      } else {
        batch_.push_back(v);
      }
      std::push_heap(batch_.begin(), batch_.end(), before_);
    }
    std::sort_heap(batch_.begin(), batch_.end(), before_);
    done_ = batch_.size() < k;
    taken_ += batch_.size();
    if (!batch_.empty()) last_ = batch_.back();
  }

  uint32_t num_;
  size_t first_;
  Cheap cheap_;
  Costly costly_;
  Before before_;
  std::vector<uint32_t> batch_;
  size_t pos_ = 0, taken_ = 0;
  uint32_t last_ = 0;
  bool done_ = false;
};

}  // namespace

std::vector<TopRow> top_rows(const ObjectGraph &g, const RootObjects &roots, const RootChildren &rc,
                             const std::function<uint32_t(uint32_t block)> &site_id, size_t limit, bool leaks) {
  const auto &idom = g.dom.idom;
  // (A root that keeps nothing alive, a thread whose stack points at no block, is no retainer.)
  auto cheap = [&](uint32_t v) {
    return g.retained.count[v] && v != g.leak_node && !(g.is_root(v) && !g.retained.bytes[v]);
  };
  auto costly = [&](uint32_t v) { return leaks || !g.unreachable(v); };
  // Ancestors first among equal sizes: an ancestor retains more blocks (itself) than any descendant.
  auto before = [&](uint32_t x, uint32_t y) {
    if (g.retained.bytes[x] != g.retained.bytes[y]) return g.retained.bytes[x] > g.retained.bytes[y];
    if (g.retained.count[x] != g.retained.count[y]) return g.retained.count[x] > g.retained.count[y];
    return x < y;
  };
  Candidates nodes(g.csr.num_nodes, 64 + limit * 8, cheap, costly, before);
  std::vector<TopRow> rows;
  std::unordered_map<uint32_t, uint32_t> row_of;       // listed node -> row
  std::unordered_map<uint32_t, uint32_t> nearest;      // node seen on a walk -> nearest listed row above it
  std::unordered_map<uint32_t, std::unordered_set<uint32_t>> covers;  // listed variable -> its children's sites
  std::unordered_map<uint32_t, uint32_t> site_cache;   // block node -> site id
  auto site = [&](uint32_t v) {
    auto [it, fresh] = site_cache.try_emplace(v, 0);
    if (fresh) it->second = site_id(ObjectGraph::block_of(v));
    return it->second;
  };
  uint32_t v = 0;
  while (rows.size() < limit && nodes.next(v)) {
    if (g.is_root(v) && rc.rep_of(g, v) != v) continue;  // shown as the child that stands for it
    const uint32_t p = idom[v];
    if (g.is_block(v) && g.is_block(p) && site(p) == site(v)) continue;  // the same structure, one level down
    // The nearest listed row above v: walk up to a listed node or one walked before.
    std::vector<uint32_t> path;
    uint32_t found = UINT32_MAX;
    for (uint32_t u = p; u != 0 && u != graph::kNoIdom; u = idom[u]) {
      if (auto r = row_of.find(u); r != row_of.end()) {
        found = r->second;
        break;
      }
      if (auto m = nearest.find(u); m != nearest.end()) {
        found = m->second;
        break;
      }
      path.push_back(u);
    }
    for (uint32_t u : path) nearest[u] = found;
    bool same = false;
    if (g.is_block(v))
      for (uint32_t r = found; r != UINT32_MAX && !same; r = rows[r].inside) {
        const uint32_t u = rows[r].node;
        if (g.is_block(u)) {
          same = site(u) == site(v);
        } else if (g.is_root(u) && roots.objects[g.root_object(u)].what == RootObject::kVariable) {
          auto [it, fresh] = covers.try_emplace(u);
          // Straight from site_id, not through site_cache: a variable's children can be
          // millions (a static list's nodes), and caching each one's site grew the heap by tens
          // of MB at 10^7 blocks for a set of a few distinct sites.
          if (fresh)
            for (auto [o, k] : rc.kid_pairs(g.root_object(u))) it->second.insert(site_id(ObjectGraph::block_of(k)));
          same = it->second.count(site(v)) > 0;
        }
      }
    if (same) continue;
    row_of[v] = uint32_t(rows.size());
    rows.push_back({v, found, g.retained.bytes[v]});
  }
  for (const auto &r : rows)
    if (r.inside != UINT32_MAX) rows[r.inside].own -= g.retained.bytes[r.node];
  return rows;
}

}  // namespace heapsnap::snapshot
