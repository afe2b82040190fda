// The exported allocation functions. Fast path: forward to the real allocator, then a shadow
// byte, a few thread-local counter updates and the sampling countdown; everything else is in
// sampled_path.cc. A call made while the tracer is busy on this thread (guard) passes through.
#include <dlfcn.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdarg>
#include <new>

#include "intercept/real_alloc.h"
#include "tables/call_sites.h"
#include "core/high_fd.h"
#include "tables/info_shadow.h"
#include "sampling/module_map.h"
#include "tables/sampled_blocks.h"
#include "sampling/sampled_path.h"
#include "tables/shadow_map.h"
#include "core/thread_state.h"
#include "core/tracer.h"
#include "intercept/usable_size.h"
#include "snapshot/snapshot.h"

namespace hs {
void finish_before_process_ends(const char *reason);
}

using namespace hs;

namespace {

enum Fn : uint8_t { kMalloc = 0, kCalloc = 1, kReallocFn = 2, kMemalign = 3, kNew = 4, kNewArray = 5 };

// An allocation made while this thread records a sampled event: a signal handler of the
// program interrupted the tracer. Counted in the global totals (like on_free's nested case),
// never sampled.
HS_NOINLINE void count_nested_alloc(void *p, size_t size) {
  if (!shadow::mark(p, size, usable::shadow_base(p), false)) return;
  g_totals.alloc_calls.fetch_add(1, std::memory_order_relaxed);
  g_totals.bytes_allocated.fetch_add(size, std::memory_order_relaxed);
  g_totals.heap.fetch_add(int64_t(size), std::memory_order_relaxed);
}

// The block's entry in the live-block table (snapshots): its call site and the time now.
HS_INLINE void record_block_info(void *p, uintptr_t ra) {
  info::record(p, call_sites::intern(ra), uint32_t(coarse_rel_ns() / 1000000));
}

HS_INLINE void on_alloc(void *p, size_t size, uint8_t fn, uintptr_t ra) {
  ThreadLocal &t = t_local;
  if (HS_UNLIKELY(!p || !tracing())) return;
  if (HS_UNLIKELY(t.guard)) {
    if (t.sampling) count_nested_alloc(p, size);
    return;
  }
  size_t base = usable::shadow_base(p);
  t.countdown -= int64_t(size);
  bool sampled = false;
  if (HS_UNLIKELY(t.countdown <= 0)) sampled = reach_sample_point(t, size);
  if (HS_UNLIKELY(!shadow::mark(p, size, base, sampled))) return;
  if (HS_UNLIKELY(info::enabled)) record_block_info(p, ra);
  account_alloc(t, size);
  if (HS_UNLIKELY(sampled)) record_alloc(t, p, size, fn, ra);
}

// Frees p's accounting; returns after the shadow is cleared (the caller frees for real).
HS_INLINE void on_free(void *p) {
  ThreadLocal &t = t_local;
  if (HS_UNLIKELY(!tracing())) return;
  uint8_t *s = shadow::find(p);
  uint8_t v = s ? shadow::get(s) : 0;
  if (!v) {
    if (!t.guard) bump(t.counters.foreign_frees, 1);
    return;
  }
  size_t size = shadow::requested_size(p, v, usable::shadow_base(p));
  if (HS_UNLIKELY(t.guard) || HS_UNLIKELY(!t.state && !ensure_thread(t))) {
    // Nested in the tracer (a signal handler, a thread past its exit handler), or a thread that
    // cannot be registered: count globally.
    // (The shadow is cleared before the real free: once freed, another thread may get this
    // address and mark it.)
    shadow::clear(p, s, v);
    g_totals.free_calls.fetch_add(1, std::memory_order_relaxed);
    g_totals.bytes_freed.fetch_add(size, std::memory_order_relaxed);
    g_totals.heap.fetch_sub(int64_t(size), std::memory_order_relaxed);
    return;
  }
  // (A thread that never allocated registers on its first free: ensure_thread above. Its
  // counters were never summed into the totals before, and its frees were lost.)
  const bool fold = count_free(t, size);
  if (HS_UNLIKELY(fold)) before_fall_fold(t, size);  // (an at-peak snapshot sees the block)
  shadow::clear(p, s, v);
  if (HS_UNLIKELY(fold)) fold_heap(t);
  if (HS_UNLIKELY(v & shadow::kSampledBit)) record_free(t, p);
}

// --- the fast paths -----------------------------------------------------------------------------
// The common case (tracing with glibc's chunk layout, no snapshot table, not inside the tracer, the
// block neither sampled nor of large slack, its shadow leaf present) decided before anything is
// written; every other case goes to on_alloc / on_free above (which check everything again) by a
// tail call. With no call left in them, malloc keeps one value (the size) across the real call
// and free none, so neither saves the five or six callee-saved registers the general path needs.

enum FastResult { kFastDone = 0, kFastSlow = 1, kFastFold = 2, kFastInfo = 3 };

HS_INLINE int alloc_fast(ThreadLocal &t, void *p, size_t n) {
  if (HS_UNLIKELY(!p || t.guard_word)) return kFastSlow;  // in the tracer, or not registered
  if (HS_UNLIKELY(t.countdown <= int64_t(n))) return kFastSlow;  // this one is sampled
  uint8_t *s = shadow::find_fast(p);  // nullptr too when the fast paths are off
  if (HS_UNLIKELY(!s)) return kFastSlow;
  size_t code = usable::glibc_shadow_base(p) - n;  // slack + 8
  if (HS_UNLIKELY(code >= shadow::kLargeSlack)) return kFastSlow;
  // With snapshots the block's site and time go into the live-block table too: alloc_info, by a
  // tail call, so that this path keeps its registers (nothing committed yet).
  if (HS_UNLIKELY(info::enabled)) return kFastInfo;
  // Committed from here on (each update is one instruction: see thread_state.h).
  sub_mem(t.countdown, int64_t(n));
  shadow::set(s, uint8_t(code));
  return HS_UNLIKELY(count_alloc(t, n)) ? kFastFold : kFastDone;
}

// The free of a tracked, unsampled block whose slack fits its shadow byte; kFastSlow (nothing
// done yet) for everything else.
HS_INLINE int free_fast(ThreadLocal &t, void *p) {
  if (HS_UNLIKELY(t.guard_word)) return kFastSlow;  // in the tracer, or not registered (no state)
  uint8_t *s = shadow::find_fast(p);  // nullptr too when the fast paths are off
  if (HS_UNLIKELY(!s)) return kFastSlow;
  uint8_t v = shadow::get(s);
  // 1..126: a tracked block, not sampled, slack in the byte itself.
  if (HS_UNLIKELY(uint8_t(v - 1) >= 126)) return kFastSlow;
  size_t size = usable::glibc_shadow_base(p) - v;
  // A fall to fold leaves the shadow to free_fold (an at-peak snapshot forked first sees the block).
  if (HS_UNLIKELY(count_free(t, size))) return kFastFold;
  shadow::set(s, 0);  // before the real free: once freed, another thread may get this address and mark it
  return kFastDone;
}

HS_NOINLINE void *alloc_slow(void *p, size_t n, uint8_t fn, uintptr_t ra) {
  on_alloc(p, n, fn, ra);
  return p;
}

HS_NOINLINE void *alloc_fold(void *p) {
  fold_heap(t_local);
  return p;
}

// alloc_fast's block when snapshots are on: what alloc_fast commits, and the block's entry in the
// live-block table, in on_alloc's order (the entry before the count, whose fold may wait for a
// snapshot that must see it). Everything alloc_fast checked still holds: nothing ran in between.
// Before it, every allocation of a snapshotting run took on_alloc (and every free on_free):
// about 170 instructions more per malloc+free pair than without snapshots (bench_fastpath).
HS_NOINLINE void *alloc_info(void *p, size_t n, uint8_t fn, uintptr_t ra) {
  ThreadLocal &t = t_local;
  // (find, not find_fast: another thread may have turned the fast paths off since alloc_fast
  // looked, and find_fast would then say nullptr. Leaves are never unmapped.)
  uint8_t *s = shadow::find(p);
  if (HS_UNLIKELY(!s)) return alloc_slow(p, n, fn, ra);
  sub_mem(t.countdown, int64_t(n));
  shadow::set(s, uint8_t(usable::glibc_shadow_base(p) - n));
  record_block_info(p, ra);
  account_alloc(t, n);
  return p;
}

HS_NOINLINE void free_slow(void *p) {
  on_free(p);
  real::fn.free(p);
}

// free_fast's block (tracked, unsampled, its size in its shadow byte) whose free folds a fall.
HS_NOINLINE void free_fold(void *p) {
  ThreadLocal &t = t_local;
  // (find, as in alloc_info: the fast paths may have been turned off since free_fast looked. Its
  // leaf was there then, and leaves stay: never nullptr, but a free that free_fast has already
  // counted must not go round again if it were.)
  uint8_t *s = shadow::find(p);
  if (HS_UNLIKELY(!s)) return real::fn.free(p);
  before_fall_fold(t, usable::glibc_shadow_base(p) - shadow::get(s));
  shadow::set(s, 0);
  fold_heap(t);
  real::fn.free(p);
}

#define RA() reinterpret_cast<uintptr_t>(__builtin_return_address(0))

// Only ever inlined (into the exported function): RA() in an inlined function is the return address
// of the function it is inlined into (GCC's documented behaviour), read here on the slow branch
// only, instead of before the fast path where it took an instruction of every call.
HS_INLINE void *finish_alloc(void *p, size_t n, uint8_t fn) {
  int r = alloc_fast(t_local, p, n);
  if (HS_LIKELY(r == kFastDone)) return p;
  if (r == kFastFold) return alloc_fold(p);
  if (r == kFastInfo) return alloc_info(p, n, fn, RA());
  return alloc_slow(p, n, fn, RA());
}

HS_INLINE void *do_malloc(size_t n, uint8_t fn, uintptr_t ra) {
  void *p = real::fn.malloc(n);
  on_alloc(p, n, fn, ra);
  return p;
}

HS_INLINE void do_free(void *p) {
  if (HS_UNLIKELY(!p)) return;
  int r = free_fast(t_local, p);
  if (HS_LIKELY(r == kFastDone)) return real::fn.free(p);
  if (r == kFastFold) return free_fold(p);
  return free_slow(p);
}

HS_INLINE void *do_aligned(size_t align, size_t n, uint8_t fn, uintptr_t ra) {
  void *p = real::fn.memalign(align, n);
  on_alloc(p, n, fn, ra);
  return p;
}

void *realloc_after(ThreadLocal &t, void *old, void *q, size_t n, uint8_t v, size_t old_size,
                    bool named, sampled_blocks::Name id, uint64_t old_info, uintptr_t ra);

HS_NOINLINE void *do_realloc(void *old, size_t n, uintptr_t ra) {
  if (!old) return do_malloc(n, kReallocFn, ra);
  if (n == 0) {
    // glibc: realloc(p, 0) frees p and returns NULL.
    do_free(old);
    return nullptr;
  }
  ThreadLocal &t = t_local;
  if (!tracing() || t.guard) {
    // Keep the shadow honest even untraced: the old block is gone or resized.
    if (tracing()) {
      on_free(old);
      void *q = real::fn.realloc(old, n);
      if (q && t.guard && t.sampling) count_nested_alloc(q, n);
      return q;
    }
    return real::fn.realloc(old, n);
  }
  uint8_t *s = shadow::find(old);
  uint8_t v = s ? shadow::get(s) : 0;
  size_t old_size = 0;
  sampled_blocks::Name id{};
  bool named = false;
  if (v) {
    old_size = shadow::requested_size(old, v, usable::shadow_base(old));
    // Before the real realloc: once it returns, the old address may already be reused.
    shadow::clear(old, s, v);
    if (v & shadow::kSampledBit) {
      enter_sampling(t);
      named = sampled_blocks::take(old, &id);
      leave_sampling(t);
    }
  }
  uint64_t old_info = 0;
  if (HS_UNLIKELY(info::enabled) && v) {
    if (uint64_t *slot = info::slot(old, false)) old_info = *slot;
  }
  void *q = real::fn.realloc(old, n);
  if (!q) {
    if (v) shadow::mark(old, old_size, usable::shadow_base(old), v & shadow::kSampledBit);
    if (named) {
      enter_sampling(t);
      sampled_blocks::insert(old, id);
      leave_sampling(t);
    }
    return q;
  }
  return realloc_after(t, old, q, n, v, old_size, named, id, old_info, ra);
}

// The rest of a traced realloc once the real one succeeded (q), the old block's shadow byte (v)
// already cleared and its name (if sampled) taken.
HS_NOINLINE void *realloc_after(ThreadLocal &t, void *old, void *q, size_t n, uint8_t v, size_t old_size,
                                bool named, sampled_blocks::Name id, uint64_t old_info, uintptr_t ra) {
  bump(t.counters.realloc_calls, 1);
  if (q != old) bump(t.counters.realloc_moves, 1);
  if (!v) {
    // The old block was never seen allocated: from here on, the new one is an allocation.
    bump(t.counters.foreign_frees, 1);
    on_alloc(q, n, kReallocFn, ra);
    return q;
  }
  size_t base = usable::shadow_base(q);
  bool was_sampled = v & shadow::kSampledBit;
  bool sampled = was_sampled;
  if (!was_sampled) {
    t.countdown -= int64_t(n);
    if (HS_UNLIKELY(t.countdown <= 0)) sampled = reach_sample_point(t, n);
  }
  if (!shadow::mark(q, n, base, sampled && (named || !was_sampled))) {
    account_free(t, old_size);
    if (named) record_free_id(t, id);
    return q;
  }
  if (HS_UNLIKELY(info::enabled)) {
    // A moved block keeps its allocation site and time (its identity), not the realloc's.
    if (uint64_t *slot = info::slot(q, true))
      *slot = old_info ? old_info : info::encode(call_sites::intern(ra), uint32_t(coarse_rel_ns() / 1000000));
  }
  account_free(t, old_size);
  account_alloc(t, n);
  if (named) record_realloc(t, id, q, n, q != old, ra);
  else if (sampled && !was_sampled) record_alloc(t, q, n, kReallocFn, ra);
  return q;
}

}  // namespace

