// Target of the export tests: allocation functions with known figures, recorded under
// `heapsnap record --sample-bytes 1` so every allocation is exact.
//   alloc_big:   100 blocks of 10000 bytes, never freed (1000000 bytes leaked)
//   alloc_small: 1000 blocks of 10 bytes, all freed (10000 bytes allocated)
// make_block is always inlined into alloc_big, so its return address carries an inlined frame.
// Built with -fno-builtin so the compiler cannot drop the malloc/free pairs.
#include <cstdlib>

namespace {

void *big_blocks[100];
void *volatile sink;

__attribute__((always_inline)) inline void *make_block(size_t n) { return malloc(n); }

}  // namespace

__attribute__((noinline)) void alloc_big() {
  for (auto &b : big_blocks) b = make_block(10000);
}

__attribute__((noinline)) void alloc_small() {
  void *blocks[1000];
  for (auto &b : blocks) b = malloc(10);
  sink = blocks[0];
  for (auto &b : blocks) free(b);
}

int main() {
  alloc_big();
  alloc_small();
  sink = big_blocks[99];
  return 0;
}
