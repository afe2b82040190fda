// The replay's table of live sampled blocks, keyed by sample id.
//
// Why not a hash table: the shim hands out sample ids in blocks of 4096 per thread, so the blocks
// a program allocates and frees close together in time have neighbouring ids. A hash of the id
// scatters them over the whole table: with hundreds of thousands of live blocks every event was a
// cache miss (62% of replay time). Here ids index pages of 1024 consecutive slots directly: the
// young blocks of each thread sit in a few hot pages.
//
// Memory stays bounded by the live blocks, whatever ids a damaged file names: a page is created
// only while pages stay within a budget of one page per kLivePerPage live blocks (plus a few for
// the threads' current pages); other ids go to an overflow hash table. A page whose ids have all
// been issued and that has become sparse (fewer than kSparse live) moves its survivors to the
// overflow table and is recycled: long-lived blocks end up in the hash table, short-lived ones
// never leave their page.
//
// Pages come from 2 MiB chunks advised to be huge pages (util/huge_pages.h) and go back to a
// free list when empty: a fresh chunk is already zero and a released page is empty, so no page is
// ever cleared, and a chunk costs one page fault instead of 512 (a first touch of 16 KiB pages
// was 43% of the page faults of a replay, about 15 ms in 210).
//
// A page slot is 6 bytes, a 32-bit stack and a 16-bit size + 1: a block's weight is what its
// size gives (sample_weight), so it is not stored. Entries that do not fit that form (64 KiB or
// more, or a weight its size does not give: a sampled block resized by realloc) live in the
// overflow table, which holds whole entries; they are few (a
// program's blocks are mostly small). The 1.46 M live blocks of an every-allocation python
// capture took 36 MB in 16-byte slots, 16 MB in 6-byte ones (pages half full: long-lived blocks
// sit among freed ones).
#pragma once
#include <cstdint>
#include <new>
#include <vector>

#include "util/flat_map.h"
#include "util/huge_pages.h"

namespace heapsnap::replay {

double sample_weight(uint64_t size, uint64_t mean);                   // replay.h
double resized_weight(double weight, uint64_t size, uint64_t mean);    // replay.h

struct LiveEntry {
  uint32_t stack = 0;
  float weight = 0;  // 1 / P(sampled); 0: no entry (live weights are >= 1)
  uint64_t size = 0;
};

class LiveTable {
 public:
  static constexpr unsigned kPageBits = 10;
  static constexpr uint32_t kPageIds = 1u << kPageBits;
  static constexpr uint32_t kSparse = kPageIds / 32;   // survivors below this: move them out
  static constexpr uint32_t kLivePerPage = 64;         // page budget: live / this + kSparePages
  static constexpr uint32_t kSparePages = 64;

  // mean: the capture's sampling mean (1: every allocation, weights all 1).
  explicit LiveTable(uint64_t mean = 1) : mean_(mean) {}
  LiveTable(const LiveTable &) = delete;
  LiveTable &operator=(const LiveTable &) = delete;
  ~LiveTable() {
    for (void *c : chunks_) util::huge_unmap(c, kChunkBytes);
  }

  // The weights entries are stored against. Only while the table is empty and has never held
  // an entry (the slots' implied weights must not change); false otherwise.
  bool set_mean(uint64_t mean) {
    if (used_) return false;
    mean_ = mean;
    return true;
  }

  size_t size() const { return live_; }

  // Gives the pages' memory back and empties the table. For the end of a replay, whose result
  // arrays take memory next: pages released to the free list stay mapped (and resident) until
  // then.
  void release_memory() {
    for (void *c : chunks_) util::huge_unmap(c, kChunkBytes);
    chunks_ = {};
    chunk_used_ = 0;
    free_ = last_ = nullptr;
    for (Page *&p : recent_) p = nullptr;
    dir_ = {};
    overflow_ = {};
    evicted_ = {};
    pages_ = live_ = 0;
  }

