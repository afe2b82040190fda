// A heap for the RSS breakdown's benchmark (scripts/bench_memory): `rss_heap BYTES BLOCK [THREADS]`
// allocates BYTES in blocks of BLOCK bytes, each written, and exits (snapshot at exit). With
// THREADS > 0 the blocks are allocated by that many threads, BYTES / THREADS each, in arenas of
// their own (glibc gives each thread one, up to 8 per CPU); they stay alive, blocked, at the exit
// snapshot, as a server's workers would be. Prints "blocks N" and "bytes N" (what it allocated).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long g_bytes_per_thread, g_block;
static pthread_barrier_t g_ready;
static int g_block_pipe[2];

static void fill(void) {
  long n = g_bytes_per_thread / g_block;
  void **keep = malloc(sizeof(void *) * (size_t)n);
  if (!keep) exit(2);
  for (long i = 0; i < n; ++i) {
    keep[i] = malloc((size_t)g_block);
    if (!keep[i]) exit(2);
    memset(keep[i], 1, (size_t)g_block);
  }
}

static void *worker(void *arg) {
  (void)arg;
  fill();
  pthread_barrier_wait(&g_ready);
  char c;
  (void)!read(g_block_pipe[0], &c, 1);  /* never written: the exit ends the thread */
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: rss_heap BYTES BLOCK [THREADS]\n");
    return 2;
  }
  long total = atol(argv[1]);
  g_block = atol(argv[2]);
  int threads = argc > 3 ? atoi(argv[3]) : 0;
  if (total <= 0 || g_block <= 0 || threads < 0 || threads > 1024 || pipe(g_block_pipe) != 0) return 2;
  if (threads == 0) {
    g_bytes_per_thread = total;
    fill();
  } else {
    g_bytes_per_thread = total / threads;
    pthread_barrier_init(&g_ready, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; ++i) {
      pthread_t t;
      if (pthread_create(&t, NULL, worker, NULL) != 0) return 2;
    }
    pthread_barrier_wait(&g_ready);
  }
  long per = g_bytes_per_thread / g_block;
  printf("blocks %ld\nbytes %ld\n", per * (threads ? threads : 1), per * (threads ? threads : 1) * g_block);
  return 0;
}
