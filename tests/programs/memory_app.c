/* Situations for `heapsnap memory` (tests/integration/memory_cases.py), one per mode, each made on
 * purpose and with the figures the program itself knows printed as "key value" lines:
 *   arenas    6 threads, each allocating in its own arena, freeing 3 of every 4 blocks
 *   fragment  many small blocks in the main arena, every other one freed
 *   trim      64 MiB freed at the end of the brk heap, not returned (M_TRIM_THRESHOLD raised)
 *   stacks    4 threads with 32 MiB stacks, each touched 4 MiB deep once, now shallow
 *   mmaps     the program's own anonymous mappings, touched (one whole, one an eighth)
 *   caches    in the main arena, 100 freed blocks of 64 bytes and 100 of 200, each between two live
 *             ones: 7 of each size in the main thread's tcache, the other 93 of 64 in a fastbin
 *             (chunks of 80 bytes), the other 93 of 200 in the bins (chunks of 208: no fastbin)
 *   threads2, threads16   2 or 16 threads that each allocate one small block and wait: the
 *             program maps nothing of its own for them but their stacks (the tracer's per-thread
 *             memory, mimalloc's thread data, must not show as the program's anonymous memory)
 *   skew      a snapshot asked for (heapsnap_snapshot), then, once its child has forked and before
 *             it reads smaps (the test hook HEAPSNAP_TEST_CHILD_HANDSHAKE=DIR), 128 MiB mapped
 *             before the fork and 64 MiB mapped after it are touched: none of it is the snapshot's
 *   hugetlb   a private and a shared MAP_HUGETLB mapping of one huge page each, written: not in
 *             VmRSS (nor in smaps' Rss); "hugetlb_unavailable ERRNO" when the system has no huge
 *             pages to give (/proc/sys/vm/nr_hugepages), for the test to skip
 * A second argument "wait": after the situation is made, wait for a byte (or EOF) on stdin before
 * returning, so that a test can let the writer tick as often as it needs without a sleep.
 * Threads stay blocked on a pipe while main returns: the exit snapshot sees them. Every page the
 * test counts on is written (no THP or zero-page assumption). */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "heapsnap.h"

static int g_block[2];  /* threads wait on it forever (exit ends them) */
static pthread_barrier_t g_ready;

/* --- arenas -------------------------------------------------------------------------------- */
enum { kArenaThreads = 6, kArenaBlocks = 2048, kArenaBlock = 4096 };
static void *arena_thread(void *arg) {
  (void)arg;
  static __thread void *blocks[kArenaBlocks];
  for (int i = 0; i < kArenaBlocks; ++i) {
    blocks[i] = malloc(kArenaBlock);
    memset(blocks[i], 1, kArenaBlock);
  }
  for (int i = 0; i < kArenaBlocks; ++i)
    if (i % 4 != 3) {
      free(blocks[i]);
      blocks[i] = NULL;
    }
  pthread_barrier_wait(&g_ready);
  char c;
  (void)!read(g_block[0], &c, 1);
  return NULL;
}

/* --- threads2, threads16 ------------------------------------------------------------------ */
static void *small_thread(void *arg) {
  (void)arg;
  void *p = malloc(64);
  memset(p, 1, 64);
  pthread_barrier_wait(&g_ready);
  char c;
  (void)!read(g_block[0], &c, 1);
  free(p);
  return NULL;
}

/* --- stacks -------------------------------------------------------------------------------- */
enum { kStackThreads = 4 };
#define kStackSize (32u << 20)
#define kStackTouch (4u << 20)
static __attribute__((noinline)) void touch_deep(void) {
  char buf[kStackTouch];
  memset(buf, 1, sizeof(buf));
  __asm__ volatile("" : : "r"(buf) : "memory");
}
static void *stack_thread(void *arg) {
  (void)arg;
  touch_deep();
  pthread_barrier_wait(&g_ready);
  char c;
  (void)!read(g_block[0], &c, 1);
  return NULL;
}

static void start_threads(int n, void *(*fn)(void *), size_t stack) {
  pthread_barrier_init(&g_ready, NULL, (unsigned)n + 1);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (stack) pthread_attr_setstacksize(&attr, stack);
  for (int i = 0; i < n; ++i) {
    pthread_t t;
    if (pthread_create(&t, &attr, fn, NULL) != 0) {
      perror("pthread_create");
      exit(2);
    }
  }
  pthread_barrier_wait(&g_ready);
}