  // Bytes held: pages (live and recycled), the page directory and the overflow table.
  size_t memory_bytes() const {
    return chunks_.size() * kChunkBytes + chunks_.capacity() * sizeof(void *) + dir_.memory_bytes() +
           overflow_.memory_bytes() + evicted_.memory_bytes();
  }
  size_t pages() const { return pages_; }
  size_t overflow_size() const { return overflow_.size(); }

  // The entry of id, if live.
  bool get(uint64_t id, LiveEntry *out) {
    if (Page *p = page_of(id)) {
      SlotRef s = slot_of(p, id);
      if (!s.empty()) {
        *out = load(s);
        return true;
      }
    }
    const LiveEntry *o = overflowed(id);
    if (!o) return false;
    *out = *o;
    return true;
  }

  // A live block resized: its entry keeps its stack, takes `size` and the weight resized_weight
  // gives (the realloc was one more chance for the block to be sampled). False (and no change) if
  // id is not live; *old gets the entry as it was, *now as it is. One lookup, where get and
  // insert made two (reallocs are a third of some programs' events).
  bool resize(uint64_t id, uint64_t size, LiveEntry *old, LiveEntry *now) {
    if (Page *p = page_of(id)) {
      SlotRef s = slot_of(p, id);
      if (!s.empty()) {
        *old = load(s);
        *now = resized(*old, size);
        refill(p, s, id, *now);
        return true;
      }
    }
    LiveEntry *o = overflowed(id);
    if (!o) return false;
    *old = *o;
    *o = *now = resized(*old, size);
    return true;
  }

  // Stores e (weight != 0) under id; returns the entry it replaced (weight 0 if none).
  // Inline: the common case, a new id in the page the previous event used.
  __attribute__((always_inline)) LiveEntry insert(uint64_t id, const LiveEntry &e) {
    Page *p = last_;
    if (__builtin_expect(p && p->number == id >> kPageBits && !p->reissued && fits(e), 1)) {
      SlotRef s = slot_of(p, id);
      if (__builtin_expect(s.empty(), 1)) {
        ++p->live;
        ++live_;
        if (p->issued < kPageIds) ++p->issued;
        store(s, e);
        return LiveEntry{};
      }
    }
    return insert_slow(id, e);
  }

  __attribute__((noinline)) LiveEntry insert_slow(uint64_t id, const LiveEntry &e) {
    used_ = true;
    LiveEntry old;
    Page *p = page_of(id);
    if (!p) {
      // A live id without a page is in the overflow table (a resize of an old block): it stays
      // there. A page made for it would stay empty and hold the page budget for ever.
      if (replace_overflowed(id, e, &old)) return old;
      if (pages_ < kSparePages || pages_ * kLivePerPage < live_) p = new_page(id >> kPageBits);
    }
    if (p) {
      SlotRef s = slot_of(p, id);
      if (!s.empty()) {
        old = load(s);
        refill(p, s, id, e);
        return old;
      }
      if (replace_overflowed(id, e, &old)) return old;  // the id lives on in the overflow table
      ++live_;
      if (p->issued < kPageIds) ++p->issued;
      if (fits(e)) {
        ++p->live;
        store(s, e);
      } else {
        to_overflow(p, id, e);
      }
      return LiveEntry{};
    }
    LiveEntry &o = overflow_[id];
    old = o;
    if (old.weight == 0) ++live_;
    o = e;
    return old;
  }

  // Removes id; returns false if it was not live. Inline: the common case, a live id of a page
  // that stays well populated, found as the last page used or in the recent-pages cache (a quarter
  // of a python capture's frees are of an older page than the allocation before them). last_
  // stays the page allocations go to.
  __attribute__((always_inline)) bool erase(uint64_t id, LiveEntry *out) {
    uint64_t n = id >> kPageBits;
    Page *p = last_;
    if (__builtin_expect(!(p && p->number == n), 0)) p = recent_[n & (kRecent - 1)];
    if (__builtin_expect(p && p->number == n, 1)) {
      SlotRef s = slot_of(p, id);
      // Not the erase that empties the page or leaves a fully issued page sparse (erase_slow
      // releases or evicts it). A page still handing out ids may hold few live blocks: most of
      // a python capture's pages, whose blocks mostly die young, and whose frees were a third of
      // the slow path's calls when any page under kSparse took it.
      uint32_t left = p->live - 1;
      if (__builtin_expect(!s.empty() && left != 0 && (left >= kSparse || p->issued < kPageIds), 1)) {
        *out = load(s);
        s.clear();
        --live_;
        --p->live;
        return true;
      }
    }
    return erase_slow(id, out);
  }

