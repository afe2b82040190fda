#include "sampled_path.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"
#include "sampler.h"
#include "stack_table.h"
#include "tracer.h"
#include "unwinder.h"

namespace hs {
namespace {

pthread_key_t g_thread_key;
bool g_key_ok = false;
constexpr int64_t kNeverSample = int64_t(1) << 62;

struct GuardScope {
  explicit GuardScope(ThreadLocal &t) : t(t) { ++t.guard; }
  ~GuardScope() { --t.guard; }
  ThreadLocal &t;
};

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
  ThreadState *s = register_current_thread();
  if (!s) return false;
  t.state = s;
  t.rng = mix64(uint64_t(s->tid) ^ mono_ns() ^ reinterpret_cast<uint64_t>(&t)) | 1;
  t.phase = kThreadRegistered;
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

uint32_t capture_stack(ThreadState *s, uintptr_t ra) {
  uintptr_t frames[unwind::kMaxDepth];
  bool truncated = false;
  int n = unwind::capture(ra, frames, config.max_stack_depth, &truncated);
  return intern_stack(s, frames, n, truncated);
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
  GuardScope g(t);
  ThreadState *s = t.state;
  uint32_t stack = capture_stack(s, ra);
  uint64_t now = coarse_rel_ns();
  append_event(s, [&](EventBatch &b) {
    b.begin(kAlloc, now);
    b.address(reinterpret_cast<uint64_t>(p));
    b.block_size(size);
    b.stack_id(stack);
    b.alloc_fn(fn);
  });
  bump(t.counters.sampled, 1);
}

void record_free(ThreadLocal &t, const void *p) {
  ThreadState *s = t.state;
  if (HS_UNLIKELY(!s)) {
    // A thread that never sampled frees a sampled block: it needs its batch now.
    if (t.phase == kThreadGone) return;
    ErrnoSaver es;
    GuardScope g(t);
    if (!init_thread(t)) return;
    t.countdown = draw_sample_gap(t.rng, config.sample_bytes);
    s = t.state;
  }
  ErrnoSaver es;
  GuardScope g(t);
  uint64_t now = coarse_rel_ns();
  append_event(s, [&](EventBatch &b) {
    b.begin(kFree, now);
    b.address(reinterpret_cast<uint64_t>(p));
  });
}

void record_realloc(ThreadLocal &t, const void *old_p, const void *new_p, size_t size,
                    uintptr_t ra) {
  if (HS_UNLIKELY(!t.state)) {
    if (t.phase == kThreadGone) return;
    ErrnoSaver es;
    GuardScope g(t);
    if (!init_thread(t)) return;
    t.countdown = draw_sample_gap(t.rng, config.sample_bytes);
  }
  ErrnoSaver es;
  GuardScope g(t);
  ThreadState *s = t.state;
  uint32_t stack = capture_stack(s, ra);
  uint64_t now = coarse_rel_ns();
  append_event(s, [&](EventBatch &b) {
    b.begin(kRealloc, now);
    b.address(reinterpret_cast<uint64_t>(old_p));
    b.address(reinterpret_cast<uint64_t>(new_p));
    b.block_size(size);
    b.stack_id(stack);
    b.alloc_fn(2);
  });
}

}  // namespace hs
