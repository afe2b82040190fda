// Threads for the register roots of mid-run heap snapshots (tests/integration/register_cases.py).
//
// `snapshot_regs regs`: a 777-byte block whose only pointer is in register r12 of a thread
// spinning in an asm loop (every memory copy cleared), and a 555-byte block whose only pointer is
// in r12 of a thread blocked in a raw futex wait without a timeout. The main thread asks for
// snapshots (SIGUSR2 to itself: run with --snapshot-on-signal=USR2) while they hold them, then
// prints "spinner TID ADDR", "waiter TID ADDR" and "futex_wakeups N" (the waiter's futex returned
// N times before its word changed: a restart after the register signal is not a return).
//
// `snapshot_regs taken`: the same after installing the program's own handler on SIGRTMAX-3 (the
// tracer's default register signal); prints "program_handler_calls N" too.
//
// `snapshot_regs sleepers ROUNDS`: threads sleeping in nanosleep, poll, epoll_wait,
// sem_timedwait and select, ROUNDS sleeps of 150 ms each, while the main thread asks for a
// snapshot every 40 ms. Each sleep must last its full time and end as a timeout (never EINTR);
// prints "sleeper KIND ok N" or "sleeper KIND FAIL ..." lines and "requests N". A third argument
// "noepoll" leaves the epoll_wait sleeper out.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile uintptr_t g_handoff_spin, g_handoff_wait;
static volatile int g_stop_spin;
static volatile uint32_t g_futex_word;
static volatile long g_futex_returns;
static volatile int g_spin_tid, g_wait_tid, g_ready;

static __attribute__((noinline)) void make_block(volatile uintptr_t *out, size_t size) {
  char *p = malloc(size);
  memset(p, 0x5a, size);
  *out = (uintptr_t)p;
}

// Overwrites the dead stack below the caller (malloc's and make_block's frames).
static __attribute__((noinline)) void scrub_stack(void) {
  volatile char buf[16384];
  for (size_t i = 0; i < sizeof(buf); ++i) buf[i] = 0;
  __asm__ volatile("" ::: "memory");
}

static void *spinner(void *unused) {
  (void)unused;
  g_spin_tid = (int)syscall(SYS_gettid);
  make_block(&g_handoff_spin, 777);
  scrub_stack();
  // The pointer goes to r12 and its only memory copy is cleared; the loop keeps it there.
  __asm__ volatile(
      "mov (%[h]), %%r12\n\t"
      "movq $0, (%[h])\n\t"
      "xor %%eax, %%eax\n\t"
      "lock incl (%[ready])\n\t"
      "1: pause\n\t"
      "cmpl $0, (%[stop])\n\t"
      "je 1b\n\t"
      "mov %%r12, (%[h])\n\t"
      :
      : [h] "r"(&g_handoff_spin), [stop] "r"(&g_stop_spin), [ready] "r"(&g_ready)
      : "r12", "rax", "memory", "cc");
  return NULL;
}

static void *waiter(void *unused) {
  (void)unused;
  g_wait_tid = (int)syscall(SYS_gettid);
  make_block(&g_handoff_wait, 555);
  scrub_stack();
  // r12 holds the pointer across raw futex(FUTEX_WAIT_PRIVATE, 0, no timeout) calls until the
  // word becomes 1; r13 counts the calls that returned.
  long returns;
  __asm__ volatile(
      "mov (%[h]), %%r12\n\t"
      "movq $0, (%[h])\n\t"
      "xor %%r13, %%r13\n\t"
      "lock incl (%[ready])\n\t"
      "1: cmpl $0, (%[w])\n\t"
      "jne 2f\n\t"
      "mov $202, %%eax\n\t"        // SYS_futex
      "mov %[w], %%rdi\n\t"
      "mov $128, %%esi\n\t"        // FUTEX_WAIT | FUTEX_PRIVATE_FLAG
      "xor %%edx, %%edx\n\t"       // expected value 0
      "xor %%r10, %%r10\n\t"       // no timeout
      "syscall\n\t"
      "inc %%r13\n\t"
      "jmp 1b\n\t"
      "2: mov %%r12, (%[h])\n\t"
      "mov %%r13, %[n]\n\t"
      : [n] "=m"(returns)
      : [h] "r"(&g_handoff_wait), [w] "r"(&g_futex_word), [ready] "r"(&g_ready)
      : "r12", "r13", "rax", "rdi", "rsi", "rdx", "r10", "rcx", "r11", "memory", "cc");
  g_futex_returns = returns;
  return NULL;
}

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0) {}
}

static volatile int g_program_handler_calls;
static void program_handler(int sig) {
  (void)sig;
  ++g_program_handler_calls;
}

