// Concurrency stress: `stress_threads THREADS OPS [SIGNAL_MS]`. Each thread performs exactly OPS
// operations on a private table of 256 slots (malloc into an empty slot, realloc or free a full
// one), handing every 16th block to the next thread to free (cross-thread frees); at the end
// everything is freed. With SIGNAL_MS > 0 the main thread sends itself SIGUSR2 every SIGNAL_MS
// milliseconds while the workers run (heap snapshots requested mid-flight).
// Exact counts for the tests: allocation calls = THREADS * OPS_ALLOC where each op is one call.
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 256
#define MAX_THREADS 64

static long g_ops;
static int g_threads;
static atomic_int g_running;
// Per-thread mailbox of blocks handed over by the previous thread.
static _Atomic(void *) g_mailbox[MAX_THREADS][SLOTS];
static atomic_long g_mallocs, g_reallocs, g_frees;

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void *worker(void *arg) {
  long id = (long)arg;
  uint64_t seed = 0x9E3779B97F4A7C15ull * (uint64_t)(id + 1);
  void *slot[SLOTS] = {0};
  long mallocs = 0, reallocs = 0, frees = 0;
  for (long i = 0; i < g_ops; ++i) {
    uint64_t r = rnd(&seed);
    int k = (int)(r % SLOTS);
    size_t size = 16 + (size_t)((r >> 16) % 2000);
    // Take a block from the mailbox and free it (it was allocated by another thread).
    void *m = atomic_exchange(&g_mailbox[id][k], NULL);
    if (m) {
      free(m);
      ++frees;
      continue;
    }
    if (!slot[k]) {
      slot[k] = malloc(size);
      memset(slot[k], (int)id, 16);
      ++mallocs;
    } else if ((r >> 40) % 3 == 0) {
      slot[k] = realloc(slot[k], size);
      ++reallocs;
    } else if ((r >> 40) % 16 == 1) {
      // Hand it to the next thread; if its mailbox slot is taken, free it here.
      void *old = atomic_exchange(&g_mailbox[(id + 1) % g_threads][k], slot[k]);
      slot[k] = NULL;
      if (old) {
        free(old);
        ++frees;
      }
    } else {
      free(slot[k]);
      slot[k] = NULL;
      ++frees;
    }
  }
  for (int k = 0; k < SLOTS; ++k)
    if (slot[k]) {
      free(slot[k]);
      ++frees;
    }
  atomic_fetch_add(&g_mallocs, mallocs);
  atomic_fetch_add(&g_reallocs, reallocs);
  atomic_fetch_add(&g_frees, frees);
  atomic_fetch_sub(&g_running, 1);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: stress_threads THREADS OPS [SIGNAL_MS]\n");
    return 2;
  }
  g_threads = atoi(argv[1]);
  g_ops = atol(argv[2]);
  int signal_ms = argc > 3 ? atoi(argv[3]) : 0;
  if (g_threads < 1 || g_threads > MAX_THREADS) return 2;
  if (signal_ms > 0) {
    // Without the shim's handler (a native run), SIGUSR2 would end the process: ignore it then.
    struct sigaction cur;
    sigaction(SIGUSR2, NULL, &cur);
    if (cur.sa_handler == SIG_DFL) signal(SIGUSR2, SIG_IGN);
  }
  pthread_t th[MAX_THREADS];
  atomic_store(&g_running, g_threads);
  for (long t = 0; t < g_threads; ++t) pthread_create(&th[t], NULL, worker, (void *)t);
  int sent = 0;
  while (signal_ms > 0 && atomic_load(&g_running) > 0) {
    struct timespec ts = {signal_ms / 1000, (long)(signal_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    kill(getpid(), SIGUSR2);
    ++sent;
  }
  for (int t = 0; t < g_threads; ++t) pthread_join(th[t], NULL);
  // Blocks still in mailboxes.
  long left = 0;
  for (int t = 0; t < g_threads; ++t)
    for (int k = 0; k < SLOTS; ++k) {
      void *m = atomic_exchange(&g_mailbox[t][k], NULL);
      if (m) {
        free(m);
        ++left;
      }
    }
  printf("mallocs %ld reallocs %ld frees %ld signals %d\n", (long)g_mallocs, (long)g_reallocs,
         (long)g_frees + left, sent);
  return 0;
}
