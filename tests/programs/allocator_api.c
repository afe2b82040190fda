// A program that allocates through jemalloc's own API (mallocx/sdallocx) besides malloc: those
// calls bypass malloc and free, so the shim cannot see them, and must say so
// (tests/integration/compat_cases.py allocator_api).
#include <stddef.h>
#include <stdlib.h>

void *mallocx(size_t size, int flags);
void sdallocx(void *p, size_t size, int flags);
void *volatile sink;

int main(void) {
  for (int i = 0; i < 100; i++) {
    void *p = mallocx(64, 0);
    sink = p;
    sdallocx(p, 64, 0);
    sink = malloc(32);
    free(sink);
  }
  return 0;
}
