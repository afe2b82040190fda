// The shim's thread-safe pieces hammered from many threads: the sampled-block table, the shadow
// map, call sites, the stack table, the thread registry with its exact totals, and the whole
// sampled path with the writer thread flushing while 16 threads allocate, reallocate and free
// each other's blocks. Part of every build's unit suite; scripts/test also builds it with
// ThreadSanitizer (build-tsan/), where any data race in these pieces fails the run.
//
// The allocation path is interpose.cc's (on_alloc, on_free, do_realloc), restated below over the
// test program's own malloc: interpose.cc itself would replace the test program's malloc.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tables/call_sites.h"
#include "core/config.h"
#include "heapsnap.pb.h"
#include "intercept/real_alloc.h"
#include "tables/sampled_blocks.h"
#include "sampling/sampled_path.h"
#include "tables/shadow_map.h"
#include "sampling/stack_table.h"
#include "core/thread_state.h"
#include "core/tracer.h"
#include "sampling/unwinder.h"
#include "intercept/usable_size.h"

#if defined(__SANITIZE_THREAD__)
constexpr int kScale = 2;   // ThreadSanitizer runs these 5-15 times slower
#else
constexpr int kScale = 4;
#endif

using namespace hs;

namespace {

constexpr int kThreads = 16;

// Runs fn(i) for i in [0, n) on n threads released together.
template <typename F>
void run_threads(int n, F fn) {
  std::atomic<int> ready{0};
  std::vector<std::thread> th;
  for (int i = 0; i < n; ++i)
    th.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < n) sched_yield();
      fn(i);
    });
  for (auto &t : th) t.join();
}

