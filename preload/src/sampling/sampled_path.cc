#include "sampling/sampled_path.h"

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/config.h"
#include "tables/sampled_blocks.h"
#include "sampling/sampler.h"
#include "sampling/stack_table.h"
#include "core/tracer.h"
#include "sampling/unwinder.h"

namespace hs {
namespace {

pthread_key_t g_thread_key;
bool g_key_ok = false;
constexpr int64_t kNeverSample = int64_t(1) << 62;

// The tracer's own work that may allocate through the program's allocator (thread
// registration: pthread_setspecific's second-level block): whatever is allocated under it passes
// through uncounted, so it also runs with the program's signals blocked (see init_thread): a
// handler's allocation would be indistinguishable from the tracer's. Guard and sampling change
// in one store (see ThreadLocal). The scope may register the thread: the store that ends it keeps
// the registration flag as the scope left it (no handler can change it meanwhile: the guard is
// still up until that store).
struct GuardScope {
  explicit GuardScope(ThreadLocal &t) : t(t), saved(load_relaxed(t.guard_word)) {
    store_relaxed(t.guard_word, (saved & ~kSamplingMask) + kGuardUnit);  // sampling 0, guard + 1
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
  }
  ~GuardScope() {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    uint64_t now = load_relaxed(t.guard_word);
    store_relaxed(t.guard_word, (saved & ~kUnregisteredMask) | (now & kUnregisteredMask));
  }
  GuardScope(const GuardScope &) = delete;
  GuardScope &operator=(const GuardScope &) = delete;
  ThreadLocal &t;
  uint64_t saved;
};

// Blocks every signal of this thread for a scope (and restores the program's mask).
struct SignalsBlocked {
  SignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    ok = pthread_sigmask(SIG_SETMASK, &all, &old) == 0;
  }
  ~SignalsBlocked() {
    if (ok) pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
  sigset_t old;
  bool ok;
};

// Recording a sampled event (unwinding, tables, the thread's batch) runs under SamplingScope
// (thread_state.h): nothing there allocates through the program's allocator, so an allocation
// nested in it comes from a signal handler of the program; it is counted but not sampled (the
// tables are busy).

void emit_thread_event(uint32_t tid, bool started) {
  outbox_lock();
  wire::RecordMark m = wire::begin_record(outbox(), wire::kThread);
  outbox().u64(1, tid);
  outbox().u64(2, coarse_rel_ns());
  outbox().boolean(3, started);
  if (started) {
    char name[32] = {0};
    pthread_getname_np(pthread_self(), name, sizeof(name));
    outbox().str(4, name);
  }
  wire::end_record(outbox(), m);
  outbox_unlock();
}

bool init_thread(ThreadLocal &t) {
  if (t.phase == kThreadGone) return false;
  // Registration may allocate through the program's allocator (pthread_setspecific: the key's
  // second-level block): under the guard, with no handler of the program able to run meanwhile.
  SignalsBlocked no_signals;
  ThreadState *s = register_current_thread();
  if (!s) return false;
  t.state = s;
  t.rng = mix64(uint64_t(s->tid) ^ mono_ns() ^ reinterpret_cast<uint64_t>(&t)) | 1;
  t.phase = kThreadRegistered;
  store_relaxed(t.unregistered, uint8_t(0));  // the fast paths may count for it from now on
  // Key destructors run in rounds; the thread re-arms its key so that it leaves the registry in
  // the last round, after other libraries' destructors had their chance to free memory.
  if (g_key_ok) pthread_setspecific(g_thread_key, reinterpret_cast<void *>(uintptr_t(1)));
  emit_thread_event(s->tid, true);
  return true;
}

// Appends the event built by `fill` to the thread's batch, moving a full batch to the outbox.
template <typename Fill>
void append_event(ThreadState *s, Fill fill) {
  s->lock.lock();
  fill(s->batch);
  if (s->batch.full()) {
    outbox_lock();
    size_t size = outbox().size();
    if (size > kOutboxLimitBytes) {
      // The writer cannot keep up (slow disk): drop instead of growing without bound.
      g_totals.dropped_events.fetch_add(s->batch.count, std::memory_order_relaxed);
      s->batch.reset();
    } else {
      s->batch.serialize_to(outbox(), s->tid);
    }
    size = outbox().size();
    outbox_unlock();
    if (size > kOutboxFlushBytes) outbox_poke_writer();
  }
  s->lock.unlock();
}

// Sample ids come from a global counter in blocks, so a thread's ids are mostly consecutive and
// threads do not contend on every sampled allocation.
std::atomic<uint64_t> g_next_id_block{1};
constexpr uint64_t kIdBlock = 4096;

uint64_t next_sample_id(ThreadState *s) {
  if (s->next_id == s->id_limit) {
    s->next_id = g_next_id_block.fetch_add(kIdBlock, std::memory_order_relaxed);
    s->id_limit = s->next_id + kIdBlock;
  }
  return s->next_id++;
}

// Inline into each recording function: one frame less to unwind (see unwinder.h).
HS_INLINE uint32_t capture_stack(ThreadState *s, uintptr_t ra) {
  unwind::Buffer buf;
  bool truncated = false;
  const uintptr_t *frames = nullptr;
  uint32_t *remembered = nullptr;
  if (HS_UNLIKELY(!s->stack_resolved)) resolve_stack(s);
  int n = unwind::capture(ra, buf, config.max_stack_depth, &truncated, &frames, s->unwind_cache, s->stack_lo,
                          s->stack_hi, &remembered);
  if (remembered && *remembered) return *remembered;  // a walk the stack walker remembered whole
  uint64_t h = hash_frames(frames, n, truncated);
  const StackCacheEntry &c = s->stack_cache[h & (ThreadState::kStackCacheSize - 1)];
  uint32_t id = HS_LIKELY(c.hash == h) ? c.id : intern_stack_hashed(s, frames, n, truncated, h);
  if (remembered) *remembered = id;
  return id;
}

}  // namespace

bool create_thread_key() {
  g_key_ok = pthread_key_create(&g_thread_key, thread_exit_handler) == 0;
  return g_key_ok;
}

void thread_exit_handler(void *value) {
  ThreadLocal &t = t_local;
  uintptr_t round = reinterpret_cast<uintptr_t>(value);
  if (round < PTHREAD_DESTRUCTOR_ITERATIONS - 1 && tracing()) {
    pthread_setspecific(g_thread_key, reinterpret_cast<void *>(round + 1));
    return;
  }
  if (t.phase != kThreadRegistered) return;
  ErrnoSaver es;
  ++t.guard;  // stays set: whatever this thread allocates from now on is untracked
  store_relaxed(t.unregistered, uint8_t(1));
  t.phase = kThreadGone;
  t.countdown = kNeverSample;
  ThreadState *s = t.state;
  t.state = nullptr;
  if (tracing()) emit_thread_event(s->tid, false);
  unregister_thread(s);
}

bool reach_sample_point(ThreadLocal &t, size_t size) {
  if (HS_UNLIKELY(t.phase != kThreadRegistered)) {
    ErrnoSaver es;
    GuardScope g(t);
    if (!init_thread(t)) {
      t.countdown = kNeverSample;
      return false;
    }
    t.countdown = draw_sample_gap(t.rng, config.sample_bytes) - int64_t(size);
    if (t.countdown > 0) return false;
  }
  t.countdown = draw_sample_gap(t.rng, config.sample_bytes);
  return true;
}

void record_alloc(ThreadLocal &t, const void *p, size_t size, uint8_t fn, uintptr_t ra) {
  ErrnoSaver es;
  SamplingScope g(t);
  ThreadState *s = t.state;
  sampled_blocks::prefetch(p);  // its table slot is a cache miss: fetched while unwinding
  uint32_t stack = capture_stack(s, ra);
  uint64_t now = coarse_rel_ns();
  uint64_t id = next_sample_id(s);
  if (!sampled_blocks::insert(p, {id, stack})) return;  // out of memory: the block stays unnamed
  append_event(s, [&](EventBatch &b) {
    b.begin(alloc_kind(fn), now);
    b.new_id(id);
    b.block_size(size);
    b.stack_id(stack);
  });
  bump(t.counters.sampled, 1);
}

// Makes sure the thread can record events (a thread that never sampled may end a block that
// another thread sampled). Returns its state, or nullptr.
ThreadState *ensure_thread(ThreadLocal &t) {
  if (HS_LIKELY(t.state)) return t.state;
  if (t.phase == kThreadGone) return nullptr;
  ErrnoSaver es;
  GuardScope g(t);
  if (!init_thread(t)) return nullptr;
  t.countdown = draw_sample_gap(t.rng, config.sample_bytes);
  return t.state;
}

void record_free_id(ThreadLocal &t, sampled_blocks::Name n) {
  ThreadState *s = ensure_thread(t);
  if (!s) return;
  ErrnoSaver es;
  SamplingScope g(t);
  uint64_t now = coarse_rel_ns();
  append_event(s, [&](EventBatch &b) {
    b.begin(kFree, now);
    b.freed_block(n.id, n.stack);
  });
}

void record_free(ThreadLocal &t, const void *p) {
  ThreadState *s = t.state;  // registered by on_free
  if (HS_UNLIKELY(!s)) {
    sampled_blocks::Name n;
    enter_sampling(t);
    bool named = sampled_blocks::take(p, &n);
    leave_sampling(t);
    if (named) record_free_id(t, n);
    return;
  }
  // record_free_id's work under the same scope as the lookup.
  ErrnoSaver es;
  SamplingScope g(t);
  sampled_blocks::Name n;
  if (!sampled_blocks::take(p, &n)) return;  // sampled in a parent process
  uint64_t now = coarse_rel_ns();
  append_event(s, [&](EventBatch &b) {
    b.begin(kFree, now);
    b.freed_block(n.id, n.stack);
  });
}

void record_realloc(ThreadLocal &t, sampled_blocks::Name n, const void *new_p, size_t size,
                    bool moved, uintptr_t ra) {
  uint64_t id = n.id;
  ThreadState *s = ensure_thread(t);
  if (!s) return;
  ErrnoSaver es;
  SamplingScope g(t);
  if (!sampled_blocks::insert(new_p, n)) {
    // Cannot follow the block any further: end it here.
    append_event(s, [&](EventBatch &b) {
      b.begin(kFree, coarse_rel_ns());
      b.freed_block(id, n.stack);
    });
    return;
  }
  uint32_t stack = capture_stack(s, ra);
  uint64_t now = coarse_rel_ns();
  append_event(s, [&](EventBatch &b) {
    b.begin(moved ? kReallocMoved : kReallocInPlace, now);
    b.block_ref(id);
    b.block_size(size);
    b.stack_id(stack);
  });
}

void record_pool_alloc(ThreadLocal &t, uint32_t pool, const void *p, size_t size, uintptr_t ra,
                       uint64_t *id_out, uint32_t *stack_out) {
  ThreadState *s = ensure_thread(t);
  if (!s) return;
  ErrnoSaver es;
  SamplingScope g(t);
  uint32_t stack = capture_stack(s, ra);
  uint64_t id = next_sample_id(s);
  uint64_t now = coarse_rel_ns();
  append_event(s, [&](EventBatch &b) {
    b.begin(kPoolAlloc, now);
    b.new_id(id);
    b.address(reinterpret_cast<uint64_t>(p));
    b.block_size(size);
    b.stack_id(stack);
    b.pool_id(pool);
  });
  bump(t.counters.sampled, 1);
  *id_out = id;
  *stack_out = stack;
}

void record_pool_free(ThreadLocal &t, uint32_t pool, uint64_t id, uint32_t stack) {
  ThreadState *s = ensure_thread(t);
  if (!s) return;
  ErrnoSaver es;
  SamplingScope g(t);
  uint64_t now = coarse_rel_ns();
  append_event(s, [&](EventBatch &b) {
    b.begin(kPoolFree, now);
    b.freed_block(id, stack);
    b.pool_id(pool);
  });
}

}  // namespace hs
