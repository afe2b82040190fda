// A small library that tests/programs/misbehave.c loads and unloads in a loop (dlopen/dlclose):
// its constructor and destructor allocate and free, and it hands out blocks that outlive it.
#include <stdlib.h>
#include <string.h>

static char *state;

__attribute__((constructor)) static void plugin_init(void) {
  state = malloc(256);
  strcpy(state, "plugin");
}

__attribute__((destructor)) static void plugin_fini(void) { free(state); }

// Ten allocations and ten frees per call, plus one realloc.
long plugin_work(long i) {
  void *b[10];
  long sum = 0;
  for (int k = 0; k < 9; ++k) {
    b[k] = malloc(16 + (size_t)(k * 8) + (size_t)(i % 5));
    memset(b[k], k, 16);
    sum += ((unsigned char *)b[k])[3];
  }
  b[9] = calloc(4, 10);
  b[9] = realloc(b[9], 400);
  for (int k = 0; k < 10; ++k) free(b[k]);
  return sum + (long)strlen(state);
}

void *plugin_make(size_t n) { return malloc(n); }
