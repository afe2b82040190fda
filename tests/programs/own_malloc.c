// A program whose executable defines malloc itself (as rustup's rustc does, with jemalloc linked
// in): its calls never reach a preloaded shim. heapsnap must refuse it by name, not report an empty
// heap as the program's (tests/integration/compat_cases.py own_malloc).
#include <stddef.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);

static unsigned long calls;
void *malloc(size_t n) { ++calls; return __libc_malloc(n); }
void free(void *p) { __libc_free(p); }
void *calloc(size_t n, size_t m) { ++calls; return __libc_calloc(n, m); }
void *realloc(void *p, size_t n) { ++calls; return __libc_realloc(p, n); }

void *volatile sink;

int main(void) {
  for (int i = 0; i < 1000; i++) {
    sink = malloc(64);
    free(sink);
  }
  return calls >= 1000 && write(1, "ok\n", 3) == 3 ? 0 : 1;
}
