// Programs that misbehave, traced by tests/integration/misbehave_cases.py: `misbehave MODE [ARGS]`.
// Each mode does one thing a well-behaved test program would not: dies by SIGKILL, SIGSEGV or
// abort, leaves by _exit, lets threads outlive main, allocates in a signal handler, vforks, loops
// over dlopen/dlclose, pokes at glibc's malloc tunables. Output never depends on addresses, pids
// or timing, so a native run and a traced run must print the same bytes and exit the same way.
#define _GNU_SOURCE
#include <alloca.h>
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static void *volatile sink;  // keeps the compiler from dropping allocations
static int wait_status(pid_t pid);
static const char *self_path;

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static void say(const char *s) {  // async-signal-safe, unbuffered
  ssize_t r = write(1, s, strlen(s));
  (void)r;
}

static void leak_blocks(long n, size_t size) {
  for (long i = 0; i < n; ++i) sink = malloc(size);
}

// --- killed: SIGKILL from outside while the program allocates --------------------------------
static int mode_killed(long n) {
  leak_blocks(n, 100);
  printf("ready %d\n", (int)getpid());
  fflush(stdout);
  // Mid-run until killed: keep allocating, freeing and reallocating.
  void *keep[64] = {0};
  for (unsigned long i = 0; sink != (void *)1; ++i) {
    unsigned k = (unsigned)(i % 64);
    free(keep[k]);
    keep[k] = malloc(16 + i % 2000);
    if (i % 4096 == 0) sleep_ms(1);
  }
  return 0;
}

// --- SIGSEGV with the program's own handler -------------------------------------------------
static sigjmp_buf segv_jump;
static volatile sig_atomic_t segv_count;
static int segv_action;  // 0: _exit(3), 1: siglongjmp, 2: restore default and return

static void on_segv(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)uc;
  ++segv_count;
  if (segv_action == 1) siglongjmp(segv_jump, 1);
  say(si->si_addr == NULL ? "caught SIGSEGV at NULL\n" : "caught SIGSEGV elsewhere\n");
  if (segv_action == 0) _exit(3);
  signal(SIGSEGV, SIG_DFL);  // returning re-executes the fault, which now kills the process
}

static void install_segv(int action) {
  segv_action = action;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, NULL);
}

static void fault(void) { *(volatile int *)(uintptr_t)(sink ? 0 : 0) = 1; }

static int mode_segv(const char *how, long n) {
  leak_blocks(n, 64);
  printf("before the fault\n");
  fflush(stdout);
  if (!strcmp(how, "handler")) {
    install_segv(0);
    fault();
    say("not reached\n");
    return 1;
  }
  if (!strcmp(how, "longjmp")) {
    // A handler that jumps back out, as language runtimes do for null checks: n faults, and the
    // program allocates between them and carries on.
    install_segv(1);
    for (long i = 0; i < n; ++i) {
      if (sigsetjmp(segv_jump, 1) == 0) {
        sink = malloc(32);
        free(sink);
        fault();
      }
      sink = malloc(48);
      free(sink);
    }
    printf("recovered from %d faults\n", (int)segv_count);
    return 0;
  }
  install_segv(2);
  fault();
  return 1;
}

// Same, after a pause long enough for the shim's periodic flush (or none: a crash at start-up).
static int mode_segv_default(long n, long delay_ms) {
  leak_blocks(n, 64);
  if (delay_ms) sleep_ms(delay_ms);
  return mode_segv("default", 0);
}

// --- _exit, _Exit, abort --------------------------------------------------------------------
static int mode_exit(const char *how, long n) {
  leak_blocks(n, 100);
  printf("buffered, lost at _exit\n");  // stdout is a pipe here: fully buffered, never flushed
  say("leaving by _exit\n");
  if (!strcmp(how, "_Exit")) _Exit(7);
  _exit(7);
}

static int mode_abort(long n) {
  leak_blocks(n, 100);
  sleep_ms(300);  // a frame or two reach the file before the end
  fprintf(stderr, "aborting\n");
  abort();
}

