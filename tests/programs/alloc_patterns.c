// A traced program with exactly known allocation behaviour: `alloc_patterns MODE N`.
// The integration tests run it for two values of N and check that heapsnap's exact totals differ
// by exactly what the code below does (the C runtime's own allocations cancel out).
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long n;

static size_t size_of(long i) { return (size_t)(i % 100) + 1; }

static void *sink;  // keeps the compiler from dropping allocations
static void *keep[64];  // realloc_grow's leaked buffers

static void mode_malloc(void) {
  for (long i = 0; i < n; ++i) {
    void *p = malloc(size_of(i));
    sink = p;
    free(p);
  }
}

static void mode_calloc(void) {
  for (long i = 0; i < n; ++i) {
    char *p = calloc(size_of(i), 3);
    if (p[0]) abort();
    free(p);
  }
}

static void mode_realloc(void) {
  void *p = NULL;
  for (long i = 0; i < n; ++i) p = realloc(p, (size_t)(i + 1) * 16);
  free(p);
}

static void mode_aligned(void) {
  for (long i = 0; i < n; ++i) {
    void *a, *b, *c, *d;
    if (posix_memalign(&a, 64, size_of(i)) != 0) abort();
    b = aligned_alloc(128, 256);
    c = memalign(32, size_of(i));
    d = valloc(size_of(i));
    if ((unsigned long)a % 64 || (unsigned long)b % 128 || (unsigned long)c % 32) abort();
    free(a); free(b); free(c); free(d);
  }
  // A bad alignment fails with EINVAL and allocates nothing.
  void *bad;
  if (posix_memalign(&bad, 3, 16) != EINVAL) abort();
}

static void mode_leak(void) {
  for (long i = 0; i < n; ++i) sink = malloc(100);
}

static void mode_excursion(void) {
  // A rise and fall far smaller than the shim's per-thread batching of heap figures (256 KiB):
  // the exact peak must still see it.
  void *blocks[5000];
  long k = n < 5000 ? n : 5000;
  for (long i = 0; i < k; ++i) blocks[i] = malloc(10);
  for (long i = 0; i < k; ++i) free(blocks[i]);
}

static void mode_peak(void) {
  // Peak = n blocks of 1000 bytes live at once, then all freed.
  void **blocks = malloc(sizeof(void *) * (size_t)(n ? n : 1));
  for (long i = 0; i < n; ++i) blocks[i] = malloc(1000);
  for (long i = 0; i < n; ++i) free(blocks[i]);
  free(blocks);
}

#define THREADS 4
static void *thread_blocks[THREADS];
static void *thread_main(void *arg) {
  long t = (long)arg;
  void **mine = malloc(sizeof(void *) * (size_t)(n ? n : 1));
  for (long i = 0; i < n; ++i) mine[i] = malloc(size_of(i));
  thread_blocks[t] = mine;
  return NULL;
}
static void mode_threads(void) {
  pthread_t th[THREADS];
  for (long t = 0; t < THREADS; ++t) pthread_create(&th[t], NULL, thread_main, (void *)t);
  for (long t = 0; t < THREADS; ++t) pthread_join(th[t], NULL);
  // Freed by another thread than the one that allocated them.
  for (long t = 0; t < THREADS; ++t) {
    void **mine = thread_blocks[t];
    for (long i = 0; i < n; ++i) free(mine[i]);
    free(mine);
  }
}

static void mode_fork(void) {
  for (long i = 0; i < n; ++i) free(malloc(10));
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    for (long i = 0; i < 2 * n; ++i) free(malloc(20));
    exit(0);
  }
  int st;
  waitpid(pid, &st, 0);
  printf("child %d exited %d\n", (int)pid, WEXITSTATUS(st));
}

// The child frees what the parent allocated before the fork (blocks the parent's capture named;
// the child's must not name them again), then allocates and frees its own.
static void mode_fork_live(void) {
  void **kept = malloc((size_t)n * sizeof(void *));
  for (long i = 0; i < n; ++i) kept[i] = malloc(24);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    for (long i = 0; i < n; ++i) free(kept[i]);
    for (long i = 0; i < n; ++i) free(malloc(20));
    exit(0);
  }
  int st;
  waitpid(pid, &st, 0);
  for (long i = 0; i < n; ++i) free(kept[i]);
  free(kept);
  printf("child %d exited %d\n", (int)pid, WEXITSTATUS(st));
}