/* --- skew ---------------------------------------------------------------------------------- */
static int wait_for_file(const char *path) {
  for (int i = 0; i < 60000; ++i) {  /* the child's own wait is 30 s */
    if (access(path, F_OK) == 0) return 1;
    usleep(1000);
  }
  return 0;
}
static int skew(long page) {
  const char *dir = getenv("HEAPSNAP_TEST_CHILD_HANDSHAKE");
  if (!dir) {
    fprintf(stderr, "memory_app skew: HEAPSNAP_TEST_CHILD_HANDSHAKE is not set\n");
    return 2;
  }
  char forked[4096], go[4096];
  snprintf(forked, sizeof(forked), "%s/forked", dir);
  snprintf(go, sizeof(go), "%s/go", dir);
  size_t before = 128u << 20, after = 64u << 20;
  char *a = mmap(NULL, before, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (a == MAP_FAILED) return 2;
  heapsnap_snapshot("before the touch");
  if (!wait_for_file(forked)) {
    fprintf(stderr, "memory_app skew: no snapshot child said it forked\n");
    return 3;
  }
  char *b = mmap(NULL, after, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (b == MAP_FAILED) return 2;
  for (size_t o = 0; o < before; o += (size_t)page) a[o] = 1;
  for (size_t o = 0; o < after; o += (size_t)page) b[o] = 1;
  int fd = open(go, O_WRONLY | O_CREAT, 0600);
  if (fd < 0) return 2;
  close(fd);
  printf("touched_after_fork %zu\n", before + after);
  return 0;
}

/* --- hugetlb ------------------------------------------------------------------------------- */
static int hugetlb(void) {
  size_t huge = 0;
  FILE *f = fopen("/proc/meminfo", "r");
  char line[256];
  while (f && fgets(line, sizeof(line), f))
    if (sscanf(line, "Hugepagesize: %zu kB", &huge) == 1) huge <<= 10;
  if (f) fclose(f);
  if (!huge) {
    printf("hugetlb_unavailable 0\n");
    return 0;
  }
  char *p = mmap(NULL, huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  char *s = p == MAP_FAILED ? MAP_FAILED : mmap(NULL, huge, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  if (p == MAP_FAILED || s == MAP_FAILED) {
    printf("hugetlb_unavailable %d\n", errno);
    return 0;
  }
  memset(p, 1, huge);  /* (a huge page that cannot be had now is SIGBUS: the reservation at mmap says it can) */
  memset(s, 1, huge);
  printf("hugetlb_bytes %zu\n", 2 * huge);
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (pipe(g_block) != 0) return 2;
  long page = sysconf(_SC_PAGESIZE);
  if (strcmp(mode, "arenas") == 0) {
    start_threads(kArenaThreads, arena_thread, 0);
    printf("threads %d\n", kArenaThreads);
    printf("live_per_thread %d\n", kArenaBlocks / 4 * kArenaBlock);
    printf("freed_per_thread %d\n", kArenaBlocks / 4 * 3 * kArenaBlock);
  } else if (strcmp(mode, "fragment") == 0) {
    enum { n = 200000, size = 256 };
    static void *blocks[n];
    for (int i = 0; i < n; ++i) {
      blocks[i] = malloc(size);
      memset(blocks[i], 1, size);
    }
    for (int i = 0; i < n; i += 2) free(blocks[i]);
    printf("live_bytes %d\n", n / 2 * size);
    printf("freed_bytes %d\n", n / 2 * size);
  } else if (strcmp(mode, "trim") == 0) {
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    enum { n = 1024, size = 64 << 10 };
    static void *blocks[n];
    void *keep = malloc(1000);  /* before them: the freed run ends at the top */
    for (int i = 0; i < n; ++i) {
      blocks[i] = malloc(size);
      memset(blocks[i], 1, size);
    }
    for (int i = n - 1; i >= 0; --i) free(blocks[i]);
    printf("freed_bytes %d\n", n * size);
    printf("keep %d\n", keep != NULL);
  } else if (strcmp(mode, "stacks") == 0) {
    start_threads(kStackThreads, stack_thread, kStackSize);
    printf("threads %d\n", kStackThreads);
    printf("stack_size %u\n", kStackSize);
    printf("stack_touched %u\n", kStackTouch);
  } else if (strcmp(mode, "hugetlb") == 0) {
    if (hugetlb() != 0) return 2;
  } else if (strcmp(mode, "mmaps") == 0) {
    size_t whole = 48u << 20, part = 32u << 20, touched = 0;
    char *a = mmap(NULL, whole, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *b = mmap(NULL, part, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED || b == MAP_FAILED) return 2;
    for (size_t o = 0; o < whole; o += (size_t)page) a[o] = 1, touched += (size_t)page;
    for (size_t o = 0; o < part / 8; o += (size_t)page) b[o] = 1, touched += (size_t)page;
    printf("mapped_bytes %zu\n", whole + part);
    printf("touched_bytes %zu\n", touched);
  } else if (strcmp(mode, "caches") == 0) {
    /* stdout's buffer first: a large malloc later would consolidate the fastbins. */
    printf("tcache_per_size %d\n", 7);
    fflush(stdout);
    enum { n = 100 };
    static void *small[n], *mid[n], *keep[2 * n];
    for (int i = 0; i < n; ++i) {
      small[i] = malloc(64);
      keep[2 * i] = malloc(64);
      mid[i] = malloc(200);
      keep[2 * i + 1] = malloc(64);
      memset(small[i], 1, 64);
      memset(mid[i], 1, 200);
    }
    for (int i = 0; i < n; ++i) free(small[i]);
    for (int i = 0; i < n; ++i) free(mid[i]);
    printf("small_chunk %d\n", 80);
    printf("mid_chunk %d\n", 208);
    printf("freed_per_size %d\n", n);
    printf("kept %d\n", keep[0] != NULL);
  } else if (strcmp(mode, "threads2") == 0 || strcmp(mode, "threads16") == 0) {
    int n = atoi(mode + 7);
    start_threads(n, small_thread, 0);
    printf("threads %d\n", n);
  } else if (strcmp(mode, "skew") == 0) {
    int rc = skew(page);
    if (rc) return rc;
  } else {
    fprintf(stderr, "usage: memory_app arenas|fragment|trim|stacks|mmaps|caches|threads2|threads16|skew [wait]\n");
    return 2;
  }
  fflush(stdout);
  if (argc > 2 && strcmp(argv[2], "wait") == 0) {
    char c;
    (void)!read(0, &c, 1);
  }
  return 0;
}
