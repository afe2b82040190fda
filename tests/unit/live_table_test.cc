// The replay's live-block table against a plain std::unordered_map, on the id patterns captures
// have (per-thread blocks of consecutive ids, short- and long-lived blocks) and on the ones a
// damaged file can have (random ids, repeated ids), with its memory bound checked.
#include <doctest/doctest.h>

#include <random>
#include <unordered_map>

#include "replay/live_table.h"

using heapsnap::replay::LiveEntry;
using heapsnap::replay::LiveTable;

namespace {

struct Checker {
  LiveTable t;
  std::unordered_map<uint64_t, LiveEntry> ref;

  void insert(uint64_t id, uint32_t stack, uint64_t size) {
    LiveEntry e{stack, 1.0f + float(size % 7), size};
    LiveEntry old = t.insert(id, e);
    auto it = ref.find(id);
    if (it == ref.end()) {
      CHECK(old.weight == 0);
    } else {
      CHECK(old.weight == it->second.weight);
      CHECK(old.size == it->second.size);
    }
    ref[id] = e;
  }
  void erase(uint64_t id) {
    LiveEntry out;
    bool had = t.erase(id, &out);
    auto it = ref.find(id);
    REQUIRE(had == (it != ref.end()));
    if (had) {
      CHECK(out.stack == it->second.stack);
      CHECK(out.size == it->second.size);
      ref.erase(it);
    }
  }
  void verify() {
    REQUIRE(t.size() == ref.size());
    for (auto &[id, e] : ref) {
      LiveEntry *f = t.find(id);
      REQUIRE(f != nullptr);
      CHECK(f->stack == e.stack);
      CHECK(f->size == e.size);
    }
    size_t n = 0;
    t.for_each([&](uint64_t id, const LiveEntry &e) {
      ++n;
      auto it = ref.find(id);
      REQUIRE(it != ref.end());
      CHECK(it->second.size == e.size);
    });
    CHECK(n == ref.size());
  }
};

}  // namespace

TEST_CASE("live table: threads' id blocks, most blocks short-lived, some kept for ever") {
  Checker c;
  std::mt19937_64 rng(7);
  uint64_t next[4] = {1, 4097, 8193, 12289}, limit[4] = {4097, 8193, 12289, 16385};
  uint64_t block = 16385;
  std::vector<uint64_t> young;
  for (int step = 0; step < 400000; ++step) {
    int th = int(rng() % 4);
    if (next[th] == limit[th]) {
      next[th] = block;
      limit[th] = block + 4096;
      block += 4096;
    }
    uint64_t id = next[th]++;
    c.insert(id, uint32_t(rng() % 100), rng() % 1000);
    if (rng() % 50) young.push_back(id);  // 2% live for ever
    while (young.size() > 64) {
      size_t k = rng() % young.size();
      c.erase(young[k]);
      young[k] = young.back();
      young.pop_back();
    }
  }
  c.verify();
  // About 8000 survivors spread over ~390 fully issued pages: those went to the overflow table.
  CHECK(c.t.overflow_size() > c.ref.size() / 2);
  CHECK(c.t.pages() * LiveTable::kLivePerPage <= c.ref.size() + LiveTable::kSparePages * LiveTable::kLivePerPage);
  // Memory near the hash table's: no page kept for a handful of survivors.
  CHECK(c.t.memory_bytes() < 200 * c.ref.size() + (2u << 20));
}

TEST_CASE("live table: random ids (a damaged file) stay within the memory budget") {
  Checker c;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 100000; ++i) c.insert((rng() >> 8) + 1, 1, 16);
  c.verify();
  CHECK(c.t.pages() <= LiveTable::kSparePages + c.ref.size() / LiveTable::kLivePerPage);
  CHECK(c.t.memory_bytes() < 300 * c.ref.size() + (2u << 20));
  for (auto it = c.ref.begin(); it != c.ref.end();) {
    uint64_t id = it->first;
    ++it;
    if (id % 3) c.erase(id);
  }
  c.verify();
}

TEST_CASE("live table: repeated ids, frees of unknown ids, ids in evicted pages") {
  Checker c;
  for (uint64_t id = 1; id <= 3 * LiveTable::kPageIds; ++id) c.insert(id, 2, id);
  c.insert(5, 3, 999);  // repeated: replaces, returns the old entry
  c.erase(1u << 30);    // never seen
  c.erase(0x7fffffffffffull);
  // Empty most of the second page (the first lacks id 0, so it is never fully issued): its
  // survivors move out.
  const uint64_t P = LiveTable::kPageIds;
  for (uint64_t id = P; id < 2 * P - 3; ++id) c.erase(id);
  CHECK(c.t.overflow_size() == 3);
  c.insert(P + 1, 4, 44);  // an id of the evicted page comes back (damaged file): still found
  c.insert(2 * P - 2, 5, 55);  // a survivor, now in the overflow table, repeated: replaced there
  c.verify();
  c.erase(2 * P - 1);
  c.verify();
  for (auto ids = c.ref; auto &[id, e] : ids) c.erase(id);
  c.verify();
  CHECK(c.t.size() == 0);
  CHECK(c.t.pages() == 0);
}
