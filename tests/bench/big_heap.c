// A big heap for the snapshot benchmark: `big_heap BLOCKS` allocates BLOCKS blocks of 16..176
// bytes (about 100 on average) linked into lists of 100 hanging off a global array, so that the
// graph has about one edge per block, then exits (snapshot at exit). scripts/bench_snapshot runs it.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node { struct node *next; char payload[]; };

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 10000000;
  long lists = n / 100 + 1;
  struct node **heads = calloc((size_t)lists, sizeof *heads);
  uint64_t s = 88172645463325252ull;
  for (long i = 0; i < n; ++i) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    size_t size = 16 + (size_t)(s % 161);
    struct node *x = malloc(size);
    memset(x->payload, 0, size - sizeof *x);
    x->next = heads[i % lists];
    heads[i % lists] = x;
  }
  printf("%ld blocks in %ld lists\n", n, lists);
  return 0;
}
