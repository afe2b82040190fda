// A preload library that only starts one thread, which waits until the program exits:
// `LD_PRELOAD=idle_thread.so prog` measures what any second thread costs a program that has none.
// glibc's malloc takes its locked multi-thread paths (arena lock on a tcache miss, atomic fastbin
// updates) once a process has created a thread, and keeps them; the shim's writer thread makes
// every traced program pay this. scripts/bench_fastpath.py --py subtracts it from the shim's cost.
// The thread is joined at exit, as the writer is, so that process teardown is not measured.
#include <pthread.h>
#include <unistd.h>

static int wake[2] = {-1, -1};
static pthread_t waiter;
static int started;

static void *wait_for_exit(void *arg) {
  char c;
  while (read(wake[0], &c, 1) < 0) {
  }
  return arg;
}

__attribute__((constructor)) static void start_idle_thread(void) {
  if (pipe(wake) == 0) started = pthread_create(&waiter, NULL, wait_for_exit, NULL) == 0;
}

__attribute__((destructor)) static void stop_idle_thread(void) {
  if (!started) return;
  close(wake[1]);
  pthread_join(waiter, NULL);
}