HS_EXPORT void *malloc(size_t n) {
  void *p = real::fn.malloc(n);
  return finish_alloc(p, n, kMalloc);
}

HS_EXPORT void free(void *p) { do_free(p); }

HS_EXPORT void cfree(void *p) { do_free(p); }

HS_EXPORT void *calloc(size_t n, size_t m) {
  void *p = real::fn.calloc(n, m);
  on_alloc(p, n * m, kCalloc, RA());
  return p;
}

// Fast path of realloc: a tracked, unsampled block with its size in its shadow byte, the new one
// likewise and not sampled either. Anything else: do_realloc (before the real call) or
// realloc_after (after it), which check everything again.
HS_EXPORT void *realloc(void *old, size_t n) {
  // realloc(NULL, n) is malloc(n) (glibc's own realloc calls it): the malloc fast path. Programs
  // that grow buffers from nothing call it often (python, PyMem_Realloc: 0.5% of its run went to
  // the general path).
  if (!old) return finish_alloc(real::fn.malloc(n), n, kReallocFn);
  ThreadLocal &t = t_local;
  // (With snapshots, do_realloc: the block's live-block entry, its first allocation's site and
  // time, moves with it.)
  if (HS_LIKELY(n && !t.guard_word && !info::enabled)) {  // outside the tracer, registered
    uint8_t *s = shadow::find_fast(old);  // nullptr too when the fast paths are off
    if (HS_LIKELY(s)) {
      uint8_t v = shadow::get(s);
      if (HS_LIKELY(uint8_t(v - 1) < 126 && t.countdown > int64_t(n))) {
        size_t old_size = usable::glibc_shadow_base(old) - v;
        shadow::set(s, 0);  // before the real realloc: once it returns, the old address may be reused
        void *q = real::fn.realloc(old, n);
        if (HS_UNLIKELY(!q)) {
          shadow::set(s, v);  // the old block lives on
          return q;
        }
        uint8_t *s2 = shadow::find(q);
        size_t code = usable::glibc_shadow_base(q) - n;
        // The countdown again: a signal handler may have moved it.
        if (HS_UNLIKELY(!s2 || code >= shadow::kLargeSlack || t.countdown <= int64_t(n)))
          return realloc_after(t, old, q, n, v, old_size, false, {}, 0, RA());
        sub_mem(t.countdown, int64_t(n));
        shadow::set(s2, uint8_t(code));
        bump(t.counters.realloc_calls, 1);
        if (q != old) bump(t.counters.realloc_moves, 1);
        account_free(t, old_size);
        account_alloc(t, n);
        return q;
      }
    }
  }
  return do_realloc(old, n, RA());
}