// --- threads that outlive main -----------------------------------------------------------------
static _Atomic(void *) shared_slots[256];
static atomic_int workers_started;

static void *churn(void *arg) {
  unsigned long seed = (unsigned long)(uintptr_t)arg * 2654435761u + 1;
  void *mine[32] = {0};
  // One allocation before the thread counts itself started: the shim registers a thread at its
  // first allocation, and the test counts the threads it saw (under load, a thread could be
  // counted started, and main exit, before that first malloc).
  mine[0] = malloc(1);
  atomic_fetch_add(&workers_started, 1);
  for (unsigned long i = 0;; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    unsigned r = (unsigned)(seed >> 33);
    unsigned k = r % 32;
    switch (r % 5) {
      case 0: free(mine[k]); mine[k] = malloc(1 + r % 3000); break;
      case 1: mine[k] = realloc(mine[k], 1 + r % 5000); break;
      case 2: free(mine[k]); mine[k] = calloc(1 + r % 40, 8); break;
      case 3: {  // hand a block to whichever thread picks it up next (cross-thread frees)
        void *old = atomic_exchange(&shared_slots[r % 256], malloc(1 + r % 200));
        free(old);
        break;
      }
      default: free(mine[k]); mine[k] = NULL; break;
    }
  }
  return NULL;
}

static void start_churners(int threads) {
  pthread_t th;
  for (int t = 0; t < threads; ++t) pthread_create(&th, NULL, churn, (void *)(uintptr_t)(t + 1));
  while (atomic_load(&workers_started) < threads) sleep_ms(1);
}

static int mode_threads_outlive(long threads, long ms) {
  start_churners((int)threads);
  sleep_ms(ms);
  printf("main exits with %ld threads still allocating\n", threads);
  fflush(stdout);
  exit(0);  // atexit handlers and the shim's destructor run while the threads keep allocating
}

static atomic_int finite_left;
static void *finite_worker(void *arg) {
  long n = (long)(uintptr_t)arg;
  void *keep[16] = {0};
  for (long i = 0; i < n; ++i) {
    free(keep[i % 16]);
    keep[i % 16] = malloc(1 + (size_t)(i % 700));
  }
  for (int k = 0; k < 16; ++k) free(keep[k]);
  if (atomic_fetch_sub(&finite_left, 1) == 1) {
    // The last thread out ends the process: main is long gone.
    say("last thread exits the process\n");
  }
  return NULL;
}

static int mode_main_pthread_exit(long threads, long n) {
  atomic_store(&finite_left, (int)threads);
  printf("main thread leaves first\n");  // before the threads start: the output's order is fixed
  fflush(stdout);
  pthread_t th;
  for (long t = 0; t < threads; ++t) pthread_create(&th, NULL, finite_worker, (void *)(uintptr_t)n);
  pthread_exit(NULL);
}

// A thread forks; in the child that thread is the only one, and it simply returns: glibc then
// ends the child with status 0, as for the last thread of any process (Python's
// test_threading.test_main_thread_after_fork_from_nonmain_thread does this).
static void *forker(void *arg) {
  (void)arg;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    leak_blocks(10, 100);
    say("the child's only thread returns\n");
    return NULL;
  }
  printf("child of a non-main thread exited %d\n", wait_status(pid));
  return NULL;
}

static int mode_fork_from_thread(void) {
  pthread_t th;
  pthread_create(&th, NULL, forker, NULL);
  pthread_join(th, NULL);
  return 0;
}

// --- a signal handler that allocates ----------------------------------------------------------
// glibc's malloc is not async-signal-safe in general; what keeps this program correct natively:
// the handler only uses tcache bins that are pre-filled and that main never touches, and main's
// own allocations are tcache-sized as well, so no arena lock is ever taken on either side.
static volatile sig_atomic_t alarm_hits;
static volatile sig_atomic_t alarm_allocs;

