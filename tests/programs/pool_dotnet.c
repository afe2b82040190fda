// The client API's move ranges on the example of .NET's MovedReferences documentation. Objects
// start at slots 08, 09, 10, 12, 13, 15, 16, 17, 18, 19 of a compacting arena (the objects at 10
// and 13 are two slots long, the others one); 09, 13 and 19 die; the survivors land at 07, 08,
// 10, 11, 12, 13, 14 in three blocks of 1, 2 and 4 objects, reported as byte ranges
// (08 -> 07, 64 B), (10 -> 08, 192 B), (15 -> 11, 256 B) with 64-byte slots. Afterwards slot 07
// points to slot 14, slot 10 to slot 11, and a global points at slot 07, so the snapshot after
// compaction has known edges and retained sizes.
#include <heapsnap.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOT 64
static unsigned char *arena;
void *g_root;

static void *slot(int i) { return arena + i * SLOT; }

int main(void) {
  arena = aligned_alloc(64, 32 * SLOT);  // the arena itself comes from malloc
  memset(arena, 0, 32 * SLOT);
  heapsnap_pool *pool = heapsnap_pool_create("dotnet-gen0");
  printf("active %d pool %s\n", heapsnap_active(), pool ? "yes" : "no");
  static const int start[] = {8, 9, 10, 12, 13, 15, 16, 17, 18, 19};
  static const int slots[] = {1, 1, 2, 1, 2, 1, 1, 1, 1, 1};
  for (int k = 0; k < 10; ++k) heapsnap_pool_alloc(pool, slot(start[k]), (size_t)slots[k] * SLOT);
  heapsnap_marker("allocated 10 objects");
  const void *olds[] = {slot(8), slot(10), slot(15)};
  const void *news[] = {slot(7), slot(8), slot(11)};
  size_t lens[] = {1 * SLOT, 3 * SLOT, 4 * SLOT};
  for (int r = 0; r < 3; ++r) memmove((void *)news[r], olds[r], lens[r]);  // what the collector does
  memset(slot(15), 0, 5 * SLOT);  // the space left behind
  heapsnap_moved_ranges(pool, olds, news, lens, 3, HEAPSNAP_COMPACTING);
  heapsnap_marker("compacted");
  *(void **)slot(7) = slot(14);
  *(void **)slot(10) = slot(11);
  g_root = slot(7);
  printf("arena %p\n", (void *)arena);
  heapsnap_snapshot("after compaction");
  return 0;
}
