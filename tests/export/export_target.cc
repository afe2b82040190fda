// Target of the export tests: allocation functions with known figures, recorded under
// `heapsnap record --sample-bytes 1` so every allocation is exact.
//   alloc_big:   100 blocks of 10000 bytes, never freed (1000000 bytes leaked)
//   alloc_small: 1000 blocks of 10 bytes, all freed (10000 bytes allocated)
//   alloc_typed: 50 std::vector<int> buffers of 1000 ints (200000 bytes), kept: a type the frames name
// make_block is always inlined into alloc_big, so its return address carries an inlined frame.
// Built with -fno-builtin so the compiler cannot drop the malloc/free pairs.
#include <cstdlib>
#include <vector>

namespace {

void *big_blocks[100];
void *volatile sink;
std::vector<std::vector<int>> *typed;

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

__attribute__((noinline)) void alloc_typed() {
  typed = new std::vector<std::vector<int>>(50);
  for (auto &v : *typed) v.reserve(1000);
}

int main() {
  alloc_typed();
  alloc_big();
  alloc_small();
  sink = big_blocks[99];
  return 0;
}
