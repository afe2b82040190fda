// The peak of several threads' blocks, each thread under the shim's 256 KiB fold (issue 28):
// 8 threads, each for ROUNDS rounds allocates K blocks of S bytes, waits at a barrier with the
// others (so all 8 hold K*S at the same moment, however briefly), frees them and waits again.
// Nothing else allocates while they run: the heap's maximum is 8*K*S above what main holds, and
// it is reached in every round. Compiled by tests/integration/capture_cases.py (case threads).
//
// usage: threads_peak K S ROUNDS
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 8
#define MAX_K 64

static long k_blocks = 10, size = 10000, rounds = 50;
static pthread_barrier_t barrier;

static void *worker(void *arg) {
  (void)arg;
  void *b[MAX_K];
  for (long r = 0; r < rounds; r++) {
    for (long i = 0; i < k_blocks; i++) {
      b[i] = malloc((size_t)size);
      ((volatile char *)b[i])[0] = 1;
    }
    pthread_barrier_wait(&barrier);  // all threads hold their blocks now
    for (long i = 0; i < k_blocks; i++) free(b[i]);
    pthread_barrier_wait(&barrier);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1) k_blocks = atol(argv[1]);
  if (argc > 2) size = atol(argv[2]);
  if (argc > 3) rounds = atol(argv[3]);
  if (k_blocks < 1 || k_blocks > MAX_K) return 2;
  pthread_t t[THREADS];
  pthread_barrier_init(&barrier, NULL, THREADS);
  for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, NULL);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  printf("%d threads held %ld bytes each at once\n", THREADS, k_blocks * size);
  return 0;
}