uint64_t xorshift(uint64_t &s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

// --- the tracer, set up once per test program ----------------------------------------------------

std::string g_dir, g_capture;

void ensure_tracer() {
  static bool done = false;
  if (done) return;
  done = true;
  char tmpl[] = "/tmp/heapsnap-shim-test.XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  g_dir = tmpl;
  g_capture = g_dir + "/test.hsnap";
  memset(&config, 0, sizeof(config));
  snprintf(config.output, sizeof(config.output), "%s", g_capture.c_str());
  config.sample_bytes = 512;
  config.max_stack_depth = 32;
  config.flush_ms = 5;
  config.zstd_level = 1;
  real::resolve_next();
  usable::init();
  g_pid = getpid();
  g_start_ns = mono_ns();
  REQUIRE(heap::init());
  unwind::init();
  REQUIRE(create_thread_key());
  REQUIRE(writer_open_capture(false, 0));
  writer_flush_now();  // the first frame (process, modules), as the shim's constructor writes it
  g_state.store(kActive);
}

// --- interpose.cc's allocation path, over the test program's malloc ------------------------------

struct OpCounts {
  uint64_t allocs = 0, frees = 0, reallocs = 0, bytes_in = 0, bytes_out = 0;
  uint64_t ev_alloc = 0, ev_free = 0, ev_realloc = 0;  // sampled events the shim must record
  void add(const OpCounts &o) {
    allocs += o.allocs;
    frees += o.frees;
    reallocs += o.reallocs;
    bytes_in += o.bytes_in;
    bytes_out += o.bytes_out;
    ev_alloc += o.ev_alloc;
    ev_free += o.ev_free;
    ev_realloc += o.ev_realloc;
  }
};

__attribute__((noinline)) void *traced_malloc(size_t size, OpCounts &c) {
  void *p = malloc(size);
  ThreadLocal &t = t_local;
  REQUIRE(p);
  if (!tracing() || t.guard) return p;
  size_t base = usable::shadow_base(p);
  t.countdown -= int64_t(size);
  bool sampled = false;
  if (t.countdown <= 0) sampled = reach_sample_point(t, size);
  if (!shadow::mark(p, size, base, sampled)) return p;
  account_alloc(t, size);
  ++c.allocs;
  c.bytes_in += size;
  if (sampled) {
    record_alloc(t, p, size, 0, reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
    ++c.ev_alloc;
  }
  return p;
}

__attribute__((noinline)) void traced_free(void *p, OpCounts &c) {
  ThreadLocal &t = t_local;
  uint8_t *s = shadow::find(p);
  uint8_t v = s ? shadow::get(s) : 0;
  REQUIRE(v != 0);  // every block of these tests was marked
  size_t size = shadow::requested_size(p, v, usable::shadow_base(p));
  shadow::clear(p, s, v);
  ++c.frees;
  c.bytes_out += size;
  if (t.guard || (!t.state && !ensure_thread(t))) {
    g_totals.free_calls.fetch_add(1, std::memory_order_relaxed);
    g_totals.bytes_freed.fetch_add(size, std::memory_order_relaxed);
    g_totals.heap.fetch_sub(int64_t(size), std::memory_order_relaxed);
    free(p);
    return;
  }
  account_free(t, size);
  if (v & shadow::kSampledBit) {
    record_free(t, p);
    ++c.ev_free;
  }
  free(p);
}

__attribute__((noinline)) void *traced_realloc(void *old, size_t n, OpCounts &c) {
  ThreadLocal &t = t_local;
  uint8_t *s = shadow::find(old);
  uint8_t v = s ? shadow::get(s) : 0;
  REQUIRE(v != 0);
  size_t old_size = shadow::requested_size(old, v, usable::shadow_base(old));
  shadow::clear(old, s, v);
  sampled_blocks::Name id{};
  bool named = false;
  if (v & shadow::kSampledBit) {
    enter_sampling(t);
    named = sampled_blocks::take(old, &id);
    leave_sampling(t);
    REQUIRE(named);
  }
  void *q = realloc(old, n);
  REQUIRE(q);
  bump(t.counters.realloc_calls, 1);
  if (q != old) bump(t.counters.realloc_moves, 1);
  bool sampled = named;
  if (!named) {
    t.countdown -= int64_t(n);
    if (t.countdown <= 0) sampled = reach_sample_point(t, n);
  }
  REQUIRE(shadow::mark(q, n, usable::shadow_base(q), sampled));
  account_free(t, old_size);
  account_alloc(t, n);
  ++c.reallocs;
  ++c.allocs;
  ++c.frees;
  c.bytes_in += n;
  c.bytes_out += old_size;
  uintptr_t ra = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  if (named) {
    record_realloc(t, id, q, n, q != old, ra);
    ++c.ev_realloc;
  } else if (sampled) {
    record_alloc(t, q, n, 2, ra);
    ++c.ev_alloc;
  }
  return q;
}

// Sampled events the tests asked the shim to record, over the whole capture.
OpCounts g_events;

// Mutex-protected hand-over queues: thread i frees what others put in box[i].
struct Mailboxes {
  struct Box {
    std::mutex mu;
    std::vector<void *> items;
  };
  Box box[kThreads];
  void put(int to, void *p) {
    std::lock_guard<std::mutex> g(box[to].mu);
    box[to].items.push_back(p);
  }
  std::vector<void *> take_all(int me) {
    std::lock_guard<std::mutex> g(box[me].mu);
    std::vector<void *> out;
    out.swap(box[me].items);
    return out;
  }
};

// One thread's share of a cross-thread workload: malloc, realloc, free, and blocks handed to the
// next thread, which frees them. Returns what the tracer must have counted.
OpCounts churn(int id, int ops, Mailboxes &mb, uint64_t seed) {
  OpCounts c;
  void *slot[64] = {};
  uint64_t r = seed * 0x9E3779B97F4A7C15ull + uint64_t(id) + 1;
  for (int i = 0; i < ops; ++i) {
    xorshift(r);
    if ((r & 15) == 0)
      for (void *p : mb.take_all(id)) traced_free(p, c);
    int k = int((r >> 8) % 64);
    size_t size = 1 + (r >> 20) % ((r & 0x100) ? 3000 : 200);
    if (!slot[k]) {
      slot[k] = traced_malloc(size, c);
    } else if ((r >> 40) % 4 == 0) {
      slot[k] = traced_realloc(slot[k], size, c);
    } else if ((r >> 40) % 4 == 1) {
      mb.put((id + 1 + int((r >> 50) % (kThreads - 1))) % kThreads, slot[k]);
      slot[k] = nullptr;
    } else {
      traced_free(slot[k], c);
      slot[k] = nullptr;
    }
  }
  for (void *&p : slot)
    if (p) traced_free(p, c);
  return c;
}

// --- reading a capture back (the format of proto/heapsnap.proto's top comment) -------------------

// A length-delimited record at p: its bytes in [*rec, *rec + *len). False if it runs past end.
bool next_record(const uint8_t *&p, const uint8_t *end, const uint8_t **rec, uint64_t *len) {
  uint64_t v = 0;
  for (int shift = 0; p < end && shift < 64; shift += 7) {
    uint8_t b = *p++;
    v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      if (v > uint64_t(end - p)) return false;
      *rec = p;
      *len = v;
      p += v;
      return true;
    }
  }
  return false;
}

std::vector<heapsnap::wire::Record> read_capture(const std::string &path) {
  std::vector<heapsnap::wire::Record> out;
  int fd = open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  std::string data;
  char buf[65536];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) data.append(buf, size_t(n));
  close(fd);
  REQUIRE(data.size() >= 24);
  REQUIRE(memcmp(data.data() + 8, "HEAPSNAP", 8) == 0);
  size_t off = 24;
  std::string frame;
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx *)> owner(ZSTD_createDCtx(), ZSTD_freeDCtx);
  ZSTD_DCtx *dctx = owner.get();
  while (off < data.size()) {
    size_t fsize = ZSTD_findFrameCompressedSize(data.data() + off, data.size() - off);
    REQUIRE(!ZSTD_isError(fsize));
    // (Frames that span flushes do not declare their size: decompressed as a stream.)
    frame.clear();
    ZSTD_inBuffer in = {data.data() + off, fsize, 0};
    for (size_t left = 1; left != 0;) {
      char chunk[65536];
      ZSTD_outBuffer o = {chunk, sizeof chunk, 0};
      size_t in_was = in.pos;
      left = ZSTD_decompressStream(dctx, &o, &in);
      REQUIRE(!ZSTD_isError(left));
      REQUIRE((o.pos > 0 || in.pos > in_was || left == 0));
      frame.append(chunk, o.pos);
    }
    size_t got = frame.size();
    const uint8_t *p = reinterpret_cast<const uint8_t *>(frame.data()), *end = p + got;
    while (p < end) {
      const uint8_t *bytes = nullptr;
      uint64_t len = 0;
      REQUIRE(next_record(p, end, &bytes, &len));
      heapsnap::wire::Record rec;
      REQUIRE(rec.ParseFromArray(bytes, int(len)));
      out.push_back(std::move(rec));
    }
    off += fsize;
  }
  return out;
}

