// A library preloaded next to the shim whose constructor allocates (and starts a thread that keeps
// allocating) before the shim's own constructor has run: LD_PRELOAD=<shim>:<this> makes the
// loader run this constructor first. tests/programs/misbehave.c (mode "early") then frees and
// reallocates the blocks it made, and stops the thread.
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *blocks[3];
static pthread_t worker;
static int worker_started;
static atomic_int stop_flag;
static atomic_long rounds;

static void *early_worker(void *arg) {
  (void)arg;
  void *keep[8] = {0};
  for (long i = 0; !atomic_load(&stop_flag); ++i) {
    free(keep[i % 8]);
    keep[i % 8] = malloc(1 + (size_t)(i % 900));
    if (i % 3 == 0) keep[(i + 1) % 8] = realloc(keep[(i + 1) % 8], 2000);
    atomic_fetch_add(&rounds, 1);
    if (i % 1000 == 999) usleep(100);
  }
  for (int k = 0; k < 8; ++k) free(keep[k]);
  return NULL;
}

__attribute__((constructor)) static void early_init(void) {
  // Was the shim already running? Its constructor creates the capture file. The answer goes to a
  // side file named by MISBEHAVE_EARLY_SIDE (never to stdout: native and traced output must match).
  const char *out = getenv("HEAPSNAP_OUTPUT");
  const char *side = getenv("MISBEHAVE_EARLY_SIDE");
  if (side) {
    int fd = open(side, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      const char *msg = out && access(out, F_OK) == 0 ? "shim-first\n" : "early-first\n";
      ssize_t r = write(fd, msg, strlen(msg));
      (void)r;
      close(fd);
    }
  }
  blocks[0] = malloc(123);
  blocks[1] = calloc(1, 4000);
  if (posix_memalign(&blocks[2], 64, 64) != 0) blocks[2] = NULL;
  char *s = strdup("a string from a constructor");
  s = realloc(s, 1000);
  free(s);
  void *big = malloc(300000);  // mmapped by glibc
  free(big);
  worker_started = pthread_create(&worker, NULL, early_worker, NULL) == 0;
  while (worker_started && atomic_load(&rounds) < 1000) usleep(100);
}

long early_rounds(void) { return atomic_load(&rounds); }

void *early_take(int i) { return i >= 0 && i < 3 ? blocks[i] : NULL; }

long early_stop(void) {
  atomic_store(&stop_flag, 1);
  if (worker_started) pthread_join(worker, NULL);
  worker_started = 0;
  return atomic_load(&rounds);
}