  __attribute__((noinline)) bool erase_slow(uint64_t id, LiveEntry *out) {
    if (Page *p = page_of(id)) {
      SlotRef s = slot_of(p, id);
      if (!s.empty()) {
        *out = load(s);
        s.clear();
        --live_;
        if (--p->live == 0) release(p);
        else if (p->live < kSparse && p->issued == kPageIds) evict(p);
        return true;
      }
    }
    if (overflow_.size() && overflow_.erase(id, out)) {
      --live_;
      return true;
    }
    return false;
  }

  template <typename F>
  void for_each(F &&f) const {
    dir_.for_each([&](uint64_t, Page *p) {
      for (uint32_t i = 0; i < kPageIds; ++i)
        if (p->size1[i] != 0) f(p->number * kPageIds + i, load(SlotRef{p, i}));
    });
    overflow_.for_each([&](uint64_t id, const LiveEntry &e) { f(id, e); });
  }

 private:
  struct Page {
    uint64_t number = 0;
    uint32_t live = 0;    // non-empty slots
    uint32_t issued = 0;  // inserts so far (saturating): kPageIds once every id was handed out
    // Some of its ids may be in overflow_ (an earlier page of this number was evicted, or an
    // entry did not fit a slot): inserts check there first.
    bool reissued = false;
    Page *next_free = nullptr;  // free list link while released
    uint32_t stack[kPageIds];   // the slots, as two arrays (both aligned: 6-byte records were
    uint16_t size1[kPageIds];   // 40% slower); size1 = size + 1, 0: empty slot
  };
  struct SlotRef {
    Page *p;
    uint32_t i;
    bool empty() const { return p->size1[i] == 0; }
    void clear() const { p->size1[i] = 0; }
  };
  static constexpr uint64_t kMaxSlotSize = UINT16_MAX - 1;
  static constexpr size_t kChunkBytes = util::kHugePage;
  static constexpr size_t kPagesPerChunk = kChunkBytes / sizeof(Page);

  __attribute__((always_inline)) float weight_of(uint64_t size) const {
    return __builtin_expect(mean_ <= 1, 1) ? 1.0f : sampled_weight(size);
  }
  __attribute__((noinline)) float sampled_weight(uint64_t size) const { return float(sample_weight(size, mean_)); }
  LiveEntry resized(const LiveEntry &e, uint64_t size) const {
    LiveEntry r = e;
    r.size = size;
    if (mean_ > 1) r.weight = float(resized_weight(e.weight, size, mean_));
    return r;
  }
  __attribute__((always_inline)) bool fits(const LiveEntry &e) const {
    return e.size <= kMaxSlotSize && e.weight == weight_of(e.size);
  }
  __attribute__((always_inline)) static void store(SlotRef s, const LiveEntry &e) {
    s.p->stack[s.i] = e.stack;
    s.p->size1[s.i] = uint16_t(e.size + 1);
  }
  __attribute__((always_inline)) LiveEntry load(SlotRef s) const {
    uint64_t size = uint64_t(s.p->size1[s.i]) - 1;
    return LiveEntry{s.p->stack[s.i], weight_of(size), size};
  }

  static SlotRef slot_of(Page *p, uint64_t id) { return SlotRef{p, uint32_t(id & (kPageIds - 1))}; }
  // id's entry in the overflow table, if it has one (no lookup while the table is empty).
  LiveEntry *overflowed(uint64_t id) { return overflow_.size() ? overflow_.find(id) : nullptr; }

