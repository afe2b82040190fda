// Concurrency stress with exact expected totals (tests/integration/stress_cases.py, scripts/stress):
//
//   stress16 THREADS OPS COUNTS_FILE [SIGNAL_MS]
//
// THREADS threads share OPS allocator calls: malloc, calloc, realloc (grow, shrink, of NULL, to
// 0), posix_memalign / aligned_alloc / memalign, operator new / new[], free, delete / delete[]
// (sized and unsized), now and then a block above glibc's mmap threshold. About one block in six
// is handed to another thread, which frees it: through a mutex-protected ring or a lock-free
// mailbox slot (atomic exchange). Before the workers start, the main thread allocates a few
// blocks that one more thread frees: a thread that frees and never allocates (its frees were once
// lost from the exact totals). With SIGNAL_MS > 0 heap snapshots are requested mid-flight: a
// thread sends the process SIGUSR2 every SIGNAL_MS ms while the workers run, and at a quarter,
// half and three quarters of their work the workers wait while the main thread requests one and
// gives the tracer 400 ms to start it (so that a fast run still has snapshots of a full heap).
//
// The program counts every call it makes and what the tracer must count for it (allocation and
// free calls, reallocs and moved reallocs, requested bytes allocated and freed) and writes the
// figures to COUNTS_FILE as "name value" lines. Nothing here allocates besides the counted calls
// (no stdio, no containers): what a capture counts beyond them is the C runtime's own work, the
// same as in a run with OPS = 0.
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>

