// Heaps at the edges of the snapshot and peak machinery, one per mode (snapshot_edges MODE):
//   merged        a program's own anonymous mapping right above one of glibc's mmapped chunks, so
//                 that the kernel merges them into one mapping; the mapping holds the only
//                 pointers to a 5000-byte block and to the 1 MiB chunk. Prints "merged 1" when the
//                 two share a mapping (else the case proves nothing and says so).
//   exit_threads  8 threads keep replacing the blocks of a global ring of 8 x 2000 slots; main
//                 returns without stopping them. Every block is held by the ring.
//   fork          100 blocks of 1000 bytes, then fork; the child allocates 50 of 3000 bytes (its
//                 brk heap grows in a mapping of its own, next to the one fork copied), prints
//                 their addresses and exits (its exit snapshot must hold all 150).
//   peak          one block of 200,000 bytes held for 0.3 s, then freed, then 0.5 s idle: the peak
//                 is 200,000 bytes, in the first 0.3 s.
//   peak_threads  8 threads each hold a block of 250,000 bytes at the same time for 0.3 s: a
//                 peak of 2,000,000 bytes although no thread moves the heap by 256 KiB.
//   threads_threshold  8 threads each hold a block of 200,000 bytes (no thread folds: each is under
//                 256 KiB) until the heap-threshold snapshot's child has forked (it writes its
//                 .tmp file next to $HEAPSNAP_OUTPUT, seen by inotify; at most 60 s): a threshold of 1 MB is crossed by the
//                 threads' sum, not by any one thread's fold (the writer's backstop).
//   rss_burst     128 blocks of 1 MiB (each mapped on its own), written as they come, then freed
//                 (unmapped): RSS rises by 128 MiB and falls back within about 100 ms.
//   rss_mapped    RSS rises by 96 MiB in the program's own mapping, written, with no allocation,
//                 held until the first snapshot's child has forked (as threads_threshold; prints
//                 "snapshot started 1"), then unmapped.
//   several_peaks three peaks of 40, 120 and 80 blocks of 250,000 bytes, each freed before the
//                 next: the run's maximum is the second, 30,000,000 bytes.
//   dipping_rise  120 steps, each 8 blocks of 100,000 bytes and then 3 of them freed, the rest held
//                 by a global: a rise of 800 KB and a dip of 300 KB a step, under 5% of the heap
//                 from the 13th step on. The maximum is in the last step, 60,300,000.
//   child_name    short_peak, then the names (comm) of the program's child processes, one
//                 "child NAME" line each, once one is named heapsnap-snap (the kept at-peak
//                 snapshot's child names itself as it starts; at most 60 s), or all of them then.
//   fall_and_stay 40 blocks of 250,000 bytes held by a global, then 36 of them freed: the heap falls
//                 to a tenth of its peak and stays there until the child named heapsnap-snap (the
//                 kept at-peak one, forked at the fall) has ended, a zombie or waited for (it
//                 scanned before the end; at most 60 s), printing "scanned 1" (or "scanned 0" when
//                 it did not, "scanned -1" when there was none), then until it has been waited for
//                 (gone from /proc: not left a zombie until the end; at most 60 s), printing
//                 "reaped 1" (or 0), then the rest are freed.
//   peak_at_exit  100 blocks of 250,000 bytes held by a global until the end: the maximum is at exit.
//   slow_growth   a 2 MB table from fixed_table at start, then 400 blocks of 100,000 bytes from
//                 leak_slowly, all held by a global list: the heap grows steadily to 42 MB.
//   big_array     one malloc'd array of 100,000 pointers, each to a block of 100 bytes, held by a
//                 global: every block is reachable through the array.
//   mesh          200,000 blocks of 16..400 bytes (about 40 MB, many of the snapshot scan's chunks),
//                 each holding 0..3 pointers to other blocks (to their start, inside them, or the
//                 same one twice in a row) from a fixed pseudo-random sequence; a global holds
//                 every 500th: chains, shared parts, and lost ones. The same graph every run.
//   static_pool   2,500 malloc blocks held by a global array, and a client-API pool whose arena
//                 is a static array in the same .bss, holding 10 objects (the global holds them).
//   tls           a block held only by a __thread pointer of the main thread (its static TLS
//                 block: ld.so maps it right after the last library, and the kernel merges it with
//                 that library's .bss mapping). Prints its address.
//   mmap_pool     a pool whose arena is the program's own mmap (a runtime's GC heap): object A
//                 held by a global, B held only by a dead object's stale bytes, and a 5000-byte
//                 malloc block held only from the arena's free room. B and the block are lost.
//   churn         malloc and free of 64 MiB in a loop for 0.5 s: the peak is 64 MiB.
//   requests N    N calls of heapsnap_snapshot("rK") back to back, then exit.
//   realloc_moves 200 blocks of 24 bytes from realloc_first (one malloc call), 100 ms, then 100 of
//                 them grown to 5,000 bytes by realloc (moved), all held by a global; prints
//                 "moved N": a block keeps its first allocation's site and time in a snapshot.
//   cursor_start  a global holds a 16-byte block whose words are {a cursor into a 4,096-byte
//                 block, that block's start}, as git's mem pools do: the block is reachable by its
//                 start pointer, not only "possibly" through the cursor.
//   grow          100 blocks of 100 bytes from grow_first, SIGUSR2 (a snapshot when recorded with
//                 --snapshot-on-signal=USR2), then 50 of 200 bytes from grow_second, SIGUSR2.
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "heapsnap.h"