// The Stack records in a byte stream of length-delimited records: node id -> (parent, address).
struct StackNodes {
  std::map<uint32_t, std::pair<uint32_t, uint64_t>> node;
  bool duplicate = false, undefined_parent = false;
  void add(const heapsnap::wire::Stack &s) {
    uint32_t parent = s.parent();
    auto it = node.find(parent);
    if (parent && it == node.end()) undefined_parent = true;
    uint64_t addr = parent && it != node.end() ? it->second.second : 0;
    uint32_t id = s.first_node();
    for (int i = 0; i < s.frame_delta_size(); ++i, ++id) {
      addr += uint64_t(s.frame_delta(i));
      if (node.count(id)) duplicate = true;
      node[id] = {parent, addr};
      parent = id;
    }
  }
  // The frames of the stack whose leaf is `leaf`, leaf first.
  std::vector<uint64_t> frames(uint32_t leaf) const {
    std::vector<uint64_t> out;
    for (uint32_t n = leaf; n && out.size() < 1000;) {
      auto it = node.find(n);
      if (it == node.end()) {
        out.push_back(~0ull);  // undefined node
        break;
      }
      out.push_back(it->second.second);
      n = it->second.first;
    }
    return out;
  }
};

}  // namespace

// Synthetic addresses (only the direct layer's words are touched, never the addresses), four
// threads to a 1 GiB region. Each thread keeps up to 2000 live names (a table's stripes grow while others probe them) and
// hands a quarter to the next thread to take. Addresses are 16 bytes apart, so in dense mode with
// 16-byte units neighbours' words share cache lines; id_high puts every fifth id beyond what a
// direct word holds (2^39), so that those go to the table behind it.
static void sampled_blocks_round(uint64_t region, uint64_t id_high) {
  const int per_thread = 20000 * kScale;
  Mailboxes mb;
  std::atomic<uint64_t> wrong{0}, taken{0};
  auto id_of = [&](uint64_t a) {
    uint64_t id = ((a >> 4) & 0x1fffffff) ^ 0x5555;  // unique in the round, small
    return (a >> 4) % 5 == 0 ? id | id_high : id;
  };
  run_threads(kThreads, [&](int id) {
    std::vector<uint64_t> live;
    for (int i = 0; i < per_thread; ++i) {
      uint64_t a = region | (uint64_t(id + 1) << 28) | (uint64_t(i) << 4);
      REQUIRE(sampled_blocks::insert(reinterpret_cast<void *>(a), {id_of(a), uint32_t(id)}));
      if (i % 4 == 0) mb.put((id + 1) % kThreads, reinterpret_cast<void *>(a));
      else live.push_back(a);
      if (live.size() > 2000 || i + 1 == per_thread) {
        for (uint64_t b : live) {
          sampled_blocks::Name n{};
          bool ok = sampled_blocks::take(reinterpret_cast<void *>(b), &n);
          if (!ok || n.id != id_of(b) || n.stack != uint32_t(id)) wrong.fetch_add(1);
          taken.fetch_add(1);
        }
        live.clear();
      }
      if (i % 64 == 0 || i + 1 == per_thread)
        for (void *p : mb.take_all(id)) {
          uint64_t b = reinterpret_cast<uint64_t>(p);
          sampled_blocks::Name n{};
          bool ok = sampled_blocks::take(p, &n);
          if (!ok || n.id != id_of(b) || n.stack != uint32_t(((b >> 28) & 0x1f) - 1)) wrong.fetch_add(1);
          taken.fetch_add(1);
        }
    }
  });
  // What was handed over after its receiver's last look.
  for (int i = 0; i < kThreads; ++i)
    for (void *p : mb.take_all(i)) {
      sampled_blocks::Name n{};
      if (!sampled_blocks::take(p, &n)) wrong.fetch_add(1);
      taken.fetch_add(1);
    }
  CHECK(wrong.load() == 0);
  CHECK(taken.load() == uint64_t(kThreads) * uint64_t(per_thread));
  sampled_blocks::Name n{};
  CHECK_FALSE(sampled_blocks::take(reinterpret_cast<void *>(region | (uint64_t(1) << 28) | 16), &n));
}