// glibc serves a block above its mmap threshold (128 KiB, until free() of a larger mmapped block
// raises it) with mmap: the tracer must leave that threshold where the program's own calls put
// it, or the program's heap behaves differently traced. Prints where each block went.
static void mode_mmap_threshold(void) {
  static const size_t sizes[] = {200000, 1000000, 4000000};
  void *kept[3];
  for (int i = 0; i < 3; ++i) {
    struct mallinfo2 before = mallinfo2();
    kept[i] = malloc(sizes[i]);
    struct mallinfo2 after = mallinfo2();
    printf("%zu %s\n", sizes[i], after.hblks > before.hblks ? "mmap" : "heap");
  }
  for (int i = 0; i < 3; ++i) free(kept[i]);
}

// How many arenas glibc's malloc has (malloc_info's <heap> elements): the tracer's own threads
// must not add one (its writer's first malloc, made inside pthread_getattr_np, once did).
static void mode_arenas(void) {
  free(malloc(10));
  // Long enough for the tracer's writer thread to be well started.
  struct timespec ts = {0, 200 * 1000 * 1000};
  nanosleep(&ts, NULL);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return;
  malloc_info(0, f);
  fclose(f);
  int heaps = 0;
  for (const char *p = buf; (p = strstr(p, "<heap nr=")) != NULL; ++p) ++heaps;
  free(buf);
  printf("arenas %d\n", heaps);
}

static void mode_killed(void) {
  for (long i = 0; i < n; ++i) sink = malloc(1000);
  // Long enough for the shim's periodic flush; then die without any chance to clean up.
  struct timespec ts = {0, 400 * 1000 * 1000};
  nanosleep(&ts, NULL);
  kill(getpid(), SIGKILL);
}

static void mode_errno(void) {
  // errno must come out of every allocation call as the program left it.
  errno = 1234;
  void *p = malloc(10);
  printf("after malloc: %d\n", errno);
  p = realloc(p, 1000);
  printf("after realloc: %d\n", errno);
  free(p);
  printf("after free: %d\n", errno);
  free(NULL);
  printf("after free(NULL): %d\n", errno);
  p = calloc(4, 4);
  free(p);
  printf("after calloc/free: %d\n", errno);
}

// n buffers grown by doubling from 16 bytes to 1 MiB and kept (leaked), and n grown by 64-byte
// steps to 64 KiB and freed: most bytes are allocated by reallocs of blocks sampled (if at all)
// while small, the case where a sampled block's weight must follow its size.
static void mode_realloc_grow(void) {
  for (long k = 0; k < n; ++k) {
    char *p = malloc(16);
    for (size_t s = 32; s <= (1u << 20); s *= 2) p = realloc(p, s);
    p[0] = 1;
    keep[k % 64] = p;
  }
  for (long k = 0; k < n; ++k) {
    char *p = NULL;
    for (size_t s = 64; s <= (64u << 10); s += 64) p = realloc(p, s);
    p[0] = 1;
    free(p);
  }
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: alloc_patterns MODE N\n");
    return 2;
  }
  n = atol(argv[2]);
  const char *m = argv[1];
  if (!strcmp(m, "malloc")) mode_malloc();
  else if (!strcmp(m, "calloc")) mode_calloc();
  else if (!strcmp(m, "realloc")) mode_realloc();
  else if (!strcmp(m, "realloc_grow")) mode_realloc_grow();
  else if (!strcmp(m, "aligned")) mode_aligned();
  else if (!strcmp(m, "leak")) mode_leak();
  else if (!strcmp(m, "peak")) mode_peak();
  else if (!strcmp(m, "excursion")) mode_excursion();
  else if (!strcmp(m, "threads")) mode_threads();
  else if (!strcmp(m, "fork")) mode_fork();
  else if (!strcmp(m, "fork_live")) mode_fork_live();
  else if (!strcmp(m, "mmap_threshold")) mode_mmap_threshold();
  else if (!strcmp(m, "arenas")) mode_arenas();
  else if (!strcmp(m, "killed")) mode_killed();
  else if (!strcmp(m, "errno")) mode_errno();
  else {
    fprintf(stderr, "unknown mode %s\n", m);
    return 2;
  }
  printf("done %s %ld\n", m, n);
  return 0;
}