static void on_alarm(int sig) {
  (void)sig;
  int saved = errno;
  unsigned k = (unsigned)alarm_hits;
  char *p = malloc(200 + k % 48);
  if (p) {
    p[0] = 1;
    ++alarm_allocs;
  }
  free(p);
  ++alarm_hits;
  errno = saved;
}

// Frames whose CFA comes from rbp (alloca makes gcc keep a frame pointer) and whose size changes
// from call to call, at depths that change too: the same return addresses at other stack
// addresses, and the same stack addresses under other callers. The shim's stack walker may reuse
// a remembered walk only where it provably holds (HEAPSNAP_UNWINDER=check counts differences).
__attribute__((noinline)) static void *alloca_level(int depth, size_t pad, long i) {
  char *buf = alloca(pad);
  buf[0] = (char)i;
  __asm__ volatile("" : : "r"(buf) : "memory");
  void *p;
  if (depth == 0) p = malloc(16 + (size_t)(i % 7) * 8);
  else p = alloca_level(depth - 1, 16 + (size_t)((i * 7 + depth) % 5) * 64, i);
  __asm__ volatile("" : : "r"(p) : "memory");  // no tail call
  return p;
}

__attribute__((noinline)) static void *alloca_other_caller(long i) {
  void *p = alloca_level(1 + (int)(i % 2), 48, i);
  __asm__ volatile("" : : "r"(p) : "memory");
  return p;
}

static int mode_alloca_frames(long n) {
  long sum = 0;
  for (long i = 0; i < n; ++i) {
    void *p = (i % 5 == 0) ? alloca_other_caller(i) : alloca_level(1 + (int)(i % 4), 32 + (size_t)(i % 3) * 48, i);
    sum += p != NULL;
    free(p);
  }
  printf("alloca_frames: %ld blocks\n", sum);
  return 0;
}

static void handle(int sig, void (*fn)(int), int flags) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = fn;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, NULL);
}

// A handler on an alternate signal stack allocates (the shim's stack walker finds itself off the
// thread's stack and leaves the walk to libunwind), between allocations of main's own.
static volatile int altstack_allocs;
static void on_usr1_altstack(int sig) {
  (void)sig;
  int saved = errno;
  char *p = malloc(64 + (size_t)altstack_allocs % 32);
  if (p) {
    p[0] = 1;
    ++altstack_allocs;
  }
  free(p);
  errno = saved;
}

static int mode_altstack_alloc(long n) {
  stack_t ss;
  memset(&ss, 0, sizeof(ss));
  ss.ss_size = 1 << 16;
  ss.ss_sp = malloc(ss.ss_size);
  sigaltstack(&ss, NULL);
  handle(SIGUSR1, on_usr1_altstack, SA_RESTART | SA_ONSTACK);
  for (long i = 0; i < n; ++i) {
    void *a = malloc(24 + (size_t)(i % 5) * 8);
    if (i % 10 == 0) raise(SIGUSR1);
    free(a);
  }
  ss.ss_flags = SS_DISABLE;
  sigaltstack(&ss, NULL);
  printf("altstack_alloc: the handler allocated %d times\n", altstack_allocs);
  return 0;
}