TEST_CASE("shim concurrency: sampled-block table, 16 threads inserting, taking, handing over") {
  sampled_blocks::init(false, 4);
  sampled_blocks_round(0, 0);
}

TEST_CASE("shim concurrency: sampled-block direct words, 16 threads, the table behind them") {
  // A region of its own (leaves of the direct layer are made on first use, by whichever thread
  // comes first), 16-byte units as for an allocator other than glibc. The table alone again
  // afterwards, whatever fails here: the other cases test it.
  struct TableAfter {
    ~TableAfter() { sampled_blocks::init(false, 4); }
  } table_after;
  sampled_blocks::init(true, 4);
  const uint64_t region = uint64_t(0x7200) << 32;
  sampled_blocks_round(region, 0);
  sampled_blocks_round(region, uint64_t(1) << 40);
  // A word left behind (a block freed while the tracer could not take its name) is replaced by the
  // next block at that address, whichever layer the new name goes to.
  void *p = reinterpret_cast<void *>(region | 0x40);
  sampled_blocks::Name n{};
  REQUIRE(sampled_blocks::insert(p, {7, 3}));
  REQUIRE(sampled_blocks::insert(p, {uint64_t(1) << 45, 4}));
  REQUIRE(sampled_blocks::take(p, &n));
  CHECK(n.id == uint64_t(1) << 45);
  CHECK(n.stack == 4);
  CHECK_FALSE(sampled_blocks::take(p, &n));
  REQUIRE(sampled_blocks::insert(p, {9, 5}));
  CHECK(sampled_blocks::peek(p, &n));
  CHECK(n.id == 9);
  REQUIRE(sampled_blocks::take(p, &n));
  CHECK(n.stack == 5);
}

