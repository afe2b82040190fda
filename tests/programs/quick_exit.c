// quick_exit skips atexit handlers and destructors (as _exit does) but runs at_quick_exit ones:
// the shim must still finish the capture, exit snapshot included (tests/integration/compat_cases.py).
//   quick_exit N   N malloc(32), every other one freed, then quick_exit(3)
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void *volatile sink;

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  for (int i = 0; i < n; i++) {
    sink = malloc(32);
    if (i % 2) free(sink);
  }
  char line[64];
  int len = snprintf(line, sizeof line, "mallocs %d kept %d\n", n, n / 2);
  if (write(1, line, (size_t)len) != len) return 1;
  quick_exit(3);
}