  // The live slot s (of id, in page p) takes e, or gives its room up when e does not fit a slot.
  void refill(Page *p, SlotRef s, uint64_t id, const LiveEntry &e) {
    if (__builtin_expect(fits(e), 1)) {
      store(s, e);
      return;
    }
    s.clear();
    --p->live;
    to_overflow(p, id, e);
    if (p->live == 0) release(p);
  }

  // id's entry in the overflow table becomes e; false (nothing done) when it has none there.
  bool replace_overflowed(uint64_t id, const LiveEntry &e, LiveEntry *old) {
    LiveEntry *o = overflowed(id);
    if (!o) return false;
    *old = *o;
    *o = e;
    return true;
  }

  // A new live id of page p whose entry does not fit a slot.
  void to_overflow(Page *p, uint64_t id, const LiveEntry &e) {
    overflow_[id] = e;
    p->reissued = true;
  }

  // The page of id, if there is one (it becomes last_). Frees land all over the older pages and
  // the next allocation goes back to the newest one: a small direct-mapped cache in front of the
  // directory keeps both lookups off its hash table.
  Page *page_of(uint64_t id) {
    uint64_t n = id >> kPageBits;
    if (last_ && last_->number == n) return last_;
    Page *&c = recent_[n & (kRecent - 1)];
    if (c && c->number == n) return last_ = c;
    Page **p = dir_.find(n + 1);  // + 1: the directory's keys must not be 0
    if (!p) return nullptr;
    return last_ = c = *p;
  }

  // An empty page: a released one, else the next of the newest chunk (mapped zero). nullptr when
  // no chunk can be mapped: the caller then uses the overflow table.
  Page *take_page() {
    if (free_) {
      Page *p = free_;
      free_ = p->next_free;
      p->next_free = nullptr;
      return p;
    }
    if (chunks_.empty() || chunk_used_ == kPagesPerChunk) {
      void *c = util::huge_map(kChunkBytes);
      if (!c) return nullptr;
      chunks_.push_back(c);
      chunk_used_ = 0;
    }
    return new (static_cast<char *>(chunks_.back()) + sizeof(Page) * chunk_used_++) Page();
  }

  Page *new_page(uint64_t n) {
    Page *p = take_page();
    if (!p) return nullptr;
    p->number = n;
    p->live = 0;
    p->issued = 0;
    p->reissued = evicted_.find(n + 1) != nullptr;
    dir_[n + 1] = p;
    ++pages_;
    return last_ = p;
  }

  // p's slots are all empty: keep it for reuse (a page freed and needed again costs no zeroing).
  // Pages are never unmapped before the table goes: their number stays within the page budget.
  void release(Page *p) {
    dir_.erase(p->number + 1);
    --pages_;
    if (last_ == p) last_ = nullptr;
    if (recent_[p->number & (kRecent - 1)] == p) recent_[p->number & (kRecent - 1)] = nullptr;
    if (p->reissued) evicted_[p->number + 1] = 1;  // its overflowed ids outlive it
    p->next_free = free_;
    free_ = p;
  }

  void evict(Page *p) {
    evicted_[p->number + 1] = 1;
    for (uint32_t i = 0; i < kPageIds && p->live; ++i) {
      SlotRef s{p, i};
      if (s.empty()) continue;
      overflow_[p->number * kPageIds + i] = load(s);
      s.clear();
      --p->live;
    }
    release(p);
  }

  util::FlatMap64<Page *> dir_;  // page number + 1 -> page
  util::FlatMap64<LiveEntry> overflow_;
  util::FlatMap64<uint8_t> evicted_;  // page numbers + 1 of pages whose ids may be in overflow_
  std::vector<void *> chunks_;  // huge-page chunks holding every page
  size_t chunk_used_ = 0;       // pages handed out of the newest chunk
  Page *free_ = nullptr;        // released pages (all slots empty)
  Page *last_ = nullptr;
  static constexpr size_t kRecent = 256;
  Page *recent_[kRecent] = {};  // page number % kRecent -> a live page of that number, or null
  uint64_t mean_;
  bool used_ = false;  // an entry was ever stored (see set_mean)
  size_t pages_ = 0;
  size_t live_ = 0;
};

}  // namespace heapsnap::replay