TEST_CASE("shim concurrency: shadow map, 16 threads creating leaves and marking blocks") {
  // Four 1 GiB regions no program memory uses (only their shadow leaves are touched), created by
  // whichever thread comes first: the others must find the winner's leaf.
  const uint64_t base = uint64_t(0x6f00) << 32;
  const int per_thread = 5000 * kScale;
  std::atomic<uint64_t> wrong{0};
  run_threads(kThreads, [&](int id) {
    for (int i = 0; i < per_thread; ++i) {
      uint64_t region = uint64_t(i % 4) << 30;
      uint64_t a = base + region + (uint64_t(i) * kThreads + uint64_t(id)) * 160;  // 10 granules apart
      void *p = reinterpret_cast<void *>(a);
      size_t usable = 24 + size_t(i % 8) * 16;
      size_t req = usable - size_t(i % 20);
      bool sampled = i % 3 == 0;
      if (i % 50 == 0) usable = 160, req = 1;  // large slack: the size lives in the next 8 bytes
      size_t base = usable + 1;  // a chunk of glibc's heap (usable_size.h)
      if (!shadow::mark(p, req, base, sampled)) {
        wrong.fetch_add(1);
        continue;
      }
      uint8_t *s = shadow::find(p);
      uint8_t v = s ? shadow::get(s) : 0;
      if (!v || bool(v & shadow::kSampledBit) != sampled || shadow::requested_size(p, v, base) != req)
        wrong.fetch_add(1);
      shadow::clear(p, s, v);
      if (shadow::get(s)) wrong.fetch_add(1);
    }
  });
  CHECK(wrong.load() == 0);
  for (uint64_t r = 0; r < 4; ++r) CHECK(shadow::find(reinterpret_cast<void *>(base + (r << 30))) != nullptr);
}

TEST_CASE("shim concurrency: call sites, 16 threads interning the same return addresses") {
  const int sites = 3000 * kScale;
  std::vector<std::vector<uint32_t>> index(kThreads, std::vector<uint32_t>(size_t(sites)));
  run_threads(kThreads, [&](int id) {
    std::vector<int> order(static_cast<size_t>(sites));
    for (int i = 0; i < sites; ++i) order[size_t(i)] = i;
    std::shuffle(order.begin(), order.end(), std::mt19937(unsigned(id)));
    for (int i : order) index[size_t(id)][size_t(i)] = call_sites::intern(0x400000u + uint64_t(i) * 8);
  });
  std::set<uint32_t> distinct;
  bool agree = true;
  for (int i = 0; i < sites; ++i) {
    uint32_t x = index[0][size_t(i)];
    distinct.insert(x);
    for (int t = 1; t < kThreads; ++t) agree = agree && index[size_t(t)][size_t(i)] == x;
    if (call_sites::address(x) != 0x400000u + uint64_t(i) * 8) agree = false;
  }
  CHECK(agree);
  CHECK(distinct.size() == size_t(sites));
  CHECK(distinct.count(0) == 0);
}

TEST_CASE("shim concurrency: stack table, 16 threads interning overlapping stacks") {
  ensure_tracer();
  // Stacks of 1..24 frames from a small set of addresses, so that threads race to create shared
  // callers. Every id must name exactly the frames it was asked for, and every node must be
  // defined once, in the Stack records, before anything could use it.
  outbox_lock();
  outbox().clear();
  outbox_unlock();
  const int per_thread = 1500 * kScale;
  struct Asked {
    uint32_t id;
    std::vector<uint64_t> frames;
    bool truncated;
  };
  std::vector<std::vector<Asked>> asked(kThreads);
  run_threads(kThreads, [&](int id) {
    ThreadState *s = register_current_thread();
    REQUIRE(s);
    uint64_t r = uint64_t(id) * 7919 + 17;
    for (int i = 0; i < per_thread; ++i) {
      xorshift(r);
      uintptr_t frames[32];
      int n = 1 + int(r % 24);
      uint64_t rr = r >> 8;
      for (int k = n - 1; k >= 0; --k) frames[k] = 0x10000 + ((rr >>= 2) & 3) * 16 + uint64_t(k) * 0x100;
      bool truncated = (r >> 60) == 0;
      uint32_t got = intern_stack(s, frames, n, truncated);
      asked[size_t(id)].push_back({got, std::vector<uint64_t>(frames, frames + n), truncated});
    }
    unregister_thread(s);
  });
  outbox_lock();
  std::string bytes(reinterpret_cast<const char *>(outbox().data()), outbox().size());
  outbox().clear();
  outbox_unlock();
  StackNodes nodes;
  const uint8_t *p = reinterpret_cast<const uint8_t *>(bytes.data()), *end = p + bytes.size();
  int records = 0;
  while (p < end) {
    const uint8_t *rb = nullptr;
    uint64_t len = 0;
    REQUIRE(next_record(p, end, &rb, &len));
    heapsnap::wire::Record rec;
    REQUIRE(rec.ParseFromArray(rb, int(len)));
    if (rec.has_stack()) {
      nodes.add(rec.stack());
      ++records;
    }
  }
  CHECK_FALSE(nodes.duplicate);
  CHECK_FALSE(nodes.undefined_parent);
  int wrong = 0, checked = 0;
  std::map<std::vector<uint64_t>, uint32_t> id_of;
  for (const auto &v : asked)
    for (const Asked &a : v) {
      std::vector<uint64_t> want = a.frames;
      if (a.truncated) want.push_back(0);  // the marker frame of a stack cut at the maximum depth
      if (a.id == 0 || nodes.frames(a.id) != want) ++wrong;
      auto [it, fresh] = id_of.emplace(want, a.id);
      if (!fresh && it->second != a.id) ++wrong;  // the same stack got two ids
      ++checked;
    }
  MESSAGE(checked << " stacks interned, " << id_of.size() << " distinct, " << records << " Stack records, "
                  << nodes.node.size() << " nodes");
  CHECK(wrong == 0);
  CHECK(records > 0);
}