void **g_region;

// Whether [a, a+1) and [b, b+1) lie in one line of /proc/self/maps.
static int same_mapping(uintptr_t a, uintptr_t b) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  int same = 0;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi) same = b >= lo && b < hi;
  }
  if (f) fclose(f);
  return same;
}

static int merged(void) {
  const size_t big = 1 << 20;
  char *chunk = malloc(big);  // above the mmap threshold: a chunk of its own mapping
  memset(chunk, 1, 64);
  uint64_t head = ((uint64_t *)chunk)[-1];
  uintptr_t chunk_start = (uintptr_t)chunk - 16, chunk_end = chunk_start + (head & ~(uint64_t)7);
  // The program's mapping right below or right above the chunk, with the same protection: one
  // mapping for the kernel.
  const size_t len = 1 << 16;
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE;
  g_region = mmap((void *)(chunk_start - len), len, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (g_region == MAP_FAILED) g_region = mmap((void *)chunk_end, len, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (g_region == MAP_FAILED) g_region = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  g_region[0] = malloc(5000);
  memset(g_region[0], 2, 5000);
  g_region[1] = chunk;
  printf("merged %d\n", same_mapping((uintptr_t)g_region, (uintptr_t)chunk));
  printf("small %p\nbig %p\n", g_region[0], (void *)chunk);
  chunk = NULL;
  return 0;
}

#define RING_THREADS 8
#define RING_SLOTS 2000
void *g_ring[RING_THREADS][RING_SLOTS];
static atomic_int g_started;

static void *ring_worker(void *arg) {
  long id = (long)arg;
  unsigned seed = (unsigned)id * 7919u + 1u;
  for (int i = 0; i < RING_SLOTS; i++) g_ring[id][i] = calloc(1, 64);
  atomic_fetch_add(&g_started, 1);
  for (;;) {
    int i = rand_r(&seed) % RING_SLOTS;
    void *p = malloc(16 + rand_r(&seed) % 2000);
    memset(p, 0, 16);
    void *old = g_ring[id][i];
    g_ring[id][i] = p;
    free(old);
  }
  return NULL;
}

static int exit_threads(void) {
  pthread_t t;
  for (long i = 0; i < RING_THREADS; i++) pthread_create(&t, NULL, ring_worker, (void *)i);
  while (atomic_load(&g_started) < RING_THREADS) usleep(1000);
  usleep(300000);
  return 0;  // the workers are still replacing blocks
}

void *g_parent_blocks[100], *g_child_blocks[50];

static int forked(void) {
  for (int i = 0; i < 100; i++) g_parent_blocks[i] = malloc(1000);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    for (int i = 0; i < 50; i++) g_child_blocks[i] = malloc(3000);
    for (int i = 0; i < 50; i++) printf("child_block %p\n", g_child_blocks[i]);
    printf("child_pid %d\n", (int)getpid());
    exit(0);
  }
  int status;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static int peak(void) {
  char *volatile p = malloc(200000);
  memset(p, 1, 200000);
  usleep(300000);
  free(p);
  usleep(500000);
  return 0;
}

// 100 blocks of 250,000 bytes, freed at once: a 25,000,000-byte peak far shorter than the writer's
// 100 ms tick (--snapshot-heap-above 20M: the 84th block crosses 20 MiB, 21,000,000 bytes).
static void one_peak(int n) {
  char *volatile p[120];
  for (int i = 0; i < n; i++) p[i] = malloc(250000);
  for (int i = 0; i < n; i++) free(p[i]);
}

static int several_peaks(void) {
  one_peak(40);
  one_peak(120);
  one_peak(80);
  printf("peak %d\n", 120 * 250000);
  return 0;
}

void *g_held[100];

struct leak_node {
  struct leak_node *next;
  char payload[100000 - sizeof(void *)];
};
struct leak_node *g_leaks;
char *g_table;

__attribute__((noinline)) static void fixed_table(void) { g_table = malloc(2000000); }
__attribute__((noinline)) static void leak_slowly(void) {
  struct leak_node *n = malloc(sizeof(struct leak_node));
  n->next = g_leaks;
  g_leaks = n;
}

static int slow_growth(void) {
  fixed_table();
  for (int i = 0; i < 400; i++) leak_slowly();
  printf("grown %d\n", 2000000 + 400 * 100000);
  return 0;
}

void *g_rising[120 * 5];
static int dipping_rise(void) {
  size_t n = 0;
  for (int step = 0; step < 120; step++) {
    void *b[8];
    for (int i = 0; i < 8; i++) b[i] = malloc(100000);
    for (int i = 5; i < 8; i++) free(b[i]);
    for (int i = 0; i < 5; i++) g_rising[n++] = b[i];
  }
  printf("peak %d\n", 119 * 5 * 100000 + 8 * 100000);
  return 0;
}

static int peak_at_exit(void) {
  for (int i = 0; i < 100; i++) g_held[i] = malloc(250000);
  printf("peak %d\n", 100 * 250000);
  return 0;
}

static int short_peak(void) {
  char *volatile p[100];
  for (int i = 0; i < 100; i++) p[i] = malloc(250000);
  for (int i = 0; i < 100; i++) free(p[i]);
  printf("peak %d\n", 100 * 250000);
  return 0;
}

// The names of this process's children (from /proc/PID/stat, whose fourth field is the parent);
// 1 if one of them is `want`.
static int print_children(const char *want, int print) {
  int found = 0;
  DIR *d = opendir("/proc");
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    char path[300], buf[512], name[64];
    int pid, ppid;
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    char *close_paren = strrchr(buf, ')'), *open_paren = strchr(buf, '(');
    if (!close_paren || !open_paren || sscanf(buf, "%d", &pid) != 1) continue;
    if (sscanf(close_paren + 1, " %*c %d", &ppid) != 1 || ppid != getpid()) continue;
    snprintf(name, sizeof(name), "%.*s", (int)(close_paren - open_paren - 1), open_paren + 1);
    if (!strcmp(name, want)) found = 1;
    if (print) printf("child %s\n", name);
  }
  closedir(d);
  return found;
}

// The state (ps's S, R, Z...) of this process's child named `want`, or 0 if it has none.
static char child_state(const char *want) {
  char state = 0;
  DIR *d = opendir("/proc");
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    char path[300], buf[512], name[64], st;
    int ppid;
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    char *close_paren = strrchr(buf, ')'), *open_paren = strchr(buf, '(');
    if (!close_paren || !open_paren) continue;
    if (sscanf(close_paren + 1, " %c %d", &st, &ppid) != 2 || ppid != getpid()) continue;
    snprintf(name, sizeof(name), "%.*s", (int)(close_paren - open_paren - 1), open_paren + 1);
    if (!strcmp(name, want)) state = st;
  }
  closedir(d);
  return state;
}