namespace {

constexpr int kMaxThreads = 64;
constexpr int kSlots = 512;
constexpr int kRing = 1024;      // per-thread mutex-protected inbox
constexpr int kMailbox = 64;     // per-thread lock-free inbox slots

enum Kind : uint8_t { kMallocFamily = 0, kNewObj = 1, kNewArray = 2 };

struct Block {
  void *p;
  uint64_t size;
  uint8_t kind;
};

struct Counts {
  uint64_t calls, alloc_calls, free_calls, realloc_calls, realloc_moves, bytes_allocated, bytes_freed;
  uint64_t handed_ring, handed_mailbox, received;
  void add(const Counts &o) {
    calls += o.calls;
    alloc_calls += o.alloc_calls;
    free_calls += o.free_calls;
    realloc_calls += o.realloc_calls;
    realloc_moves += o.realloc_moves;
    bytes_allocated += o.bytes_allocated;
    bytes_freed += o.bytes_freed;
    handed_ring += o.handed_ring;
    handed_mailbox += o.handed_mailbox;
    received += o.received;
  }
};

struct alignas(64) Inbox {
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  Block ring[kRing];
  int head = 0, count = 0;
  // A mailbox slot holds a Block* (the sender's heap-free descriptor pool below) or null.
  std::atomic<Block *> mailbox[kMailbox];
};

Inbox g_inbox[kMaxThreads];
// Descriptors of blocks in flight through mailboxes: a static pool per sender, never the heap.
constexpr int kDescPerThread = 4096;
Block g_desc[kMaxThreads][kDescPerThread];
std::atomic<uint32_t> g_desc_busy[kMaxThreads][kDescPerThread];

int g_threads;
uint64_t g_ops;
// Blocks the main thread allocates and the reaper thread frees.
constexpr int kReaped = 64;
void *g_reap[kReaped];

void *reaper(void *) {
  for (void *p : g_reap) free(p);
  return nullptr;
}
pthread_barrier_t g_barrier;
std::atomic<int> g_running;
// Milestones: workers and the main thread meet there twice (arrive; request a snapshot; go on).
constexpr int kMilestones = 3;
bool g_milestones = false;
pthread_barrier_t g_milestone;
int g_signal_ms = 0;
int g_sent = 0;  // by the signalling thread
Counts g_total;
pthread_mutex_t g_total_mu = PTHREAD_MUTEX_INITIALIZER;

uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

// Releases b with the function that matches how it was allocated.
void release(Block b, uint64_t r, Counts &c) {
  ++c.calls;
  ++c.free_calls;
  c.bytes_freed += b.size;
  switch (b.kind) {
    case kNewObj:
      if (r & 1) ::operator delete(b.p, size_t(b.size));
      else ::operator delete(b.p);
      break;
    case kNewArray:
      if (r & 1) ::operator delete[](b.p, size_t(b.size));
      else ::operator delete[](b.p);
      break;
    default:
      free(b.p);
      break;
  }
}

uint64_t pick_size(uint64_t r) {
  uint64_t sel = (r >> 8) % 1000;
  if (sel == 0) return 130000 + (r >> 20) % 200000;      // above the mmap threshold
  if (sel < 20) return 4096 + (r >> 20) % 60000;         // medium
  if (sel < 300) return 1 + (r >> 20) % 64;              // tiny
  return 16 + (r >> 20) % 2000;                          // small
}

Block allocate(uint64_t r, Counts &c) {
  uint64_t size = pick_size(r);
  Block b{nullptr, size, kMallocFamily};
  uint64_t how = (r >> 40) % 100;
  if (how < 35) {
    b.p = malloc(size);
  } else if (how < 50) {
    // calloc(n, m): the tracer counts n * m bytes.
    uint64_t m = 1 + (r >> 50) % 8;
    uint64_t n = (size + m - 1) / m;
    b.size = n * m;
    b.p = calloc(n, m);
  } else if (how < 70) {
    b.p = ::operator new(size);
    b.kind = kNewObj;
  } else if (how < 85) {
    b.p = ::operator new[](size);
    b.kind = kNewArray;
  } else if (how < 90) {
    b.p = realloc(nullptr, size);  // a malloc
  } else if (how < 94) {
    void *p = nullptr;
    if (posix_memalign(&p, 64, size) == 0) b.p = p;
  } else if (how < 97) {
    b.size = (size + 31) & ~uint64_t(31);  // aligned_alloc: a multiple of the alignment
    b.p = aligned_alloc(32, b.size);
  } else {
    b.p = memalign(128, size);
  }
  ++c.calls;
  if (!b.p) {
    (void)!write(2, "stress16: out of memory\n", 24);
    _exit(3);
  }
  memset(b.p, int(r & 0xff), b.size < 64 ? b.size : 64);
  ++c.alloc_calls;
  c.bytes_allocated += b.size;
  return b;
}

bool send_ring(int to, Block b) {
  Inbox &in = g_inbox[to];
  pthread_mutex_lock(&in.mu);
  bool ok = in.count < kRing;
  if (ok) {
    in.ring[(in.head + in.count) % kRing] = b;
    ++in.count;
  }
  pthread_mutex_unlock(&in.mu);
  return ok;
}

bool recv_ring(int me, Block *b) {
  Inbox &in = g_inbox[me];
  pthread_mutex_lock(&in.mu);
  bool ok = in.count > 0;
  if (ok) {
    *b = in.ring[in.head];
    in.head = (in.head + 1) % kRing;
    --in.count;
  }
  pthread_mutex_unlock(&in.mu);
  return ok;
}

void *worker(void *arg) {
  const int id = int(reinterpret_cast<intptr_t>(arg));
  uint64_t seed = 0x9E3779B97F4A7C15ull * uint64_t(id + 1);
  Block slot[kSlots];
  memset(slot, 0, sizeof slot);
  Counts c{};
  uint64_t quota = g_ops / uint64_t(g_threads) + (uint64_t(id) < g_ops % uint64_t(g_threads) ? 1 : 0);
  uint32_t next_desc = 0;
  int milestone = 1;
  while (c.calls < quota) {
    if (g_milestones && milestone <= kMilestones && c.calls >= quota * uint64_t(milestone) / (kMilestones + 1)) {
      pthread_barrier_wait(&g_milestone);
      pthread_barrier_wait(&g_milestone);
      ++milestone;
    }
    uint64_t r = rnd(&seed);
    // Blocks other threads handed over: free one now and then.
    if ((r & 7) == 0) {
      Block b;
      if (recv_ring(id, &b)) {
        ++c.received;
        release(b, r >> 3, c);
        continue;
      }
      Block *d = g_inbox[id].mailbox[(r >> 3) % kMailbox].exchange(nullptr, std::memory_order_acq_rel);
      if (d) {
        Block b2 = *d;
        // Give the descriptor back to its sender.
        int owner = int((d - &g_desc[0][0]) / kDescPerThread);
        int idx = int((d - &g_desc[0][0]) % kDescPerThread);
        g_desc_busy[owner][idx].store(0, std::memory_order_release);
        ++c.received;
        release(b2, r >> 3, c);
        continue;
      }
    }
    int k = int((r >> 12) % kSlots);
    Block &s = slot[k];
    if (!s.p) {
      s = allocate(r, c);
      continue;
    }
    uint64_t what = (r >> 24) % 100;
    if (what < 25 && s.kind == kMallocFamily) {
      ++c.calls;
      if (what == 0) {
        // realloc(p, 0) frees p (glibc) and returns NULL.
        void *q = realloc(s.p, 0);
        if (q) free(q);  // another libc: keep the block count straight (not reached with glibc)
        ++c.free_calls;
        c.bytes_freed += s.size;
        s = Block{};
        continue;
      }
      uint64_t n = (what & 1) ? s.size / 2 + 1 : s.size + 1 + (r >> 44) % 3000;
      void *q = realloc(s.p, n);
      if (!q) {
        (void)!write(2, "stress16: realloc failed\n", 25);
        _exit(3);
      }
      ++c.realloc_calls;
      ++c.alloc_calls;
      ++c.free_calls;
      c.bytes_freed += s.size;
      c.bytes_allocated += n;
      if (q != s.p) ++c.realloc_moves;
      s.p = q;
      s.size = n;
      continue;
    }
    if (what < 42 && g_threads > 1) {
      int to = int((uint64_t(id) + 1 + (r >> 32) % uint64_t(g_threads - 1)) % uint64_t(g_threads));
      if ((r >> 50) & 1) {
        if (send_ring(to, s)) {
          ++c.handed_ring;
          s = Block{};
          continue;
        }
      } else {
        // A free descriptor of ours, then the target's mailbox slot.
        uint32_t idx = next_desc++ % kDescPerThread;
        if (g_desc_busy[id][idx].load(std::memory_order_acquire) == 0) {
          g_desc[id][idx] = s;
          g_desc_busy[id][idx].store(1, std::memory_order_relaxed);
          Block *d = &g_desc[id][idx];
          Block *old = g_inbox[to].mailbox[(r >> 40) % kMailbox].exchange(d, std::memory_order_acq_rel);
          ++c.handed_mailbox;
          s = Block{};
          if (old) {
            // The slot was taken: that block (someone else's) is ours to free now.
            Block b = *old;
            int owner = int((old - &g_desc[0][0]) / kDescPerThread);
            int oidx = int((old - &g_desc[0][0]) % kDescPerThread);
            g_desc_busy[owner][oidx].store(0, std::memory_order_release);
            ++c.received;
            release(b, r >> 7, c);
          }
          continue;
        }
      }
    }
    release(s, r >> 5, c);
    s = Block{};
  }
  // (A worker whose quota ended before a milestone still meets the others there.)
  for (; g_milestones && milestone <= kMilestones; ++milestone) {
    pthread_barrier_wait(&g_milestone);
    pthread_barrier_wait(&g_milestone);
  }
  g_running.fetch_sub(1);
  // Nobody sends after this barrier: drain the inboxes, then free what is left.
  pthread_barrier_wait(&g_barrier);
  Block b;
  while (recv_ring(id, &b)) {
    ++c.received;
    release(b, 0, c);
  }
  for (int m = 0; m < kMailbox; ++m)
    if (Block *d = g_inbox[id].mailbox[m].exchange(nullptr)) {
      ++c.received;
      release(*d, 1, c);
    }
  for (int k = 0; k < kSlots; ++k)
    if (slot[k].p) release(slot[k], uint64_t(k), c);
  pthread_mutex_lock(&g_total_mu);
  g_total.add(c);
  pthread_mutex_unlock(&g_total_mu);
  return nullptr;
}

void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, long(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

void *signaller(void *) {
  while (g_running.load() > 0) {
    sleep_ms(g_signal_ms);
    if (g_running.load() > 0) {
      kill(getpid(), SIGUSR2);
      ++g_sent;
    }
  }
  return nullptr;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 4) {
    const char msg[] = "usage: stress16 THREADS OPS COUNTS_FILE [SIGNAL_MS]\n";
    (void)!write(2, msg, sizeof msg - 1);
    return 2;
  }
  g_threads = atoi(argv[1]);
  g_ops = strtoull(argv[2], nullptr, 10);
  int signal_ms = argc > 4 ? atoi(argv[4]) : 0;
  g_signal_ms = signal_ms;
  if (g_threads < 1 || g_threads > kMaxThreads) return 2;
  if (signal_ms > 0) {
    // Natively (no tracer handler), SIGUSR2 would end the process: ignore it then.
    struct sigaction cur;
    sigaction(SIGUSR2, nullptr, &cur);
    if (cur.sa_handler == SIG_DFL) signal(SIGUSR2, SIG_IGN);
  }
  pthread_barrier_init(&g_barrier, nullptr, unsigned(g_threads));
  {
    // A thread that only frees: 64 small blocks of the main thread (16 bytes each: with the
    // default sampling none is likely to be sampled, so nothing but the free itself counts them).
    Counts c{};
    for (void *&p : g_reap) {
      p = malloc(16);
      ++c.calls;
      ++c.alloc_calls;
      c.bytes_allocated += 16;
    }
    pthread_t r;
    if (pthread_create(&r, nullptr, reaper, nullptr) != 0) return 3;
    pthread_join(r, nullptr);
    c.calls += kReaped;
    c.free_calls += kReaped;
    c.bytes_freed += 16 * kReaped;
    g_total.add(c);
  }
  g_running.store(g_threads);
  g_milestones = signal_ms > 0 && g_ops >= uint64_t(g_threads) * 64;
  if (g_milestones) pthread_barrier_init(&g_milestone, nullptr, unsigned(g_threads + 1));
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pthread_t th[kMaxThreads];
  for (int t = 0; t < g_threads; ++t)
    if (pthread_create(&th[t], nullptr, worker, reinterpret_cast<void *>(intptr_t(t))) != 0) return 3;
  pthread_t sig;
  if (signal_ms > 0 && pthread_create(&sig, nullptr, signaller, nullptr) != 0) return 3;
  int sent = 0;
  for (int m = 0; g_milestones && m < kMilestones; ++m) {
    pthread_barrier_wait(&g_milestone);  // every worker is at the milestone
    kill(getpid(), SIGUSR2);
    ++sent;
    sleep_ms(400);
    pthread_barrier_wait(&g_milestone);
  }
  for (int t = 0; t < g_threads; ++t) pthread_join(th[t], nullptr);
  if (signal_ms > 0) pthread_join(sig, nullptr);
  sent += g_sent;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = double(t1.tv_sec - t0.tv_sec) + double(t1.tv_nsec - t0.tv_nsec) / 1e9;
  const Counts &c = g_total;
  char buf[1024];
  int n = snprintf(buf, sizeof buf,
                   "threads %d\nops %llu\ncalls %llu\nalloc_calls %llu\nfree_calls %llu\n"
                   "realloc_calls %llu\nrealloc_moves %llu\nbytes_allocated %llu\nbytes_freed %llu\n"
                   "handed_ring %llu\nhanded_mailbox %llu\nreceived %llu\nsignals %d\nseconds %.3f\n",
                   g_threads, (unsigned long long)g_ops, (unsigned long long)c.calls,
                   (unsigned long long)c.alloc_calls, (unsigned long long)c.free_calls,
                   (unsigned long long)c.realloc_calls, (unsigned long long)c.realloc_moves,
                   (unsigned long long)c.bytes_allocated, (unsigned long long)c.bytes_freed,
                   (unsigned long long)c.handed_ring, (unsigned long long)c.handed_mailbox,
                   (unsigned long long)c.received, sent, secs);
  int fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || write(fd, buf, size_t(n)) != n) return 4;
  close(fd);
  // Every block the program allocated is freed: the counts must balance.
  if (c.alloc_calls != c.free_calls || c.bytes_allocated != c.bytes_freed) {
    const char msg[] = "stress16: internal count mismatch\n";
    (void)!write(2, msg, sizeof msg - 1);
    return 5;
  }
  return 0;
}