TEST_CASE("shim concurrency: thread registry, threads coming and going while totals are read") {
  ensure_tracer();
  // Rounds of 16 short-lived threads (each registers on its first allocation and leaves the
  // registry at exit), while another thread reads the totals. They must never go down, and once
  // every thread has ended they must be exact.
  TotalsView before = read_totals();
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0}, backwards{0};
  std::string first_backwards;
  std::thread reader([&] {
    TotalsView last = read_totals();
    while (!stop.load()) {
      TotalsView t = read_totals();
      if (t.alloc_calls < last.alloc_calls || t.free_calls < last.free_calls ||
          t.bytes_allocated < last.bytes_allocated || t.realloc_calls < last.realloc_calls) {
        if (backwards.fetch_add(1) == 0)
          first_backwards = "alloc calls " + std::to_string(last.alloc_calls) + " -> " + std::to_string(t.alloc_calls) +
                            ", free calls " + std::to_string(last.free_calls) + " -> " + std::to_string(t.free_calls);
      }
      last = t;
      reads.fetch_add(1);
    }
  });
  OpCounts total;
  std::mutex mu;
  const int rounds = 6 * kScale;
  for (int round = 0; round < rounds; ++round) {
    Mailboxes mb;
    std::atomic<int> finished{0};
    run_threads(kThreads, [&](int id) {
      OpCounts c = churn(id, 400, mb, uint64_t(round) * 100 + 1);
      // Nothing is handed over once everyone is done: the last look at the mailbox finds all.
      finished.fetch_add(1);
      while (finished.load() < kThreads) sched_yield();
      for (void *q : mb.take_all(id)) traced_free(q, c);
      std::lock_guard<std::mutex> g(mu);
      total.add(c);
    });
  }
  g_events.add(total);
  stop.store(true);
  reader.join();
  TotalsView after = read_totals();
  MESSAGE(reads.load() << " reads of the totals while " << rounds * kThreads << " threads came and went; "
                       << total.allocs << " allocations");
  CHECK_MESSAGE(backwards.load() == 0, "totals went backwards " << backwards.load() << " times, first: " << first_backwards);
  CHECK(after.alloc_calls - before.alloc_calls == total.allocs);
  CHECK(after.free_calls - before.free_calls == total.frees);
  CHECK(after.realloc_calls - before.realloc_calls == total.reallocs);
  CHECK(after.bytes_allocated - before.bytes_allocated == total.bytes_in);
  CHECK(after.bytes_freed - before.bytes_freed == total.bytes_out);
  CHECK(after.heap == before.heap);
  CHECK(g_totals.live_threads.load() == 0);
}

TEST_CASE("shim concurrency: a thread's guard word is clear exactly while it is registered and outside the tracer") {
  ensure_tracer();
  // The fast paths (interpose.cc) run only when guard_word is 0: a new thread must not pass
  // (its counters are not summed until it registers), a registered one must, and one past its
  // exit handler must not again.
  std::thread([] {
    ThreadLocal &t = t_local;
    CHECK(t.guard == 0);
    CHECK(t.unregistered == 1);
    CHECK(t.guard_word != 0);
    REQUIRE(ensure_thread(t) != nullptr);  // registers under GuardScope
    CHECK(t.unregistered == 0);
    CHECK(t.guard_word == 0);
    enter_sampling(t);
    CHECK(t.guard == 1);
    CHECK(t.sampling == 1);
    leave_sampling(t);
    CHECK(t.guard_word == 0);
    // The last destructor round: the thread leaves the registry.
    thread_exit_handler(reinterpret_cast<void *>(uintptr_t(PTHREAD_DESTRUCTOR_ITERATIONS - 1)));
    CHECK(t.unregistered == 1);
    CHECK(t.state == nullptr);
    CHECK(t.guard_word != 0);
  }).join();
}