static int fall_and_stay(void) {
  static char *volatile held[40];
  for (int i = 0; i < 40; i++) {
    held[i] = malloc(250000);
    memset(held[i], 1, 250000);
  }
  for (int i = 4; i < 40; i++) free(held[i]);
  // The fork was made at the first free of the fall, which waited for it: the child is there.
  int scanned = child_state("heapsnap-snap") ? 0 : -1;
  for (int i = 0; i < 600 && scanned == 0; i++) {
    const char st = child_state("heapsnap-snap");
    scanned = st == 0 || st == 'Z';
    if (!scanned) usleep(100000);
  }
  printf("scanned %d\n", scanned);
  int reaped = 0;
  for (int i = 0; i < 600 && scanned == 1 && !reaped; i++) {
    reaped = child_state("heapsnap-snap") == 0;
    if (!reaped) usleep(100000);
  }
  printf("reaped %d\n", reaped);
  for (int i = 0; i < 4; i++) free(held[i]);
  return 0;
}

static int child_name(void) {
  short_peak();
  for (int i = 0; i < 600 && !print_children("heapsnap-snap", 0); i++) usleep(100000);
  print_children("heapsnap-snap", 1);
  return 0;
}

// RSS rises by 128 MiB in about as many milliseconds, in 1 MiB blocks written as they come (mapped
// each on its own: over the mmap threshold), then falls back as they are freed (unmapped): the
// writer's ticks may see none of it.
static int rss_burst(void) {
  enum { kBlocks = 128, kBlock = 1 << 20 };
  char *volatile p[kBlocks];
  for (int i = 0; i < kBlocks; i++) {
    p[i] = malloc(kBlock);
    memset(p[i], 0x5a, kBlock);
  }
  for (int i = 0; i < kBlocks; i++) free(p[i]);
  usleep(300000);
  return 0;
}