// With with_signals = 0 the same program runs without the timer: the baseline of the exact totals.
static int mode_signal_alloc(long n, const char *side, int with_signals) {
  // Pre-fill the handler's bins (sizes 200..247: chunk sizes 208..256).
  void *warm[4];
  for (int i = 0; i < 4; ++i) warm[i] = malloc(200 + 16 * (size_t)i);
  for (int i = 0; i < 4; ++i) free(warm[i]);
  handle(SIGALRM, on_alarm, SA_RESTART);
  struct itimerval it = {{0, 100}, {0, 100}};
  if (with_signals) setitimer(ITIMER_REAL, &it, NULL);
  long main_allocs = 0;
  for (long i = 0; i < n; ++i) {
    void *a = malloc(24), *b = malloc(40 + (size_t)(i % 3) * 16);
    main_allocs += 2;
    free(a);
    free(b);
    while (with_signals && i == n - 1 && alarm_hits < 50) sleep_ms(1);  // make sure some signals came
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  signal(SIGALRM, SIG_IGN);
  printf("signal_alloc: main allocated %ld blocks, the handler ran at least 50 times: %s\n", main_allocs,
         alarm_hits >= 50 || !with_signals ? "yes" : "no");
  fflush(stdout);
  if (side) {
    // Figures that depend on timing go to a side file, not stdout.
    char buf[128];
    int len = snprintf(buf, sizeof(buf), "%ld %d %d\n", main_allocs, (int)alarm_hits, (int)alarm_allocs);
    FILE *f = fopen(side, "w");
    if (f) {
      fwrite(buf, 1, (size_t)len, f);
      fclose(f);
    }
  }
  return 0;
}

// --- vfork + exec, posix_spawn, system, popen ---------------------------------------------------
static int mode_child(long n) {
  // What the exec'd child does: a few allocations, a line of output, a distinctive status.
  leak_blocks(n, 50);
  printf("child ran with %ld\n", n);
  return (int)(n % 100);
}

static int wait_status(pid_t pid) {
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int mode_vfork(long n) {
  leak_blocks(n, 30);
  char arg[32];
  snprintf(arg, sizeof(arg), "%ld", n % 50 + 5);
  char *argv[] = {(char *)self_path, "child", arg, NULL};
  fflush(stdout);
  pid_t pid = vfork();
  if (pid == 0) {
    execv(self_path, argv);
    _exit(127);
  }
  printf("vfork+execv child exited %d\n", wait_status(pid));
  fflush(stdout);
  // A vfork child whose exec fails leaves by _exit: the shim must keep its hands off.
  pid = vfork();
  if (pid == 0) {
    execl("/nonexistent/program", "program", (char *)NULL);
    _exit(127);
  }
  printf("vfork+failed exec child exited %d\n", wait_status(pid));
  fflush(stdout);
  // execve with an explicit environment and execvp through PATH.
  pid = vfork();
  if (pid == 0) {
    execve(self_path, argv, environ);
    _exit(127);
  }
  printf("vfork+execve child exited %d\n", wait_status(pid));
  leak_blocks(n, 30);  // the parent goes on allocating after its children
  return 0;
}

static int mode_spawn(long n) {
  leak_blocks(n, 30);
  char arg[32];
  snprintf(arg, sizeof(arg), "%ld", n % 50 + 7);
  char *argv[] = {(char *)self_path, "child", arg, NULL};
  fflush(stdout);
  pid_t pid;
  int rc = posix_spawn(&pid, self_path, NULL, NULL, argv, environ);
  if (rc != 0) {
    printf("posix_spawn failed: %s\n", strerror(rc));
    return 1;
  }
  printf("posix_spawn child exited %d\n", wait_status(pid));
  fflush(stdout);
  int st = system("echo from system; exit 4");
  printf("system() returned %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  FILE *p = popen("echo from popen", "r");
  char line[128] = "";
  if (p && fgets(line, sizeof(line), p)) printf("popen read: %s", line);
  if (p) printf("pclose: %d\n", WEXITSTATUS(pclose(p)));
  return 0;
}

// --- dlopen / dlclose loops ---------------------------------------------------------------------
static int mode_dlopen(const char *plugin, long n, int deepbind) {
  long total = 0;
  void *kept[8] = {0};
  for (long i = 0; i < n; ++i) {
    void *h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL | (deepbind ? RTLD_DEEPBIND : 0));
    if (!h) {
      printf("dlopen failed: %s\n", dlerror());
      return 1;
    }
    long (*work)(long) = (long (*)(long))dlsym(h, "plugin_work");
    void *(*make)(size_t) = (void *(*)(size_t))dlsym(h, "plugin_make");
    if (!work || !make) {
      printf("dlsym failed\n");
      return 1;
    }
    total += work(i);
    // A block allocated by the plugin outlives the plugin: its stack points into an unloaded
    // module, and main frees it later.
    free(kept[i % 8]);
    kept[i % 8] = make(100);
    if (dlclose(h) != 0) {
      printf("dlclose failed: %s\n", dlerror());
      return 1;
    }
  }
  for (int k = 0; k < 8; ++k) free(kept[k]);
  printf("dlopen loop %s: %ld rounds, total %ld\n", deepbind ? "(deepbind)" : "", n, total);
  return 0;
}

// --- a library whose constructor ran before the shim's (see misbehave_early.c) -----------------
static int mode_early(void) {
  void *(*take)(int) = (void *(*)(int))dlsym(RTLD_DEFAULT, "early_take");
  long (*stop)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "early_stop");
  long (*rounds)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "early_rounds");
  if (!take || !stop || !rounds) {
    printf("libmisbehave_early.so is not preloaded\n");
    return 2;
  }
  // Blocks from before the shim started: freed, reallocated, usable sizes asked.
  void *a = take(0), *b = take(1), *c = take(2);
  printf("early blocks: %s\n", a && b && c ? "present" : "missing");
  printf("usable sizes sane: %s\n",
         malloc_usable_size(a) >= 123 && malloc_usable_size(b) >= 4000 && malloc_usable_size(c) >= 64 ? "yes" : "no");
  free(a);
  b = realloc(b, 100000);
  memset(b, 1, 100000);
  free(b);
  free(c);
  // Let the library's thread go on allocating for a while, now under the shim.
  for (long start = rounds(); rounds() < start + 20000;) sleep_ms(1);
  long done = stop();
  printf("early thread stopped after allocating: %s\n", done > 20000 ? "yes" : "no");
  return 0;
}

