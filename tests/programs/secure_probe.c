// Linked against the shim itself (not preloaded: the loader ignores LD_PRELOAD paths in
// secure-execution mode), so that a setgid copy of it shows whether the shim obeys AT_SECURE.
// tests/integration/security_cases.py makes that copy.
#include <stdio.h>
#include <stdlib.h>
#include <sys/auxv.h>

static void *volatile sink;

int main(void) {
  for (int i = 0; i < 100; ++i) sink = malloc(100);
  printf("AT_SECURE=%lu\n", getauxval(AT_SECURE));
  return 0;
}
