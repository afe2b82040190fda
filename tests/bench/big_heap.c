// A big heap for the snapshot benchmark: `big_heap BLOCKS` allocates BLOCKS blocks of 16..176
// bytes (about 100 on average) linked into lists of 100 hanging off a global array, so that the
// graph has about one edge per block, then exits (snapshot at exit). scripts/bench_snapshot runs it.
// `big_heap BLOCKS exit 0 MIN-MAX` makes the blocks MIN..MAX bytes instead (16-96: about 56 on
// average, a heap of small objects like CPython's, where the per-block costs dominate).
//
// `big_heap BLOCKS mid [THREADS]` then asks for a snapshot mid-run instead (raises SIGUSR2: run
// it with --snapshot-on-signal=USR2, the writer thread takes the snapshot) and waits 3 s for the
// snapshot child before exiting. THREADS busy threads keep running meanwhile (each walks its own
// lists, reading and writing them) as a program's workers would during a mid-run snapshot.
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct node { struct node *next; char payload[]; };

static struct node **heads;
static long lists;
static atomic_int stop;

static void *busy(void *arg) {
  long k = (long)arg;
  uint64_t sum = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    for (long l = k; l < lists; l += 64) {
      for (struct node *x = heads[l]; x; x = x->next) {
        sum += (uint64_t)x->payload[0];
        x->payload[0] = (char)sum;
      }
      if (atomic_load_explicit(&stop, memory_order_relaxed)) break;
    }
  }
  return (void *)(uintptr_t)sum;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 10000000;
  int mid = argc > 2 && strcmp(argv[2], "mid") == 0;
  int nthreads = argc > 3 ? atoi(argv[3]) : 0;
  size_t min_size = 16, max_size = 176;
  if (argc > 4 && (sscanf(argv[4], "%zu-%zu", &min_size, &max_size) != 2 || min_size < sizeof(struct node) ||
                   max_size < min_size)) {
    fprintf(stderr, "big_heap: sizes MIN-MAX, MIN at least %zu\n", sizeof(struct node));
    return 2;
  }
  lists = n / 100 + 1;
  heads = calloc((size_t)lists, sizeof *heads);
  uint64_t s = 88172645463325252ull;
  for (long i = 0; i < n; ++i) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    size_t size = min_size + (size_t)(s % (max_size - min_size + 1));
    struct node *x = malloc(size);
    memset(x->payload, 0, size - sizeof *x);
    x->next = heads[i % lists];
    heads[i % lists] = x;
  }
  printf("%ld blocks in %ld lists\n", n, lists);
  if (mid) {
    pthread_t t[64];
    if (nthreads > 64) nthreads = 64;
    for (int i = 0; i < nthreads; ++i) pthread_create(&t[i], NULL, busy, (void *)(long)i);
    struct timespec settle = {0, 200000000};
    nanosleep(&settle, NULL);
    raise(SIGUSR2);
    struct timespec wait = {3, 0};
    while (nanosleep(&wait, &wait) != 0) {}
    atomic_store(&stop, 1);
    for (int i = 0; i < nthreads; ++i) pthread_join(t[i], NULL);
  }
  return 0;
}