// --- malloc_usable_size, malloc_trim, mallopt ------------------------------------------------------
static int mode_malloc_api(long n) {
  int ok = 1;
  ok &= mallopt(M_MMAP_THRESHOLD, 64 * 1024) == 1;
  ok &= mallopt(M_TRIM_THRESHOLD, 128 * 1024) == 1;
  ok &= mallopt(M_TOP_PAD, 0) == 1;
  ok &= mallopt(M_ARENA_MAX, 2) == 1;
  ok &= mallopt(M_PERTURB, 0x5a) == 1;
  printf("mallopt accepted: %s\n", ok ? "yes" : "no");
  long bad_usable = 0, trims = 0;
  void *keep[16] = {0};
  for (long i = 0; i < n; ++i) {
    size_t size = (i % 10 == 0) ? 100000 + (size_t)(i % 7) * 4096 : 1 + (size_t)(i * 37 % 5000);
    unsigned char *p = malloc(size);
    size_t u = malloc_usable_size(p);
    if (u < size) ++bad_usable;
    memset(p, (int)(i & 0xff), u);  // the whole usable size is the program's to use
    // Grow into (and past) the usable size, then shrink.
    p = realloc(p, u + 1);
    if (malloc_usable_size(p) < u + 1) ++bad_usable;
    p = realloc(p, size / 2 + 1);
    free(keep[i % 16]);
    keep[i % 16] = p;
    void *a = NULL;
    if (posix_memalign(&a, 4096, size) == 0) {
      if (malloc_usable_size(a) < size) ++bad_usable;
      free(a);
    }
    if (i % 100 == 99) trims += malloc_trim(0) >= 0;
  }
  for (int k = 0; k < 16; ++k) free(keep[k]);
  struct mallinfo2 mi = mallinfo2();
  printf("usable sizes >= requested: %s\n", bad_usable == 0 ? "yes" : "no");
  printf("malloc_trim calls: %ld\n", trims);
  printf("mallinfo2 answers: %s\n", mi.arena > 0 ? "yes" : "no");
  malloc_usable_size(NULL);
  return 0;
}

// --- the program's blocks come from glibc, not the tracer's private mimalloc -----------------------
static int in_mapping(const void *p, const char *name) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  char line[512];
  int found = 0;
  uintptr_t a = (uintptr_t)p;
  while (fgets(line, sizeof(line), f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx", &lo, &hi) != 2) continue;
    if (a >= lo && a < hi) {
      found = strstr(line, name) != NULL;
      break;
    }
  }
  fclose(f);
  return found;
}

