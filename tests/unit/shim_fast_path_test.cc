// The pieces the allocation fast paths (interpose.cc) stand on, one thread at a time: the lookup
// table that is also their on/off switch, a block's shadow base, and the biased heap delta whose
// fold a free learns from the flags of its subtraction. Linked into shim_concurrency_test (the
// shim's pieces without interpose.cc and tracer.cc, see tests/meson.build).
#include <doctest/doctest.h>

#include <cstdlib>
#include <thread>

#include "intercept/real_alloc.h"
#include "tables/shadow_map.h"
#include "core/thread_state.h"
#include "core/tracer.h"
#include "intercept/usable_size.h"

using namespace hs;

namespace {

void ensure_real_allocator() {
  static bool done = false;
  if (done) return;
  done = true;
  real::resolve_next();
  usable::init();
}

bool mmapped(const void *p) { return usable::g_glibc_layout && (static_cast<const size_t *>(p)[-1] & 2); }

}  // namespace

TEST_CASE("shim fast paths: their lookup finds a block's shadow byte only while they are on") {
  ensure_real_allocator();
  void *p = real::fn.malloc(40);
  REQUIRE(p);
  uint8_t *s = shadow::find_or_create(p);
  REQUIRE(s);
  // The fast paths run only on glibc's chunk layout (set_state), whose 16-byte granule their
  // lookup takes as a constant; under another allocator (a sanitizer's) the granule is 8 bytes and
  // they are never switched on.
  if (usable::g_glibc_layout) {
    shadow::enable_fast_paths(true);
    CHECK(shadow::find_fast(p) == s);
  } else {
    CHECK(shadow::granule_shift == 3);
  }
  shadow::enable_fast_paths(false);
  CHECK(shadow::find_fast(p) == nullptr);
  CHECK(shadow::find(p) == s);  // the slow paths' lookup does not depend on the switch
  real::fn.free(p);
}

TEST_CASE("shim fast paths: a block's shadow base, heap and mmapped chunks alike") {
  ensure_real_allocator();
  // Under a sanitizer the next malloc is the sanitizer's: the base is then usable + 1 everywhere.
  MESSAGE("glibc chunk layout (1: yes): " << int(usable::g_glibc_layout));
  int heap_chunks = 0, mmapped_chunks = 0;
  for (size_t n : {size_t(1), size_t(24), size_t(25), size_t(100), size_t(1000), size_t(4096), size_t(70000),
                   size_t(300000), size_t(48) << 20}) {
    void *p = real::fn.malloc(n);
    REQUIRE(p);
    size_t usable = usable::of(p);
    size_t base = usable::shadow_base(p);
    bool mm = mmapped(p);
    (mm ? mmapped_chunks : heap_chunks) += 1;
    // (Under another allocator the byte holds the requested size itself: a constant base.)
    CHECK_MESSAGE(base == (!usable::g_glibc_layout ? usable::kDirectBase : usable + (mm ? 16 : 8)), "size " << n);
    CHECK(usable::shadow_base(p, usable) == base);
    if (usable::g_glibc_layout) CHECK(usable::glibc_shadow_base(p) == base);
    // Every requested size the block could hold, at both ends of the code's range and past it
    // (large slack: the size goes to the following shadow bytes).
    for (size_t req : {usable, usable - 1, base > 126 ? base - 126 : size_t(0), base > 127 ? base - 127 : size_t(0),
                       size_t(1), n, size_t(0), size_t(125), size_t(126), size_t(127)}) {
      if (req > usable) continue;
      for (bool sampled : {false, true}) {
        REQUIRE(shadow::mark(p, req, base, sampled));
        uint8_t *s = shadow::find(p);
        REQUIRE(s);
        uint8_t v = shadow::get(s);
        CHECK(v != 0);
        CHECK(bool(v & shadow::kSampledBit) == sampled);
        CHECK_MESSAGE(shadow::requested_size(p, v, base) == req, "size " << n << ", requested " << req);
        shadow::clear(p, s, v);
        CHECK(shadow::get(s) == 0);
      }
    }
    real::fn.free(p);
  }
  CHECK(heap_chunks > 0);
  // Whether glibc mmaps the large ones depends on what the tests before this one left (a big top
  // chunk serves 48 MB without mmap): an mmapped chunk's header, made by hand, checks its base.
  MESSAGE("mmapped chunks among them: " << mmapped_chunks);
  if (usable::g_glibc_layout) {
    alignas(16) size_t chunk[8] = {};
    chunk[1] = (size_t(1) << 20) | 2;  // size 1 MiB, IS_MMAPPED
    void *p = &chunk[2];
    CHECK(usable::glibc_usable(p) == (size_t(1) << 20) - 16);
    CHECK(usable::glibc_shadow_base(p) == usable::glibc_usable(p) + 16);
    chunk[1] = (size_t(1) << 20) | 1;  // the same size in the heap, PREV_INUSE
    CHECK(usable::glibc_shadow_base(p) == usable::glibc_usable(p) + 8);
  }
}

TEST_CASE("shim fast paths: a thread's heap delta folds at kFoldBytes either way, from its biased start") {
  ensure_real_allocator();
  // A new thread: its TLS is a fresh copy of initial_thread_local().
  std::thread([] {
    ThreadLocal &t = t_local;
    CHECK(t.counters.heap_delta == kHeapBias);
    CHECK(t.heap_delta_max == kHeapBias);
    const int64_t heap0 = g_totals.heap.load();
    account_alloc(t, kFoldBytes - 1);
    CHECK(g_totals.heap.load() == heap0);  // not yet
    account_alloc(t, 1);
    CHECK(g_totals.heap.load() == heap0 + kFoldBytes);  // folded, and the delta back at its start
    CHECK(t.counters.heap_delta == kHeapBias);
    CHECK(t.heap_delta_max == kHeapBias);
    CHECK(g_totals.peak.load() >= heap0 + kFoldBytes);
    account_free(t, kFoldBytes - 1);
    CHECK(g_totals.heap.load() == heap0 + kFoldBytes);  // not yet
    account_free(t, 1);
    CHECK(g_totals.heap.load() == heap0);  // a fall of kFoldBytes folds too
    CHECK(t.counters.heap_delta == kHeapBias);
    // A rise and fall within kFoldBytes stays in the thread; its highest point is kept.
    account_alloc(t, 1000);
    account_free(t, 600);
    CHECK(g_totals.heap.load() == heap0);
    CHECK(t.heap_delta_max - t.counters.heap_delta == 600);
    fold_heap(t);
    CHECK(g_totals.heap.load() == heap0 + 400);
    account_free(t, 400);
    fold_heap(t);
    CHECK(g_totals.heap.load() == heap0);
    // The counters went to the thread, never registered: give them back for the other tests.
    t.counters = Counters{};
    t.counters.heap_delta = kHeapBias;
  }).join();
}
