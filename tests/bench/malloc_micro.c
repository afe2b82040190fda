// Per-call cost of malloc+free pairs: `malloc_micro [N] [size]` prints ns per pair.
// Run natively and under the shim (scripts/bench compares them in one script).
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 20000000;
  size_t size = argc > 2 ? (size_t)atol(argv[2]) : 32;
  void *volatile keep;
  // Warm up the allocator's thread cache and the tracer's shadow pages.
  for (long i = 0; i < 100000; ++i) { keep = malloc(size); free(keep); }
  double t0 = now();
  for (long i = 0; i < n; ++i) {
    keep = malloc(size + (size_t)(i & 15));
    free(keep);
  }
  double t1 = now();
  printf("%.2f ns per malloc+free pair (%ld pairs of ~%zu bytes)\n", (t1 - t0) * 1e9 / (double)n, n, size);
  return 0;
}