static size_t chunk_head(const void *p) { return ((const size_t *)p)[-1]; }

// glibc's chunk header gives the usable size: chunk size - 8, or - 16 when mmapped.
static int glibc_usable_matches(void *p) {
  size_t h = chunk_head(p), chunk = h & ~(size_t)7;
  size_t want = (h & 2) ? chunk - 16 : chunk - 8;
  return malloc_usable_size(p) == want;
}

static void *thread_block;
static void *arena_thread(void *arg) {
  (void)arg;
  thread_block = malloc(1000);
  return NULL;
}

static int count_arenas(void) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  malloc_info(0, f);
  fclose(f);
  int n = 0;
  for (char *s = buf; (s = strstr(s, "<heap nr=")); ++s) ++n;
  free(buf);
  return n;
}

static int mode_owner(void) {
  // (Past tcache's sizes: a block tcache holds counts as in use for mallinfo2 already, and the
  // shim's start-up probes of glibc's layout leave small ones there.)
  struct mallinfo2 before = mallinfo2();
  char *p = malloc(1500);
  struct mallinfo2 after = mallinfo2();
  printf("small block is in [heap] (glibc's main arena): %s\n", in_mapping(p, "[heap]") == 1 ? "yes" : "no");
  printf("glibc's mallinfo2 counts it: %s\n", after.uordblks >= before.uordblks + 1500 ? "yes" : "no");
  printf("usable size is glibc's chunk size: %s\n", glibc_usable_matches(p) ? "yes" : "no");
  printf("chunk header says main arena, not mmapped: %s\n", (chunk_head(p) & 6) == 0 ? "yes" : "no");
  free(p);
  // Past tcache's sizes (a freed small chunk stays "in use" for mallinfo2 while in tcache).
  char *q = malloc(4000);
  struct mallinfo2 q_in = mallinfo2();
  free(q);
  struct mallinfo2 q_out = mallinfo2();
  printf("glibc's mallinfo2 sees a free: %s\n", q_out.uordblks + 4000 <= q_in.uordblks ? "yes" : "no");

  char *big = malloc(8u << 20);
  struct mallinfo2 big_mi = mallinfo2();
  printf("8 MiB block is mmapped by glibc: %s\n", (chunk_head(big) & 2) && big_mi.hblkhd >= (8u << 20) ? "yes" : "no");
  printf("its usable size is glibc's: %s\n", glibc_usable_matches(big) ? "yes" : "no");
  free(big);

  void *al = aligned_alloc(4096, 5000);
  printf("aligned block is glibc's: %s\n", glibc_usable_matches(al) && in_mapping(al, "[heap]") == 1 ? "yes" : "no");
  free(al);
  char *z = calloc(10, 10);
  char *r = realloc(z, 300);
  printf("calloc/realloc blocks are glibc's: %s\n", glibc_usable_matches(r) && in_mapping(r, "[heap]") == 1 ? "yes" : "no");
  free(r);

  pthread_t th;
  pthread_create(&th, NULL, arena_thread, NULL);
  pthread_join(th, NULL);
  printf("a thread's block is in a glibc thread arena: %s\n",
         (chunk_head(thread_block) & 4) && glibc_usable_matches(thread_block) ? "yes" : "no");
  printf("malloc_info lists more than one arena: %s\n", count_arenas() >= 2 ? "yes" : "no");
  free(thread_block);
  // The tracer's private allocator must not be visible to the program.
  printf("mi_malloc is not in the global scope: %s\n", dlsym(RTLD_DEFAULT, "mi_malloc") == NULL ? "yes" : "no");
  printf("malloc_trim works: %s\n", malloc_trim(0) >= 0 ? "yes" : "no");
  return 0;
}

// --- chdir, then fork: where does a relative capture name lead the child? ---------------------------
static int mode_chdir_fork(const char *dir) {
  leak_blocks(10, 100);
  if (chdir(dir) != 0) {
    printf("chdir failed\n");
    return 1;
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    leak_blocks(10, 100);
    _exit(0);
  }
  printf("child exited %d\n", wait_status(pid));
  return 0;
}

