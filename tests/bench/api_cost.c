// Cost of a client-API call when the tracer is not loaded (the weak symbol is null): cycles per
// call against an empty loop, the way DTrace's authors measured disabled probes.
//   cc -O2 -I preload/include tests/bench/api_cost.c -o api_cost && ./api_cost
#include <heapsnap.h>
#include <stdint.h>
#include <stdio.h>
#include <x86intrin.h>

#define N 200000000L

int main(void) {
  static char obj[64];
  heapsnap_pool *pool = heapsnap_pool_create("bench");
  volatile long sink = 0;
  uint64_t t0 = __rdtsc();
  for (long i = 0; i < N; ++i) {
    sink += i;
    __asm__ volatile("" ::: "memory");
  }
  uint64_t t1 = __rdtsc();
  for (long i = 0; i < N; ++i) {
    sink += i;
    heapsnap_pool_alloc(pool, obj, 64);
    __asm__ volatile("" ::: "memory");
  }
  uint64_t t2 = __rdtsc();
  double empty = (double)(t1 - t0) / N, with = (double)(t2 - t1) / N;
  printf("tracer %s: empty loop %.2f cycles/iter, with heapsnap_pool_alloc %.2f cycles/iter: %.2f cycles per call\n",
         heapsnap_active() ? "loaded" : "not loaded", empty, with, with - empty);
  return 0;
}
