// pthread_getattr_np as a thread's first call that allocates, the way Rust's runtime starts: glibc
// holds the thread's own lock while it mallocs the CPU set. The shim once registered the thread on
// that malloc by calling pthread_getattr_np itself: a deadlock with every signal blocked.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static void *thread_main(void *arg) {
  pthread_attr_t a;
  if (pthread_getattr_np(pthread_self(), &a) != 0) return (void *)1;
  pthread_attr_destroy(&a);
  free(malloc(100));
  return arg;
}

int main(void) {
  pthread_attr_t a;
  if (pthread_getattr_np(pthread_self(), &a) != 0) return 1;
  pthread_attr_destroy(&a);
  pthread_t t;
  void *r = (void *)1;
  if (pthread_create(&t, NULL, thread_main, NULL) != 0 || pthread_join(t, &r) != 0 || r) return 2;
  free(malloc(100));
  return write(1, "ok\n", 3) == 3 ? 0 : 3;
}