static pthread_barrier_t g_barrier;

static void *peak_worker(void *arg) {
  char *volatile p = malloc(250000);
  memset(p, 1, 250000);
  pthread_barrier_wait(&g_barrier);  // all 8 blocks live
  pthread_barrier_wait(&g_barrier);
  free(p);
  return arg;
}

static int peak_threads(void) {
  pthread_t t[8];
  pthread_barrier_init(&g_barrier, NULL, 9);
  for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, peak_worker, NULL);
  pthread_barrier_wait(&g_barrier);
  usleep(300000);
  pthread_barrier_wait(&g_barrier);
  for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
  return 0;
}

static void *threshold_worker(void *arg) {
  char *volatile p = malloc(200000);
  memset(p, 1, 200000);
  pthread_barrier_wait(&g_barrier);  // all 8 blocks live
  pthread_barrier_wait(&g_barrier);  // the snapshot has started
  free(p);
  return arg;
}

// Whether a file named `name` in the watched directory is written to within 60 s (inotify: events
// are queued, so a file written and removed again between two looks is not missed). The snapshot's
// file is created before the fork, and first written by the snapshot child: after the fork.
static int wait_written(int fd, const char *name) {
  char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
  for (int waited = 0; waited < 600;) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) { waited++; continue; }
    ssize_t n = read(fd, buf, sizeof(buf));
    for (ssize_t off = 0; n > 0 && off < n;) {
      struct inotify_event *e = (struct inotify_event *)(buf + off);
      if (e->len && (e->mask & IN_MODIFY) && !strcmp(e->name, name)) return 1;
      off += (ssize_t)sizeof(*e) + e->len;
    }
  }
  return 0;
}

// An inotify descriptor watching the directory of $HEAPSNAP_OUTPUT, and the name of the first
// snapshot's .tmp file in it; -1 if there is no output path or no inotify.
static int watch_first_snapshot(char (*name)[4200]) {
  const char *out = getenv("HEAPSNAP_OUTPUT");
  if (!out) return -1;
  char dir[4200];
  snprintf(dir, sizeof(dir), "%s", out);
  char *slash = strrchr(dir, '/');
  snprintf(*name, sizeof(*name), "%s.snapshot-0.tmp", slash ? slash + 1 : out);
  if (slash) *slash = 0; else snprintf(dir, sizeof(dir), ".");
  int fd = inotify_init1(IN_CLOEXEC);
  if (fd < 0 || inotify_add_watch(fd, dir, IN_MODIFY) < 0) return -1;
  return fd;
}

