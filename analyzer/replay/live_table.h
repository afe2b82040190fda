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
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "util/flat_map.h"

namespace heapsnap::replay {

struct LiveEntry {
  uint32_t stack = 0;
  float weight = 0;  // 1 / P(sampled); 0 marks an empty slot (live weights are >= 1)
  uint64_t size = 0;
};

class LiveTable {
 public:
  static constexpr unsigned kPageBits = 10;
  static constexpr uint32_t kPageIds = 1u << kPageBits;
  static constexpr uint32_t kSparse = kPageIds / 32;   // survivors below this: move them out
  static constexpr uint32_t kLivePerPage = 64;         // page budget: live / this + kSparePages
  static constexpr uint32_t kSparePages = 64;

  LiveTable() = default;
  LiveTable(const LiveTable &) = delete;
  LiveTable &operator=(const LiveTable &) = delete;
  ~LiveTable() {
    dir_.for_each([](uint64_t, Page *p) { delete p; });
  }

  size_t size() const { return live_; }

  // Bytes held: pages (live and recycled), the page directory and the overflow table.
  size_t memory_bytes() const {
    return (pages_ + free_pages_.size()) * sizeof(Page) + dir_.memory_bytes() + overflow_.memory_bytes() +
           evicted_.memory_bytes();
  }
  size_t pages() const { return pages_; }
  size_t overflow_size() const { return overflow_.size(); }

  LiveEntry *find(uint64_t id) {
    if (Page *p = page_of(id)) {
      LiveEntry &e = p->slot[id & (kPageIds - 1)];
      if (e.weight != 0) return &e;
    }
    return overflow_.size() ? overflow_.find(id) : nullptr;
  }

  // Stores e (weight != 0) under id; returns the entry it replaced (weight 0 if none).
  // Inline: the common case, a new id in the page the previous event used.
  __attribute__((always_inline)) LiveEntry insert(uint64_t id, const LiveEntry &e) {
    Page *p = last_;
    if (__builtin_expect(p && p->number == id >> kPageBits && !p->reissued, 1)) {
      LiveEntry &s = p->slot[id & (kPageIds - 1)];
      if (__builtin_expect(s.weight == 0, 1)) {
        ++p->live;
        ++live_;
        if (p->issued < kPageIds) ++p->issued;
        s = e;
        return LiveEntry{};
      }
    }
    return insert_slow(id, e);
  }

  __attribute__((noinline)) LiveEntry insert_slow(uint64_t id, const LiveEntry &e) {
    Page *p = page_of(id);
    if (!p && (pages_ < kSparePages || pages_ * kLivePerPage < live_)) p = new_page(id >> kPageBits);
    if (p) {
      LiveEntry &s = p->slot[id & (kPageIds - 1)];
      if (s.weight == 0) {
        if (LiveEntry *o = overflow_.size() ? overflow_.find(id) : nullptr) {  // the id lives on in the overflow table
          LiveEntry old = *o;
          *o = e;
          return old;
        }
        ++p->live;
        ++live_;
        if (p->issued < kPageIds) ++p->issued;
        s = e;
        return LiveEntry{};
      }
      LiveEntry old = s;
      s = e;
      return old;
    }
    LiveEntry &s = overflow_[id];
    LiveEntry old = s;
    if (old.weight == 0) ++live_;
    s = e;
    return old;
  }

  // Removes id; returns false if it was not live. Inline: the common case, a live id of a page
  // that stays well populated.
  __attribute__((always_inline)) bool erase(uint64_t id, LiveEntry *out) {
    Page *p = last_;
    if (__builtin_expect(p && p->number == id >> kPageBits, 1)) {
      LiveEntry &s = p->slot[id & (kPageIds - 1)];
      if (__builtin_expect(s.weight != 0 && p->live > kSparse, 1)) {
        *out = s;
        s = LiveEntry{};
        --live_;
        --p->live;
        return true;
      }
    }
    return erase_slow(id, out);
  }

  __attribute__((noinline)) bool erase_slow(uint64_t id, LiveEntry *out) {
    if (Page *p = page_of(id)) {
      LiveEntry &s = p->slot[id & (kPageIds - 1)];
      if (s.weight != 0) {
        *out = s;
        s = LiveEntry{};
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
        if (p->slot[i].weight != 0) f(p->number * kPageIds + i, p->slot[i]);
    });
    overflow_.for_each([&](uint64_t id, const LiveEntry &e) { f(id, e); });
  }

 private:
  struct Page {
    uint64_t number = 0;
    uint32_t live = 0;    // non-empty slots
    uint32_t issued = 0;  // inserts so far (saturating): kPageIds once every id was handed out
    bool reissued = false;  // an earlier page of this number was evicted: its ids may be in overflow_
    LiveEntry slot[kPageIds];
  };

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

  Page *new_page(uint64_t n) {
    Page *p;
    if (!free_pages_.empty()) {
      p = free_pages_.back().release();
      free_pages_.pop_back();
    } else {
      p = new Page();
    }
    p->number = n;
    p->live = 0;
    p->issued = 0;
    p->reissued = evicted_.find(n + 1) != nullptr;
    dir_[n + 1] = p;
    ++pages_;
    return last_ = p;
  }

  // p's slots are all empty: keep it for reuse (a page freed and needed again costs no zeroing).
  void release(Page *p) {
    dir_.erase(p->number + 1);
    --pages_;
    if (last_ == p) last_ = nullptr;
    if (recent_[p->number & (kRecent - 1)] == p) recent_[p->number & (kRecent - 1)] = nullptr;
    if (free_pages_.size() < kSparePages) free_pages_.emplace_back(p);
    else delete p;
  }

  void evict(Page *p) {
    evicted_[p->number + 1] = 1;
    for (uint32_t i = 0; i < kPageIds && p->live; ++i) {
      LiveEntry &s = p->slot[i];
      if (s.weight == 0) continue;
      overflow_[p->number * kPageIds + i] = s;
      s = LiveEntry{};
      --p->live;
    }
    release(p);
  }

  util::FlatMap64<Page *> dir_;  // page number + 1 -> page
  util::FlatMap64<LiveEntry> overflow_;
  util::FlatMap64<uint8_t> evicted_;  // page numbers + 1 of evicted pages (a damaged file may reuse their ids)
  std::vector<std::unique_ptr<Page>> free_pages_;
  Page *last_ = nullptr;
  static constexpr size_t kRecent = 256;
  Page *recent_[kRecent] = {};  // page number % kRecent -> a live page of that number, or null
  size_t pages_ = 0;
  size_t live_ = 0;
};

}  // namespace heapsnap::replay