TEST_CASE("shim concurrency: 16 threads allocate, reallocate and free across threads while the writer flushes") {
  ensure_tracer();
  TotalsView before = read_totals();
  REQUIRE(writer_start_thread());
  const int ops = 6000 * kScale;
  OpCounts total;
  std::mutex mu;
  Mailboxes mb;
  std::atomic<int> finished{0};
  run_threads(kThreads, [&](int id) {
    OpCounts c = churn(id, ops, mb, 77);
    // Wait for everyone before the last look at the mailbox: nothing arrives after it.
    finished.fetch_add(1);
    while (finished.load() < kThreads) sched_yield();
    for (void *q : mb.take_all(id)) traced_free(q, c);
    std::lock_guard<std::mutex> g(mu);
    total.add(c);
  });
  g_events.add(total);
  g_state.store(kStopped);
  writer_stop_thread();
  writer_finish("exit");

  std::vector<heapsnap::wire::Record> recs = read_capture(g_capture);
  REQUIRE(!recs.empty());
  CHECK(recs.front().has_process());
  REQUIRE(recs.back().has_end());
  const heapsnap::wire::Totals &end = recs.back().end().totals();
  CHECK(end.alloc_calls() - before.alloc_calls == total.allocs);
  CHECK(end.free_calls() - before.free_calls == total.frees);
  CHECK(end.realloc_calls() - before.realloc_calls == total.reallocs);
  CHECK(end.bytes_allocated() - before.bytes_allocated == total.bytes_in);
  CHECK(end.bytes_freed() - before.bytes_freed == total.bytes_out);
  CHECK(end.live_blocks() == 0);
  CHECK(end.heap_bytes() == 0);
  CHECK(end.dropped_events() == 0);
  // Every sampled event is in the capture, and every stack an event names was defined before it.
  // (The earlier tests' events are in it too: count them from the first thread of this test.)
  uint64_t alloc_ev = 0, free_ev = 0, realloc_ev = 0, frames_of_totals = 0, undefined = 0;
  uint64_t last_totals_ns = 0, last_alloc_calls = 0, totals_backwards = 0;
  StackNodes nodes;
  for (const auto &r : recs) {
    if (r.has_stack()) nodes.add(r.stack());
    if (r.has_totals()) {
      ++frames_of_totals;
      if (r.totals().time_ns() < last_totals_ns || r.totals().alloc_calls() < last_alloc_calls) ++totals_backwards;
      last_totals_ns = r.totals().time_ns();
      last_alloc_calls = r.totals().alloc_calls();
    }
    if (!r.has_events()) continue;
    const auto &e = r.events();
    for (int i = 0; i < e.kind_size(); ++i) {
      uint32_t k = e.kind(i);
      if (k >= heapsnap::wire::ALLOC_MALLOC && k <= heapsnap::wire::ALLOC_NEW_ARRAY) ++alloc_ev;
      else if (k == heapsnap::wire::FREE) ++free_ev;
      else if (k == heapsnap::wire::REALLOC_IN_PLACE || k == heapsnap::wire::REALLOC_MOVED) ++realloc_ev;
      else FAIL("the shim wrote event kind " << k);
    }
    for (int i = 0; i < e.stack_size(); ++i)
      if (e.stack(i) && !nodes.node.count(e.stack(i))) ++undefined;
  }
  MESSAGE(total.allocs << " allocations (" << total.reallocs << " reallocs), " << total.ev_alloc << " sampled; "
                       << recs.size() << " records, " << frames_of_totals << " totals records");
  CHECK(undefined == 0);
  CHECK(totals_backwards == 0);
  CHECK(frames_of_totals >= 2);
  // The capture also holds the registry test's sampled events (same process, same capture).
  CHECK(alloc_ev == g_events.ev_alloc);
  CHECK(free_ev == g_events.ev_free);
  CHECK(realloc_ev == g_events.ev_realloc);
  // Every sampled block was ended: as many ends as beginnings.
  CHECK(alloc_ev == free_ev);
  unlink(g_capture.c_str());
  rmdir(g_dir.c_str());
}