static int rss_mapped(void) {
  char name[4200];
  int fd = watch_first_snapshot(&name);
  if (fd < 0) return 3;
  size_t len = (size_t)96 << 20;
  char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 4;
  memset(m, 0x5a, len);
  int seen = wait_written(fd, name);
  munmap(m, len);
  printf("snapshot started %d\n", seen);
  return 0;
}

static int threads_threshold(void) {
  char name[4200];
  int fd = watch_first_snapshot(&name);
  if (fd < 0) return 3;
  pthread_t t[8];
  pthread_barrier_init(&g_barrier, NULL, 9);
  for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, threshold_worker, NULL);
  pthread_barrier_wait(&g_barrier);
  int seen = wait_written(fd, name);
  pthread_barrier_wait(&g_barrier);
  for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
  printf("snapshot started %d\n", seen);
  return 0;
}

void **g_array;

static int big_array(void) {
  const int n = 100000;
  g_array = malloc(n * sizeof(void *));
  for (int i = 0; i < n; i++) g_array[i] = malloc(100);
  return 0;
}

void **g_mesh_roots;

static int mesh(void) {
  const int n = 200000;
  char **b = malloc(n * sizeof(char *));
  size_t *size = malloc(n * sizeof(size_t));
  uint64_t x = 88172645463325252ull;
#define MESH_NEXT() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)
  for (int i = 0; i < n; i++) {
    size[i] = 16 + MESH_NEXT() % 385;
    b[i] = calloc(1, size[i]);
  }
  for (int i = 0; i < n; i++) {
    size_t words = size[i] / 8;
    int links = (int)(MESH_NEXT() % 4);
    for (int l = 0; l < links; l++) {
      int t = (int)(MESH_NEXT() % n);
      size_t at = MESH_NEXT() % words;
      uint64_t how = MESH_NEXT() % 4;
      char *target = b[t] + (how == 1 ? 8 * (MESH_NEXT() % (size[t] / 8)) : 0);  // 1: inside it
      ((char **)b[i])[at] = target;
      if (how == 2 && at + 1 < words) ((char **)b[i])[at + 1] = target;  // twice in a row: one edge
    }
  }
#undef MESH_NEXT
  g_mesh_roots = malloc((n / 500) * sizeof(void *));
  for (int i = 0; i < n / 500; i++) g_mesh_roots[i] = b[i * 500];
  free(b);
  free(size);
  return 0;
}

void *g_keep[3000];  // not static: the compiler may not drop stores it cannot see read
char g_arena[1 << 16];

static int static_pool(void) {
  heapsnap_pool *pool = heapsnap_pool_create("static arena");
  for (int i = 0; i < 2500; i++) g_keep[i] = malloc(200);
  // Objects at the arena's end, in the same page-aligned mapping as g_keep (the .bss past the
  // data segment's last page is an anonymous mapping of its own).
  for (int i = 0; i < 10; i++) {
    char *o = g_arena + sizeof g_arena - 256 * (i + 1);
    heapsnap_pool_alloc(pool, o, 256);
    g_keep[2500 + i] = o;
  }
  return 0;
}

__thread void *t_held;

static int tls(void) {
  t_held = malloc(12345);
  printf("tls_block %p\n", t_held);
  return 0;
}

void *g_pool_live, *g_pool_after;

// The block's address stays in this frame: no register or stack slot of main keeps it.
__attribute__((noinline)) static void stash_in(unsigned char *slot) {
  void *m = malloc(5000);
  memset(m, 7, 5000);
  *(void *volatile *)slot = m;
}

static int mmap_pool(void) {
  unsigned char *arena = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  heapsnap_pool *pool = heapsnap_pool_create("gc");
  void *a = arena + 4096, *b = arena + 8192, *c = arena + 12288;
  heapsnap_pool_alloc(pool, a, 256);
  heapsnap_pool_alloc(pool, b, 256);
  heapsnap_pool_alloc(pool, c, 256);
  *(void **)c = b;  // c points to b, then dies: its stale bytes stay in the arena
  heapsnap_pool_free(pool, c);
  stash_in(arena + 16384);  // the arena's free room (a runtime's bookkeeping) holds a block
  // A block after it: glibc's top-chunk pointer (in libc's data, a root) points at the end of
  // the latest chunk, which is inside that block's usable size.
  g_pool_after = calloc(1, 6000);  // (no freed chunk this big: carved from the top, after it)
  g_pool_live = a;
  printf("lost %p\n", b);
  return 0;
}

