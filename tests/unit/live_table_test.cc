// The replay's live-block table against a plain std::unordered_map, on the id patterns captures
// have (per-thread blocks of consecutive ids, short- and long-lived blocks) and on the ones a
// damaged file can have (random ids, repeated ids), with its memory bound checked.
#include <doctest/doctest.h>

#include <random>
#include <unordered_map>

#include "replay/live_table.h"
#include "replay/replay.h"

using heapsnap::replay::LiveEntry;
using heapsnap::replay::LiveTable;

namespace {

struct Checker {
  explicit Checker(uint64_t mean = 1) : t(mean), mean(mean) {}
  LiveTable t;
  uint64_t mean;
  std::unordered_map<uint64_t, LiveEntry> ref;

  // weight 0: the weight the size gives (what a fresh sampled block has).
  void insert(uint64_t id, uint32_t stack, uint64_t size, float weight = 0) {
    if (weight == 0) weight = float(heapsnap::replay::sample_weight(size, mean));
    LiveEntry e{stack, weight, size};
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
  void resize(uint64_t id, uint64_t size) {
    LiveEntry old, now;
    bool had = t.resize(id, size, &old, &now);
    auto it = ref.find(id);
    REQUIRE(had == (it != ref.end()));
    if (!had) return;
    CHECK(old.size == it->second.size);
    CHECK(old.weight == it->second.weight);
    CHECK(old.stack == it->second.stack);
    CHECK(now.stack == old.stack);
    CHECK(now.size == size);
    CHECK(now.weight == float(mean > 1 ? heapsnap::replay::resized_weight(old.weight, size, mean) : 1.0));
    CHECK(now.weight <= old.weight);  // one more chance to be sampled: never heavier
    it->second = now;
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
      LiveEntry f;
      REQUIRE(t.get(id, &f));
      CHECK(f.stack == e.stack);
      CHECK(f.size == e.size);
      CHECK(f.weight == e.weight);
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

TEST_CASE("live table: entries a slot cannot hold (64 KiB and more, a weight the size does not give)") {
  Checker c(4096);  // sampled: a slot's weight is sample_weight(size, 4096)
  const uint64_t P = LiveTable::kPageIds;
  for (uint64_t id = 1; id <= 2 * P; ++id) c.insert(id, uint32_t(id % 5), 16 + id % 3000);
  CHECK(c.t.overflow_size() == 0);
  c.insert(7, 1, uint64_t(5) << 30);  // a resize to 5 GiB: moves to the overflow table
  c.insert(8, 1, 100, 3.5f);         // a resize that keeps an older weight
  c.insert(2 * P + 1, 2, uint64_t(1) << 33);  // a new block of 8 GiB
  c.insert(2 * P + 2, 2, 64, 9.0f);
  c.insert(2 * P + 3, 2, 64);
  c.insert(2 * P + 4, UINT32_MAX, 64);  // any stack id fits
  c.insert(2 * P + 5, 3, 65534);        // the largest size a slot has
  c.insert(2 * P + 6, 3, 65535);        // one more
  CHECK(c.t.overflow_size() == 5);
  c.verify();
  c.insert(7, 1, 100);  // back to a size a slot holds: replaced where it is
  c.insert(2 * P + 2, 2, 64, 9.0f);  // repeated (damaged file): replaced, not duplicated
  c.verify();
  c.erase(8);
  c.erase(2 * P + 1);
  c.insert(8, 3, 40);  // the id comes back (damaged file): found, not duplicated
  c.verify();
  for (auto ids = c.ref; auto &[id, e] : ids) c.erase(id);
  c.verify();
  CHECK(c.t.size() == 0);
  CHECK(c.t.overflow_size() == 0);
}

TEST_CASE("live table: every-allocation weights take no room; memory per live block") {
  Checker c;  // mean 1: weight 1
  for (uint64_t id = 1; id <= 200000; ++id) c.insert(id, 1, id % 1000);
  c.verify();
  CHECK(c.t.overflow_size() == 0);
  // 6-byte slots in 2 MiB chunks: 200,000 dense blocks in 196 pages of 6 KiB, one chunk.
  CHECK(c.t.memory_bytes() < 8 * 200000 + (1u << 20));
}

TEST_CASE("live table: resizing blocks that moved to the overflow table takes no page") {
  Checker c;
  const uint64_t P = LiveTable::kPageIds;
  // Survivors of fully issued, then emptied pages move to the overflow table...
  for (uint64_t id = 1; id <= 200 * P; ++id) c.insert(id, 1, 32);
  for (uint64_t id = 1; id <= 200 * P; ++id)
    if (id % P != 5) c.erase(id);
  CHECK(c.t.overflow_size() >= 199);
  size_t pages = c.t.pages();
  // ...and resizing them (realloc: insert over a live id) must not make pages for them: those
  // would stay empty and use up the page budget, sending every new block to the hash table.
  for (int round = 0; round < 3; ++round)
    for (uint64_t k = 0; k < 200; ++k) c.insert(k * P + 5, 1, 48 + round);
  CHECK(c.t.pages() == pages);
  for (uint64_t id = 200 * P + 1; id <= 210 * P; ++id) c.insert(id, 2, 16);
  CHECK(c.t.overflow_size() < 250);
  c.verify();
}

TEST_CASE("live table: resize keeps the stack, lightens the weight, moves entries between slots and the overflow table") {
  Checker c(4096);
  const uint64_t P = LiveTable::kPageIds;
  for (uint64_t id = 1; id <= 2 * P; ++id) c.insert(id, uint32_t(id % 7), 100 + id % 50);
  c.resize(3, 200);       // a resized sampled block's weight is not its size's: no longer a slot's
  c.resize(4, 1u << 20);  // too big for a slot
  c.resize(3 * P, 10);    // not live: nothing changes
  c.verify();
  CHECK(c.t.overflow_size() == 2);
  c.resize(4, 64);  // stays in the overflow table, resized there
  c.verify();
  Checker x;  // every allocation: weights stay 1, resizes stay in their slots
  for (uint64_t id = 1; id <= P; ++id) x.insert(id, 1, 8);
  for (uint64_t id = 1; id <= P; id += 3) x.resize(id, 4000 + id);
  CHECK(x.t.overflow_size() == 0);
  x.verify();
  for (uint64_t id = 1; id <= P; ++id) x.erase(id);
  x.verify();
}
