// Start-up, shut-down and fork handling of the tracer.
#include "core/tracer.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "sampling/module_map.h"
#include "core/private_heap.h"
#include "intercept/real_alloc.h"
#include "tables/sampled_blocks.h"
#include "sampling/sampled_path.h"
#include "tables/shadow_map.h"
#include "snapshot/snapshot.h"
#include "sampling/stack_table.h"
#include "tables/call_sites.h"
#include "core/thread_state.h"
#include "sampling/unwinder.h"
#include "intercept/usable_size.h"
#include "tables/info_shadow.h"

namespace hs {

std::atomic<int> g_state{kUninit};
uint64_t g_start_ns = 0;
int g_pid = 0;
GlobalTotals g_totals;

namespace {

// --no-follow: take the shim out of LD_PRELOAD so that programs this one execs run untraced.
// The environment's LD_PRELOAD entries, edited in place: setenv and unsetenv are not glibc's in
// every program (bash exports its own, which do nothing before its variable table exists, so
// `record --no-follow -- bash -c ...` traced what bash ran), and they allocate. Every entry (a
// duplicate that still named the shim would take over when the other went).
void strip_from_ld_preload() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void *>(&strip_from_ld_preload), &info) || !info.dli_fname) return;
  const char *self = strrchr(info.dli_fname, '/');
  self = self ? self + 1 : info.dli_fname;
  for (char **entry = environ; entry && *entry;) {
    if (strncmp(*entry, "LD_PRELOAD=", 11) != 0) {
      ++entry;
      continue;
    }
    char *cur = *entry + 11;
    char out[4096];
    size_t o = 0;
    bool fits = true;
    const char *p = cur;
    while (*p && fits) {
      while (*p == ':' || *p == ' ') ++p;
      const char *start = p;
      while (*p && *p != ':' && *p != ' ') ++p;
      size_t len = size_t(p - start);
      if (!len) continue;
      const char *base = start;
      for (const char *q = start; q < p; ++q)
        if (*q == '/') base = q + 1;
      if (size_t(p - base) == strlen(self) && memcmp(base, self, size_t(p - base)) == 0) continue;
      if (o + len + 2 >= sizeof(out)) fits = false;
      else {
        if (o) out[o++] = ':';
        memcpy(out + o, start, len);
        o += len;
      }
    }
    if (!fits) {
      ++entry;  // too long to rebuild here: left as it is
      continue;
    }
    out[o] = '\0';
    if (o) {
      memcpy(cur, out, o + 1);  // never longer than what it replaces
      ++entry;
      continue;
    }
    // Nothing left: the entry goes (later entries move up one, the terminating null with them).
    for (char **e = entry; *e; ++e) e[0] = e[1];
  }
}

void fork_prepare() {
  if (!tracing()) return;
  ++t_local.guard;
  writer_fork_prepare();
  registry_lock();
  stack_table_lock();
  modules::lock();
  sampled_blocks::lock_all();
  outbox_lock();
}

void fork_parent() {
  if (!tracing()) return;
  outbox_unlock();
  sampled_blocks::unlock_all();
  modules::unlock();
  stack_table_unlock();
  registry_unlock();
  writer_fork_parent();
  --t_local.guard;
}

void fork_child() {
  if (!tracing()) return;
  int parent = g_pid;
  g_pid = getpid();
  writer_after_fork_child();
  modules::after_fork_child();
  stack_table_after_fork_child();
  sampled_blocks::after_fork_child();
  call_sites::after_fork_child();
  snapshot::after_fork_child();
  registry_after_fork_child();
  if (config.fork_mode == ForkMode::stop) {
    set_state(kStopped);
    --t_local.guard;
    return;
  }
  // The child continues the parent's figures (its heap is a copy) in a file of its own.
  if (!writer_open_capture(true, parent) || !writer_start_thread()) {
    set_state(kStopped);
    writer_note_failure("cannot start the capture of a forked child");
  } else if (ThreadState *s = t_local.state) {
    outbox_lock();
    wire::RecordMark m = wire::begin_record(outbox(), wire::kThread);
    outbox().u64(1, s->tid);
    outbox().boolean(3, true);
    wire::end_record(outbox(), m);
    outbox_unlock();
  }
  --t_local.guard;
}

}  // namespace

void set_state(int s) {
  if (s != kActive) shadow::enable_fast_paths(false);
  g_state.store(s);
  if (s == kActive) shadow::enable_fast_paths(usable::g_glibc_layout && !info::enabled);
}

void stop_tracing(const char *why) {
  int expected = kActive;
  shadow::enable_fast_paths(false);
  if (!g_state.compare_exchange_strong(expected, kStopped)) return;  // was not tracing
  writer_note_failure(why);
}

__attribute__((constructor)) void heapsnap_start() {
  int expected = kUninit;
  if (!g_state.compare_exchange_strong(expected, kStarting)) return;
  ErrnoSaver es;
  ++t_local.guard;
  real::resolve_next();
  usable::init();
  if (!read_config()) {
    set_state(kStopped);
    --t_local.guard;
    return;
  }
  if (config.no_follow_exec) strip_from_ld_preload();
  sampled_blocks::init(config.sample_bytes <= sampled_blocks::kDenseSampleBytes,
                       block_unit_shift(usable::g_glibc_layout));
  g_pid = getpid();
  g_start_ns = mono_ns();
  const char *failure = nullptr;
  if (!heap::init()) failure = "cannot load libmimalloc.so.2 (apt-get install libmimalloc2.0)";
  if (!failure) {
    unwind::init();
    create_thread_key();
    snapshot::init();
    if (!writer_open_capture(false, 0)) failure = "cannot create the output file";
  }
  if (!failure) {
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    // The main thread registers now so that its ThreadEvent comes first.
    t_local.countdown = 0;
    // The first frame (process, modules) is written now: a program that dies before the first
    // periodic flush still leaves a readable capture.
    writer_flush_now();
    if (!writer_start_thread()) failure = "cannot start the writer thread";
  }
  if (failure) {
    set_state(kStopped);
    config.debug = true;
    writer_note_failure(failure);
  } else {
    set_state(kActive);
  }
  --t_local.guard;
}

// Runs after the program's atexit handlers and static destructors (our constructor ran before
// the executable's), so the final totals see what memcheck's leak check would see.
__attribute__((destructor)) void heapsnap_finish() {
  if (!tracing() || getpid() != g_pid) return;
  ErrnoSaver es;
  ++t_local.guard;
  // The writer first (a snapshot its tick starts would race the ones below). The exit snapshot
  // while still tracing: threads that outlive main keep allocating and freeing until the
  // snapshot parks them, and an untraced call there would leave the shadow stale (freed blocks
  // still listed, new ones missing).
  writer_stop_thread();
  snapshot::at_exit();
  set_state(kStopped);
  writer_finish("exit");
  unwind::write_check_report(config.unwind_check);
  --t_local.guard;
}

// _exit, exec: the process ends without destructors; the capture is finished first.
void finish_before_process_ends(const char *reason) {
  if (!tracing() || getpid() != g_pid) return;  // getpid differs in a vfork child: hands off
  ErrnoSaver es;
  ++t_local.guard;
  writer_stop_thread();  // then the snapshots while still tracing, as in heapsnap_finish
  if (strcmp(reason, "exec") == 0) snapshot::drain();
  else snapshot::at_exit();
  set_state(kStopped);
  writer_finish(reason);
  unwind::write_check_report(config.unwind_check);
  --t_local.guard;
}

}  // namespace hs