static int churn(void) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    for (int i = 0; i < 100; ++i) {
      char *volatile p = malloc(64u << 20);
      free(p);
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 500000000L);
  return 0;
}

static int requests(int n) {
  char label[16];
  for (int k = 1; k <= n; k++) {
    snprintf(label, sizeof label, "r%d", k);
    heapsnap_snapshot(label);
  }
  return 0;
}

void *g_grown[150];

__attribute__((noinline)) static void grow_first(void) {
  for (int i = 0; i < 100; i++) g_grown[i] = malloc(100);
}

__attribute__((noinline)) static void grow_second(void) {
  for (int i = 100; i < 150; i++) g_grown[i] = malloc(200);
}

static int grow(void) {
  grow_first();
  raise(SIGUSR2);
  usleep(400000);  // the writer serves the request on its next tick (100 ms)
  grow_second();
  raise(SIGUSR2);
  usleep(400000);
  return 0;
}

static void *g_realloced[200];

__attribute__((noinline)) static void realloc_first(void) {
  for (int i = 0; i < 200; i++) {
    g_realloced[i] = malloc(24);
    memset(g_realloced[i], 0, 24);
  }
}

static int realloc_moves(void) {
  realloc_first();
  usleep(100000);
  int moved = 0;
  for (int i = 0; i < 200; i += 2) {
    void *old = g_realloced[i];
    g_realloced[i] = realloc(old, 5000);
    moved += g_realloced[i] != old;
  }
  printf("moved %d\n", moved);
  return 0;
}

static char **g_cursor_pair;

static int cursor_start(void) {
  g_cursor_pair = malloc(2 * sizeof(char *));
  char *block = malloc(4096);
  memset(block, 0, 4096);
  g_cursor_pair[0] = block + 537;  // the cursor first, the start second
  g_cursor_pair[1] = block;
  printf("block %p\n", (void *)block);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  const char *m = argc > 1 ? argv[1] : "";
  if (!strcmp(m, "merged")) return merged();
  if (!strcmp(m, "exit_threads")) return exit_threads();
  if (!strcmp(m, "fork")) return forked();
  if (!strcmp(m, "peak")) return peak();
  if (!strcmp(m, "peak_threads")) return peak_threads();
  if (!strcmp(m, "short_peak")) return short_peak();
  if (!strcmp(m, "child_name")) return child_name();
  if (!strcmp(m, "fall_and_stay")) return fall_and_stay();
  if (!strcmp(m, "rss_burst")) return rss_burst();
  if (!strcmp(m, "rss_mapped")) return rss_mapped();
  if (!strcmp(m, "several_peaks")) return several_peaks();
  if (!strcmp(m, "slow_growth")) return slow_growth();
  if (!strcmp(m, "peak_at_exit")) return peak_at_exit();
  if (!strcmp(m, "dipping_rise")) return dipping_rise();
  if (!strcmp(m, "threads_threshold")) return threads_threshold();
  if (!strcmp(m, "grow")) return grow();
  if (!strcmp(m, "big_array")) return big_array();
  if (!strcmp(m, "mesh")) return mesh();
  if (!strcmp(m, "static_pool")) return static_pool();
  if (!strcmp(m, "requests") && argc > 2) return requests(atoi(argv[2]));
  if (!strcmp(m, "tls")) return tls();
  if (!strcmp(m, "mmap_pool")) return mmap_pool();
  if (!strcmp(m, "churn")) return churn();
  if (!strcmp(m, "realloc_moves")) return realloc_moves();
  if (!strcmp(m, "cursor_start")) return cursor_start();
  fprintf(stderr, "usage: snapshot_edges merged|exit_threads|fork|peak|peak_threads|grow|big_array|static_pool\n");
  return 2;
}