// --- a program that closes every descriptor it did not open (as daemons do), then opens its own
// file: whatever the shim holds open must not end up writing into the program's files.
static int mode_close_fds(const char *path) {
  for (int fd = 3; fd < 1024; ++fd) close(fd);
  FILE *f = fopen(path, "w");
  if (!f) {
    printf("cannot open %s\n", path);
    return 1;
  }
  fputs("the program's own data\n", f);
  fflush(f);
  for (int i = 0; i < 20; ++i) {  // events for the shim to flush, with time for it to do so
    leak_blocks(2000, 64);
    sleep_ms(20);
  }
  fputs("more of the program's data\n", f);
  fclose(f);
  f = fopen(path, "r");
  char buf[4096];
  size_t n = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  printf("the file holds %zu bytes: %s\n", n, n == 50 ? "only the program's" : "something else too");
  return 0;
}

// --- a plain crash: no handler of its own, the default action of SIGSEGV ------------------------------
static int mode_crash(long n) {
  leak_blocks(n, 100);
  printf("crashing\n");
  fflush(stdout);
  fault();
  return 1;
}

// --- the program asks whether it runs in secure-execution mode (for the security tests) -----------
static int mode_secure(long n) {
  leak_blocks(n, 100);
  printf("AT_SECURE=%lu\n", getauxval(AT_SECURE));
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: misbehave MODE [ARGS]\n");
    return 2;
  }
  self_path = argv[0];
  const char *m = argv[1];
  long n = argc > 2 ? atol(argv[2]) : 100;
  if (!strcmp(m, "killed")) return mode_killed(n);
  if (!strcmp(m, "segv_handler")) return mode_segv("handler", n);
  if (!strcmp(m, "segv_longjmp")) return mode_segv("longjmp", n);
  if (!strcmp(m, "segv_default")) return mode_segv_default(n, argc > 3 ? atol(argv[3]) : 0);
  if (!strcmp(m, "_exit")) return mode_exit("_exit", n);
  if (!strcmp(m, "_Exit")) return mode_exit("_Exit", n);
  if (!strcmp(m, "abort")) return mode_abort(n);
  if (!strcmp(m, "threads_outlive")) return mode_threads_outlive(n, argc > 3 ? atol(argv[3]) : 30);
  if (!strcmp(m, "fork_from_thread")) return mode_fork_from_thread();
  if (!strcmp(m, "main_pthread_exit")) return mode_main_pthread_exit(n, argc > 3 ? atol(argv[3]) : 20000);
  if (!strcmp(m, "altstack_alloc")) return mode_altstack_alloc(n);
  if (!strcmp(m, "alloca_frames")) return mode_alloca_frames(n);
  if (!strcmp(m, "signal_alloc") || !strcmp(m, "signal_alloc_baseline"))
    return mode_signal_alloc(n, argc > 3 ? argv[3] : NULL, !strcmp(m, "signal_alloc"));
  if (!strcmp(m, "child")) return mode_child(n);
  if (!strcmp(m, "vfork")) return mode_vfork(n);
  if (!strcmp(m, "spawn")) return mode_spawn(n);
  if (!strcmp(m, "dlopen") && argc > 3) return mode_dlopen(argv[3], n, 0);
  if (!strcmp(m, "dlopen_deepbind") && argc > 3) return mode_dlopen(argv[3], n, 1);
  if (!strcmp(m, "early")) return mode_early();
  if (!strcmp(m, "malloc_api")) return mode_malloc_api(n);
  if (!strcmp(m, "owner")) return mode_owner();
  if (!strcmp(m, "secure")) return mode_secure(n);
  if (!strcmp(m, "crash")) return mode_crash(n);
  if (!strcmp(m, "close_fds") && argc > 2) return mode_close_fds(argv[2]);
  if (!strcmp(m, "chdir_fork") && argc > 2) return mode_chdir_fork(argv[2]);
  fprintf(stderr, "unknown mode %s\n", m);
  return 2;
}
