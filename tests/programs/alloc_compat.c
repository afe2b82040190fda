// A heap whose every figure is known, for the allocator matrix (tests/integration/compat_cases.py):
// run on glibc, and on jemalloc, tcmalloc and mimalloc preloaded or linked, heapsnap must report
// the same totals, leaks and unreachable blocks on each, and memcheck's on glibc.
//
//   alloc_compat [PAIRS]
//
// - PAIRS malloc(8)/free pairs (the smallest blocks: other allocators put them 8 bytes apart),
//   PAIRS/2 calloc/free pairs, 100 blocks grown by realloc, 100 aligned blocks;
// - a list of 100 nodes held by a global (reachable), a list of 50 nodes leaked whole (1 definitely
//   lost, 49 indirectly), 100 blocks of 100 bytes leaked each next to a freed 2000-byte block
//   (glibc's bins then point at the chunk headers inside them: definitely lost all the same).
// It writes its own counts with write(2) (no stdio buffer in the heap):
//   allocs A frees F live_blocks L live_bytes B definite D indirect I reachable R
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct node {
  struct node *next;
  char pad[8];
};

struct node *g_held;
static unsigned long allocs, frees, live_blocks, live_bytes;

static void *counted(void *p, size_t n) {
  if (!p) abort();
  ++allocs;
  ++live_blocks;
  live_bytes += n;
  return p;
}

static void uncounted(void *p, size_t n) {
  free(p);
  ++frees;
  --live_blocks;
  live_bytes -= n;
}

// Stack arrays cleared before returning: a conservative scan of the dead frames must not find
// pointers to blocks the program leaked (memcheck scans the same stack).
__attribute__((noinline)) static void churn(long pairs) {
  for (long i = 0; i < pairs; i++) uncounted(counted(malloc(8), 8), 8);
  for (long i = 0; i < pairs / 2; i++) uncounted(counted(calloc(1, 24), 24), 24);
  void *keep[100];
  for (int i = 0; i < 100; i++) keep[i] = counted(malloc(8), 8);
  static const size_t growth[] = {16, 24, 64, 200, 5000};
  for (int i = 0; i < 100; i++) {
    size_t from = 8;
    for (size_t k = 0; k < sizeof growth / sizeof growth[0]; k++) {
      void *q = realloc(keep[i], growth[k]);
      if (!q) abort();
      keep[i] = q;
      ++allocs;  // a realloc counts as one allocation and one free
      ++frees;
      live_bytes += growth[k] - from;
      from = growth[k];
    }
  }
  for (int i = 0; i < 100; i++) uncounted(keep[i], 5000);
  for (int i = 0; i < 100; i++) {
    void *p;
    if (posix_memalign(&p, 64, 40) != 0) abort();
    keep[i] = counted(p, 40);
  }
  for (int i = 0; i < 100; i++) uncounted(keep[i], 40);
  memset(keep, 0, sizeof keep);
  __asm__ volatile("" : : "r"(keep) : "memory");
}

__attribute__((noinline)) static void make_lists(void) {
  for (int i = 0; i < 100; i++) {
    struct node *x = counted(malloc(sizeof *x), sizeof *x);
    x->next = g_held;
    g_held = x;
  }
  struct node *leak = 0;
  for (int i = 0; i < 50; i++) {
    struct node *x = counted(malloc(sizeof *x), sizeof *x);
    x->next = leak;
    leak = x;
  }
  __asm__ volatile("" : : "r"(&leak) : "memory");
  leak = 0;
}

__attribute__((noinline)) static void leak_next_to_free(void) {
  void *gap[100];
  for (int i = 0; i < 100; i++) {
    void *leaked = counted(malloc(100), 100);
    memset(leaked, 0, 100);
    __asm__ volatile("" : : "r"(leaked) : "memory");
    gap[i] = counted(malloc(2000), 2000);
  }
  for (int i = 0; i < 100; i++) uncounted(gap[i], 2000);
  memset(gap, 0, sizeof gap);
  __asm__ volatile("" : : "r"(gap) : "memory");
}

int main(int argc, char **argv) {
  churn(argc > 1 ? atol(argv[1]) : 10000);
  make_lists();
  leak_next_to_free();
  char line[200];
  int n = snprintf(line, sizeof line, "allocs %lu frees %lu live_blocks %lu live_bytes %lu definite %d indirect %d reachable %d\n",
                   allocs, frees, live_blocks, live_bytes, 1 + 100, 49, 100);
  if (write(1, line, (size_t)n) != n) return 1;
  return 0;
}