HS_EXPORT void *reallocarray(void *p, size_t n, size_t m) {
  size_t total;
  if (__builtin_mul_overflow(n, m, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  return do_realloc(p, total, RA());
}

HS_EXPORT void *memalign(size_t align, size_t n) { return do_aligned(align, n, kMemalign, RA()); }

HS_EXPORT int posix_memalign(void **out, size_t align, size_t n) {
  int rc = real::fn.posix_memalign(out, align, n);
  if (rc == 0) on_alloc(*out, n, kMemalign, RA());
  return rc;
}

HS_EXPORT void *aligned_alloc(size_t align, size_t n) {
  void *p = real::fn.aligned_alloc(align, n);
  on_alloc(p, n, kMemalign, RA());
  return p;
}

HS_EXPORT void *valloc(size_t n) {
  void *p = real::fn.valloc(n);
  on_alloc(p, n, kMemalign, RA());
  return p;
}

HS_EXPORT void *pvalloc(size_t n) {
  void *p = real::fn.pvalloc(n);
  if (p) {
    // pvalloc rounds the size up to a whole page; the program may use all of it.
    size_t page = size_t(sysconf(_SC_PAGESIZE));
    size_t rounded = n ? (n + page - 1) & ~(page - 1) : page;
    on_alloc(p, rounded, kMemalign, RA());
  }
  return p;
}

HS_EXPORT size_t malloc_usable_size(void *p) { return p ? real::fn.usable_size(p) : 0; }

// --- operator new / delete ------------------------------------------------------------------

namespace {

// The next definition of a function this shim interposes (or one it does not link: libstdc++'s).
template <typename F>
F next_fn(const char *name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

// The shim does not link libstdc++ (a C program would load it, with its start-up work and its
// emergency exception pool in the program's heap, for nothing). Whoever calls operator new has it
// loaded: what a failed allocation needs from it (the new_handler, throwing std::bad_alloc,
// catching what a handler throws for the nothrow forms) is looked up then, on that path only.
// (next_fn, RTLD_NEXT: the nothrow forms are also this shim's, which RTLD_DEFAULT would find first.)

[[noreturn]] void throw_bad_alloc() {
  if (auto thrower = next_fn<void (*)()>("_ZSt17__throw_bad_allocv")) thrower();  // std::__throw_bad_alloc
  static const char msg[] = "heapsnap: operator new failed and libstdc++ cannot be found to throw std::bad_alloc\n";
  (void)!write(2, msg, sizeof(msg) - 1);
  abort();
}

// libstdc++'s semantics: on failure, call the new_handler until an allocation succeeds or there is
// none, then throw std::bad_alloc (a handler may throw it itself). Out of line, so that operator
// new's own frame is malloc's (no registers kept for a loop).
HS_NOINLINE void *new_retry(size_t n, size_t align, uint8_t fn, uintptr_t ra) {
  auto get_handler = next_fn<std::new_handler (*)()>("_ZSt15get_new_handlerv");  // std::get_new_handler
  for (;;) {
    std::new_handler h = get_handler ? get_handler() : nullptr;
    if (!h) throw_bad_alloc();
    h();
    if (void *p = align ? real::fn.memalign(align, n) : real::fn.malloc(n)) {
      on_alloc(p, n, fn, ra);
      return p;
    }
  }
}

// The nothrow forms, once the allocation failed: libstdc++'s own, which call the throwing form
// (this shim's, through the PLT) and turn what it throws into nullptr, as they would natively.
HS_NOINLINE void *new_nothrow_failed(const char *next_name, size_t n, size_t align) {
  const std::nothrow_t nothrow{};  // (std::nothrow is an object of libstdc++'s)
  if (align) {
    auto next = next_fn<void *(*)(size_t, std::align_val_t, const std::nothrow_t &)>(next_name);
    return next ? next(n, std::align_val_t(align), nothrow) : nullptr;
  }
  auto next = next_fn<void *(*)(size_t, const std::nothrow_t &)>(next_name);
  return next ? next(n, nothrow) : nullptr;
}

// libstdc++'s semantics: size 0 becomes 1. nothrow_next: for a nothrow form, the name of
// libstdc++'s definition (new_nothrow_failed); nullptr for a throwing one.
HS_INLINE void *new_impl(size_t n, uint8_t fn, const char *nothrow_next = nullptr) {
  if (n == 0) n = 1;
  void *p = real::fn.malloc(n);
  if (HS_UNLIKELY(!p)) return nothrow_next ? new_nothrow_failed(nothrow_next, n, 0) : new_retry(n, 0, fn, RA());
  return finish_alloc(p, n, fn);
}

HS_INLINE void *new_aligned_impl(size_t n, std::align_val_t al, uint8_t fn, const char *nothrow_next = nullptr) {
  if (n == 0) n = 1;
  size_t align = size_t(al) < sizeof(void *) ? sizeof(void *) : size_t(al);
  void *p = real::fn.memalign(align, n);
  if (HS_UNLIKELY(!p))
    return nothrow_next ? new_nothrow_failed(nothrow_next, n, size_t(al)) : new_retry(n, align, fn, RA());
  on_alloc(p, n, fn, RA());
  return p;
}

}  // namespace

#define HS_NEW_EXPORT __attribute__((visibility("default")))

HS_NEW_EXPORT void *operator new(size_t n) { return new_impl(n, kNew); }
HS_NEW_EXPORT void *operator new[](size_t n) { return new_impl(n, kNewArray); }
HS_NEW_EXPORT void *operator new(size_t n, const std::nothrow_t &) noexcept {
  return new_impl(n, kNew, "_ZnwmRKSt9nothrow_t");
}
HS_NEW_EXPORT void *operator new[](size_t n, const std::nothrow_t &) noexcept {
  return new_impl(n, kNewArray, "_ZnamRKSt9nothrow_t");
}
HS_NEW_EXPORT void *operator new(size_t n, std::align_val_t a) { return new_aligned_impl(n, a, kNew); }
HS_NEW_EXPORT void *operator new[](size_t n, std::align_val_t a) { return new_aligned_impl(n, a, kNewArray); }
HS_NEW_EXPORT void *operator new(size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  return new_aligned_impl(n, a, kNew, "_ZnwmSt11align_val_tRKSt9nothrow_t");
}
HS_NEW_EXPORT void *operator new[](size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  return new_aligned_impl(n, a, kNewArray, "_ZnamSt11align_val_tRKSt9nothrow_t");
}

HS_NEW_EXPORT void operator delete(void *p) noexcept { do_free(p); }
HS_NEW_EXPORT void operator delete[](void *p) noexcept { do_free(p); }
HS_NEW_EXPORT void operator delete(void *p, const std::nothrow_t &) noexcept { do_free(p); }
HS_NEW_EXPORT void operator delete[](void *p, const std::nothrow_t &) noexcept { do_free(p); }
HS_NEW_EXPORT void operator delete(void *p, size_t) noexcept { do_free(p); }
HS_NEW_EXPORT void operator delete[](void *p, size_t) noexcept { do_free(p); }
HS_NEW_EXPORT void operator delete(void *p, std::align_val_t) noexcept { do_free(p); }
HS_NEW_EXPORT void operator delete[](void *p, std::align_val_t) noexcept { do_free(p); }
HS_NEW_EXPORT void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept {
  do_free(p);
}
HS_NEW_EXPORT void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept {
  do_free(p);
}
HS_NEW_EXPORT void operator delete(void *p, size_t, std::align_val_t) noexcept { do_free(p); }
HS_NEW_EXPORT void operator delete[](void *p, size_t, std::align_val_t) noexcept { do_free(p); }

// --- process end --------------------------------------------------------------------------------

HS_EXPORT void _exit(int status) {
  finish_before_process_ends("_exit");
  static auto real = next_fn<void (*)(int)>("_exit");
  real(status);
  __builtin_unreachable();
}

// quick_exit runs the at_quick_exit handlers and ends the process without destructors: the
// capture is finished first, as for _exit (its exit snapshot included).
HS_EXPORT void quick_exit(int status) {
  finish_before_process_ends("quick_exit");
  static auto real = next_fn<void (*)(int)>("quick_exit");
  real(status);
  __builtin_unreachable();
}

HS_EXPORT void _Exit(int status) {
  finish_before_process_ends("_exit");
  static auto real = next_fn<void (*)(int)>("_Exit");
  real(status);
  __builtin_unreachable();
}

// --- main's end: the snapshot before destructors ------------------------------------------------
// main returning reaches exit() inside libc (no call this shim can interpose), so the program's
// main is wrapped: __libc_start_main, which the executable's _start calls through the dynamic
// linker, is this shim's when a before-destructors snapshot is configured, and hands libc the
// wrapper. A program that calls exit() itself goes through exit below. Either way the snapshot is
// taken once, before the atexit handlers and static destructors run.

namespace {
using MainFn = int (*)(int, char **, char **);
MainFn g_program_main = nullptr;
int main_then_snapshot(int argc, char **argv, char **envp) {
  int rc = g_program_main(argc, argv, envp);
  snapshot::before_destructors("main returned");
  return rc;
}
}  // namespace

HS_EXPORT int __libc_start_main(MainFn main, int argc, char **argv, void (*init)(), void (*fini)(),
                                void (*rtld_fini)(), void *stack_end) {
  using StartFn = int (*)(MainFn, int, char **, void (*)(), void (*)(), void (*)(), void *);
  static StartFn real = next_fn<StartFn>("__libc_start_main");
  if (snapshot::wants_before_destructors() && main) {
    g_program_main = main;
    main = main_then_snapshot;
  }
  return real(main, argc, argv, init, fini, rtld_fini, stack_end);
}

HS_EXPORT void exit(int status) {
  snapshot::before_destructors("exit called");
  static auto real = next_fn<void (*)(int)>("exit");
  real(status);
  __builtin_unreachable();
}

// --- libraries unloaded between two module scans ---------------------------------------------------
// The writer scans the loaded modules at each flush (every 100 ms). A library opened and closed
// between two scans (a plugin loop) was never recorded, and the frames of its sampled allocations
// stayed unsymbolized (`?+0x7f...`). The modules are scanned again before each dlclose; the scan
// costs a dl_iterate_phdr when nothing changed. (The analyzer maps addresses over every module the
// capture names, the later one winning where ranges overlap: a record that comes after the
// events it explains still serves them.)
HS_EXPORT int dlclose(void *handle) {
  static auto real = next_fn<int (*)(void *)>("dlclose");
  if (tracing() && !t_local.guard) {
    ErrnoSaver es;
    ++t_local.guard;
    modules::refresh(false);
    --t_local.guard;
  }
  return real(handle);
}

// --- descriptors created inside the tracer --------------------------------------------------------
// libunwind checks addresses by writing them into a pipe it opens once, and when a read of that
// pipe fails it closes both ends and opens a new one. A program that closed the descriptors it did
// not open and then opened a file could get the pipe's old number: libunwind would then close the
// program's file. Pipes made while inside the tracer move to high numbers (high_fd.h).
HS_EXPORT int pipe2(int fds[2], int flags) {
  static auto real = next_fn<int (*)(int *, int)>("pipe2");
  int r = real(fds, flags);
  if (r == 0 && t_local.guard) {
    ErrnoSaver es;
    fds[0] = move_fd_high(fds[0]);
    fds[1] = move_fd_high(fds[1]);
  }
  return r;
}

HS_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
  finish_before_process_ends("exec");
  static auto real = next_fn<int (*)(const char *, char *const[], char *const[])>("execve");
  return real(path, argv, envp);
}

HS_EXPORT int execv(const char *path, char *const argv[]) {
  finish_before_process_ends("exec");
  static auto real = next_fn<int (*)(const char *, char *const[])>("execv");
  return real(path, argv);
}

HS_EXPORT int execvp(const char *file, char *const argv[]) {
  finish_before_process_ends("exec");
  static auto real = next_fn<int (*)(const char *, char *const[])>("execvp");
  return real(file, argv);
}

HS_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
  finish_before_process_ends("exec");
  static auto real = next_fn<int (*)(const char *, char *const[], char *const[])>("execvpe");
  return real(file, argv, envp);
}

// execl* are variadic and glibc implements them without going through execve's PLT entry.
namespace {
constexpr int kMaxExecArgs = 4096;
int collect_args(const char *arg0, va_list ap, char **argv, char ***envp_out) {
  int n = 0;
  argv[n++] = const_cast<char *>(arg0);
  while (arg0 && n < kMaxExecArgs - 1) {
    char *a = va_arg(ap, char *);
    argv[n++] = a;
    if (!a) break;
  }
  argv[kMaxExecArgs - 1] = nullptr;
  if (envp_out) *envp_out = va_arg(ap, char **);
  return n;
}
}  // namespace

extern char **environ;

HS_EXPORT int execl(const char *path, const char *arg, ...) {
  char *argv[kMaxExecArgs];
  va_list ap;
  va_start(ap, arg);
  collect_args(arg, ap, argv, nullptr);
  va_end(ap);
  return execve(path, argv, environ);
}

HS_EXPORT int execlp(const char *file, const char *arg, ...) {
  char *argv[kMaxExecArgs];
  va_list ap;
  va_start(ap, arg);
  collect_args(arg, ap, argv, nullptr);
  va_end(ap);
  return execvp(file, argv);
}

HS_EXPORT int execle(const char *path, const char *arg, ...) {
  char *argv[kMaxExecArgs];
  char **envp = nullptr;
  va_list ap;
  va_start(ap, arg);
  collect_args(arg, ap, argv, &envp);
  va_end(ap);
  return execve(path, argv, envp);
}

// dlopen: RTLD_DEEPBIND would bind the library to libc's malloc, bypassing the shim, so the flag
// is cleared. The call must stay a tail jump: glibc's dlopen looks at its return address to find
// the calling object (whose RUNPATH resolves bare names), which must remain the program's.
extern "C" {
__attribute__((visibility("hidden"))) void *hs_real_dlopen = nullptr;
}
extern "C" __attribute__((visibility("hidden"))) void *hs_resolve_dlopen() {
  if (!hs_real_dlopen) hs_real_dlopen = dlsym(RTLD_NEXT, "dlopen");
  return hs_real_dlopen;
}
asm(R"(
  .text
  .globl dlopen
  .type dlopen, @function
dlopen:
  .cfi_startproc
  movq hs_real_dlopen(%rip), %rax
  testq %rax, %rax
  jnz 1f
  pushq %rdi
  .cfi_adjust_cfa_offset 8
  pushq %rsi
  .cfi_adjust_cfa_offset 8
  subq $8, %rsp
  .cfi_adjust_cfa_offset 8
  call hs_resolve_dlopen
  addq $8, %rsp
  .cfi_adjust_cfa_offset -8
  popq %rsi
  .cfi_adjust_cfa_offset -8
  popq %rdi
  .cfi_adjust_cfa_offset -8
1:
  andl $-9, %esi
  jmp *%rax
  .cfi_endproc
  .size dlopen, .-dlopen
)");
