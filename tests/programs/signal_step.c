// A signal handler that allocates, run at EVERY instruction of the allocation calls: the main
// thread single-steps (x86-64 trap flag) through malloc/calloc/realloc/memalign/free, and each
// SIGTRAP runs a handler that mallocs and frees. Whatever state the shim is in when the handler
// lands (fast path, sampled path, between two updates of its reentrancy flags), the handler's
// blocks must be counted exactly (tests/integration/misbehave_cases.py, case signal_alloc).
// The timer-driven signal_alloc case hits such windows only by chance (issue 7's flake); this
// one visits every instruction boundary of the iterations it steps through.
//
// usage: signal_step step|nostep ITERATIONS SIDE_FILE
// SIDE_FILE gets "handler_allocs steps". glibc's malloc is not async-signal-safe in general;
// as in misbehave.c, the handler only uses tcache bins that are pre-filled and that main never
// touches (sizes 200..247), so neither side takes an arena lock the other holds.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#if !defined(__x86_64__)
int main(void) {
  puts("skip: x86-64 only");
  return 77;
}
#else

#define TRAP_FLAG 0x100

static volatile sig_atomic_t stop_stepping;
static volatile long steps, handler_allocs;

static void on_trap(int sig, siginfo_t *si, void *ctx) {
  (void)sig;
  (void)si;
  ucontext_t *uc = ctx;
  int saved = errno;
  if (stop_stepping) {
    uc->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)TRAP_FLAG;
  } else {
    long k = steps++;
    char *p = malloc(200 + (size_t)(k % 48));
    if (p) {
      p[0] = 1;
      ++handler_allocs;
    }
    free(p);
  }
  errno = saved;
}

static void on_start(int sig, siginfo_t *si, void *ctx) {
  (void)sig;
  (void)si;
  ucontext_t *uc = ctx;
  uc->uc_mcontext.gregs[REG_EFL] |= TRAP_FLAG;  // from sigreturn on, every instruction traps
}

// Code that blocks every signal while the trap flag is set (libunwind does, around its caches,
// when the shim unwinds a stack) would get its SIGTRAP forced on it, which kills the process:
// while stepping, masks set through the library functions leave SIGTRAP deliverable. The shim's
// own unwinding never runs nested in a handler (a handler that lands in the tracer is counted,
// not sampled), so this opens no deadlock on libunwind's locks.
typedef int (*mask_fn)(int, const sigset_t *, sigset_t *);
static mask_fn real_pthread_sigmask, real_sigprocmask;
static volatile sig_atomic_t stepping;

static int masked(mask_fn real, int how, const sigset_t *set, sigset_t *old) {
  if (stepping && set && how != SIG_UNBLOCK && sigismember(set, SIGTRAP)) {
    sigset_t s = *set;
    sigdelset(&s, SIGTRAP);
    return real(how, &s, old);
  }
  return real(how, set, old);
}
static void resolve(void) {  // before any stepping (the shim's constructor calls these first)
  if (!real_pthread_sigmask) real_pthread_sigmask = (mask_fn)dlsym(RTLD_NEXT, "pthread_sigmask");
  if (!real_sigprocmask) real_sigprocmask = (mask_fn)dlsym(RTLD_NEXT, "sigprocmask");
}
int pthread_sigmask(int how, const sigset_t *set, sigset_t *old) {
  resolve();
  return masked(real_pthread_sigmask, how, set, old);
}
int sigprocmask(int how, const sigset_t *set, sigset_t *old) {
  resolve();
  return masked(real_sigprocmask, how, set, old);
}

static void *volatile sink;

static void work(long n) {
  for (long i = 0; i < n; ++i) {
    void *a = malloc(24);
    void *b = calloc(1, 40);
    b = realloc(b, 56);
    void *c = NULL;
    if (posix_memalign(&c, 32, 48) != 0) c = NULL;
    sink = a;
    free(a);
    free(b);
    free(c);
  }
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: signal_step step|nostep N SIDE_FILE\n");
    return 2;
  }
  resolve();
  if (!real_pthread_sigmask || !real_sigprocmask) return 3;
  int step = strcmp(argv[1], "step") == 0;
  long n = atol(argv[2]);
  // Pre-fill the handler's bins (sizes 200..247: chunk sizes 208..256) and main's own.
  void *warm[4];
  for (int i = 0; i < 4; ++i) warm[i] = malloc(200 + 16 * (size_t)i);
  for (int i = 0; i < 4; ++i) free(warm[i]);
  work(2);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_trap;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTRAP, &sa, NULL);
  sa.sa_sigaction = on_start;
  sigaction(SIGUSR1, &sa, NULL);
  if (step) {
    stepping = 1;
    raise(SIGUSR1);
  }
  work(n);
  stop_stepping = 1;
  __asm__ volatile("nop; nop" ::: "memory");  // the handler clears the trap flag here
  stepping = 0;
  long allocs = handler_allocs, nsteps = steps;
  printf("signal_step: %ld iterations\n", n);
  FILE *f = fopen(argv[3], "w");
  if (!f) return 1;
  fprintf(f, "%ld %ld\n", allocs, nsteps);
  fclose(f);
  return 0;
}
#endif
