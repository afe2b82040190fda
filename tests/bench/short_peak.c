// scripts/bench_moments' program: the heap rises to 100 blocks of 262,144 bytes, stays there
// PEAK_MS (argv[1], default 80) milliseconds, and falls back: a peak that a timer-driven snapshot
// (a tick every 100 ms) misses in some runs. With "touch" (argv[2]) every page of the blocks is
// written, so that RSS rises with the heap (by about 25 MiB), for --snapshot-rss-above.
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
  long ms = argc > 1 ? atol(argv[1]) : 80;
  size_t touch = argc > 2 && !strcmp(argv[2], "touch") ? 262144 : 4096;
  char *p[100];
  for (int i = 0; i < 100; i++) {
    p[i] = malloc(262144);
    memset(p[i], 1, touch);
  }
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, 0);
  for (int i = 0; i < 100; i++) free(p[i]);
  return 0;
}
