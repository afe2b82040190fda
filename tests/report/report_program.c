// A program for the report tests, with a heap worth drawing.
//
//   report_program phases [nosnap]
//                           three phases, each ending with a marker and (unless nosnap) a
//                           snapshot request through the client API (heapsnap.h): a cache of
//                           lists grows (cache_insert -> make_entry), a buffer pool is filled,
//                           some blocks leak, then part of the cache is dropped. A local of
//                           phases() holds a scratch block across the two requests (a path from
//                           a thread's stack, in phases' frame).
//   report_program stacks D recursion through four functions chosen by the bits of a counter, D
//                           levels deep: 4^D distinct allocation stacks, each allocating once.
//   report_program ramp MS  a heap that climbs for MS milliseconds (a 4 KiB block every ms), then
//                           falls for MS / 2 (one freed every ms): a short run whose heap line
//                           needs more points than the shim's totals records (one per 100 ms).
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "heapsnap.h"

struct entry {
  struct entry *next;
  char *payload;
  long key;
};

struct bucket {
  struct entry *head;
  long count;
};

static struct bucket *g_cache;  // held by a global: the dominator tree's top
static char **g_pool;
static volatile uintptr_t g_sink;

#define BUCKETS 64

static struct entry *make_entry(long key, size_t payload) {
  struct entry *e = malloc(sizeof *e);
  e->payload = malloc(payload);
  memset(e->payload, (int)key, payload);
  e->key = key;
  e->next = NULL;
  return e;
}

static void cache_insert(long key, size_t payload) {
  struct bucket *b = &g_cache[key % BUCKETS];
  struct entry *e = make_entry(key, payload);
  e->next = b->head;
  b->head = e;
  b->count++;
}

static void cache_drop_half(void) {
  for (int i = 0; i < BUCKETS; i += 2) {
    struct entry *e = g_cache[i].head;
    while (e) {
      struct entry *n = e->next;
      free(e->payload);
      free(e);
      e = n;
    }
    g_cache[i].head = NULL;
    g_cache[i].count = 0;
  }
}

static void fill_pool(int n, size_t size) {
  g_pool = calloc((size_t)n, sizeof *g_pool);
  for (int i = 0; i < n; ++i) g_pool[i] = malloc(size);
}

static void leak_some(int n) {
  for (int i = 0; i < n; ++i) g_sink = (uintptr_t)malloc(48 + (size_t)i);  // only the last stays reachable
  g_sink = 0;
}

static int g_snapshots = 1;

// Waits `ms` milliseconds in this program's own code, not in a system call: a snapshot taken
// meanwhile steps the thread's frames from here up through its callers (from inside libc's
// nanosleep it may not get past libc), so that a stack word names its function's frame.
static void spin_ms(long ms) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    for (int i = 0; i < 100000; ++i) g_sink += (uintptr_t)i;
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

// Marks the end of a phase on the timeline and asks for a snapshot, then gives the tracer time
// to take it (it does within ~100 ms) while the heap stays as it is.
static void phase_done(const char *what) {
  heapsnap_marker(what);
  if (g_snapshots) heapsnap_snapshot(what);
  for (int i = 0; i < 10; ++i) {
    free(malloc(16));
    spin_ms(25);
  }
}

static int phases(void) {
  g_cache = calloc(BUCKETS, sizeof *g_cache);
  for (long k = 0; k < 3000; ++k) cache_insert(k, 64 + (size_t)(k % 5) * 32);
  fill_pool(200, 1024);
  char *volatile scratch = malloc(65536);  // -O0: the pointer sits in this frame while phase_done runs
  memset(scratch, 1, 65536);
  phase_done("cache warm");
  for (long k = 3000; k < 9000; ++k) cache_insert(k, 96 + (size_t)(k % 7) * 16);
  leak_some(100);
  phase_done("cache full");
  free(scratch);
  cache_drop_half();
  for (int i = 0; i < 100; ++i) free(g_pool[i]);
  heapsnap_marker("half dropped");
  printf("phases done\n");
  return 0;
}

// --- many distinct stacks -------------------------------------------------------------------------
typedef void (*step_fn)(unsigned path, int depth);
static void step_a(unsigned path, int depth);
static void step_b(unsigned path, int depth);
static void step_c(unsigned path, int depth);
static void step_d(unsigned path, int depth);
static step_fn g_steps[4] = {step_a, step_b, step_c, step_d};

static void descend(unsigned path, int depth) {
  if (depth == 0) {
    char *p = malloc(16 + (path % 64) * 8);
    g_sink = (uintptr_t)p;
    free(p);
    return;
  }
  g_steps[path & 3](path >> 2, depth - 1);
}
static void step_a(unsigned path, int depth) { descend(path, depth); g_sink += 1; }
static void step_b(unsigned path, int depth) { descend(path, depth); g_sink += 2; }
static void step_c(unsigned path, int depth) { descend(path, depth); g_sink += 3; }
static void step_d(unsigned path, int depth) { descend(path, depth); g_sink += 4; }

static int stacks(int depth) {
  unsigned n = 1u << (2 * depth);
  for (unsigned i = 0; i < n; ++i) descend(i, depth);
  printf("stacks %u\n", n);
  return 0;
}

// --- a heap that climbs, then falls -----------------------------------------------------------------
static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000 * 1000};
  nanosleep(&ts, NULL);
}

static int ramp(int ms) {
  char **blocks = calloc((size_t)ms, sizeof *blocks);
  for (int i = 0; i < ms; ++i) {
    blocks[i] = malloc(4096);
    memset(blocks[i], i, 4096);
    sleep_ms(1);
  }
  for (int i = 0; i < ms / 2; ++i) {
    free(blocks[i]);
    sleep_ms(1);
  }
  printf("ramp %d\n", ms);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "phases")) {
    g_snapshots = !(argc >= 3 && !strcmp(argv[2], "nosnap"));
    return phases();
  }
  if (argc >= 3 && !strcmp(argv[1], "stacks")) return stacks(atoi(argv[2]));
  if (argc >= 3 && !strcmp(argv[1], "ramp")) return ramp(atoi(argv[2]));
  fprintf(stderr, "usage: report_program phases [nosnap] | stacks DEPTH | ramp MS\n");
  return 2;
}