static int mode_regs(void) {
  pthread_t s, w;
  pthread_create(&s, NULL, spinner, NULL);
  pthread_create(&w, NULL, waiter, NULL);
  while (g_ready < 2) sleep_ms(5);
  sleep_ms(50);  // the waiter is in its futex by now
  for (int i = 0; i < 3; ++i) {
    raise(SIGUSR2);
    sleep_ms(400);
  }
  g_stop_spin = 1;
  pthread_join(s, NULL);
  __atomic_store_n(&g_futex_word, 1, __ATOMIC_SEQ_CST);
  syscall(SYS_futex, &g_futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  pthread_join(w, NULL);
  printf("spinner %d %#lx\nwaiter %d %#lx\nfutex_wakeups %ld\n", g_spin_tid, (unsigned long)g_handoff_spin,
         g_wait_tid, (unsigned long)g_handoff_wait, g_futex_returns);
  free((void *)g_handoff_spin);
  free((void *)g_handoff_wait);
  return 0;
}

// --- sleepers ---------------------------------------------------------------------------------

static int g_rounds;
static atomic_int g_failures;
static const long kSleepMs = 150;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void report(const char *kind, int round, int rc, int err, double elapsed) {
  // A sleep ends as a timeout, never EINTR, and lasts its full time (a clock's granularity aside).
  if (rc != 0 || elapsed < kSleepMs - 1.0) {
    printf("sleeper %s FAIL round %d: rc %d errno %s, %.1f ms\n", kind, round, rc, err ? strerror(err) : "0", elapsed);
    atomic_fetch_add(&g_failures, 1);
  }
}

static void *sleep_nanosleep(void *u) {
  (void)u;
  for (int i = 0; i < g_rounds; ++i) {
    struct timespec t = {0, kSleepMs * 1000000L};
    double t0 = now_ms();
    int rc = nanosleep(&t, NULL);
    report("nanosleep", i, rc, rc ? errno : 0, now_ms() - t0);
  }
  printf("sleeper nanosleep ok %d\n", g_rounds);
  return NULL;
}

static void *sleep_poll(void *u) {
  (void)u;
  int fds[2];
  if (pipe(fds) != 0) return NULL;
  for (int i = 0; i < g_rounds; ++i) {
    struct pollfd p = {fds[0], POLLIN, 0};
    double t0 = now_ms();
    int rc = poll(&p, 1, (int)kSleepMs);
    report("poll", i, rc, rc < 0 ? errno : 0, now_ms() - t0);
  }
  printf("sleeper poll ok %d\n", g_rounds);
  return NULL;
}

static void *sleep_epoll(void *u) {
  (void)u;
  int fds[2];
  if (pipe(fds) != 0) return NULL;
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN};
  epoll_ctl(ep, EPOLL_CTL_ADD, fds[0], &ev);
  for (int i = 0; i < g_rounds; ++i) {
    struct epoll_event out;
    double t0 = now_ms();
    int rc = epoll_wait(ep, &out, 1, (int)kSleepMs);
    report("epoll_wait", i, rc, rc < 0 ? errno : 0, now_ms() - t0);
  }
  printf("sleeper epoll_wait ok %d\n", g_rounds);
  return NULL;
}

static void *sleep_sem(void *u) {
  (void)u;
  sem_t sem;
  sem_init(&sem, 0, 0);
  for (int i = 0; i < g_rounds; ++i) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_nsec += kSleepMs * 1000000L;
    if (dl.tv_nsec >= 1000000000L) dl.tv_sec += 1, dl.tv_nsec -= 1000000000L;
    double t0 = now_ms();
    int rc = sem_timedwait(&sem, &dl);
    int err = rc ? errno : 0;
    report("sem_timedwait", i, rc == -1 && err == ETIMEDOUT ? 0 : -1, err, now_ms() - t0);
  }
  printf("sleeper sem_timedwait ok %d\n", g_rounds);
  return NULL;
}

static void *sleep_select(void *u) {
  (void)u;
  for (int i = 0; i < g_rounds; ++i) {
    struct timeval tv = {0, kSleepMs * 1000};
    double t0 = now_ms();
    int rc = select(0, NULL, NULL, NULL, &tv);
    report("select", i, rc, rc < 0 ? errno : 0, now_ms() - t0);
  }
  printf("sleeper select ok %d\n", g_rounds);
  return NULL;
}

static int mode_sleepers(int rounds, int epoll) {
  g_rounds = rounds;
  void *(*fns[])(void *) = {sleep_nanosleep, sleep_poll, sleep_sem, sleep_select, sleep_epoll};
  int N = epoll ? 5 : 4;
  pthread_t t[5];
  for (int i = 0; i < N; ++i) pthread_create(&t[i], NULL, fns[i], NULL);
  double end = now_ms() + rounds * kSleepMs;
  int requests = 0;
  while (now_ms() < end) {
    raise(SIGUSR2);
    ++requests;
    sleep_ms(40);
  }
  for (int i = 0; i < N; ++i) pthread_join(t[i], NULL);
  printf("requests %d\nfailures %d\n", requests, atomic_load(&g_failures));
  return atomic_load(&g_failures) ? 1 : 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1 && strcmp(argv[1], "regs") == 0) return mode_regs();
  if (argc > 1 && strcmp(argv[1], "taken") == 0) {
    signal(SIGRTMAX - 3, program_handler);
    int rc = mode_regs();
    printf("program_handler_calls %d\n", g_program_handler_calls);
    return rc;
  }
  if (argc > 1 && strcmp(argv[1], "sleepers") == 0) return mode_sleepers(argc > 2 ? atoi(argv[2]) : 10, !(argc > 3 && strcmp(argv[3], "noepoll") == 0));
  fprintf(stderr, "usage: snapshot_regs regs | taken | sleepers [ROUNDS]\n");
  return 2;
}
