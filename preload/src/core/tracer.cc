// Start-up, shut-down and fork handling of the tracer.
#include "core/tracer.h"

#include <dlfcn.h>
#include <link.h>
#include <cstdio>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "sampling/module_map.h"
#include "output/tail_guard.h"
#include "core/got_route.h"
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

// The tail guard (tail_guard.h), unless HEAPSNAP_TAIL_GUARD=0. Without it tracing goes on: a
// marker in the capture says the tail of an abrupt end is not kept.
void start_tail_guard() {
  const char *env = getenv("HEAPSNAP_TAIL_GUARD");
  if (env && strcmp(env, "0") == 0) return;
  // Under valgrind (its preloaded core is among the loaded objects), whose clone() takes threads
  // and forks only: a process sharing the program's memory ended the run ("Unsupported clone()
  // flags"). Valgrind runs the program to its end anyway.
  for (const link_map *l = _r_debug.r_map; l; l = l->l_next)
    if (l->l_name && strstr(l->l_name, "/vgpreload_")) return;
  if (!tail_guard::start()) {
    static const char kNote[] = "heapsnap: no tail guard (clone failed): events of the last 100 ms are lost if the process ends without exit()";
    outbox_append_marker(0, kNote, sizeof(kNote) - 1);
  }
}

void say_refusal(const char *why) {
  char msg[900];
  int n = snprintf(msg, sizeof(msg), "heapsnap: not tracing this process (%s): %s\n", writer_capture_path(), why + 7);
  if (n > int(sizeof(msg)) - 1) n = int(sizeof(msg)) - 1;
  if (n > 0) (void)!write(2, msg, size_t(n));
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
  tail_guard::after_fork_child();
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
    --t_local.guard;
    return;
  }
  start_tail_guard();
  if (ThreadState *s = t_local.state) {
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
  // (With snapshots too: a free needs nothing more, and an allocation's live-block entry is
  // alloc_info's.)
  if (s == kActive) shadow::enable_fast_paths(usable::g_glibc_layout);
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
  // Programs the shim cannot trace truthfully are refused by name, never traced with wrong figures.
  char refusal[600] = "";
  char who[400];
  if (!real::shim_is_first(who, sizeof(who)))
    snprintf(refusal, sizeof(refusal),
             "error: malloc is defined by %s ahead of heapsnap, so the program's allocations never reach "
             "heapsnap: put libheapsnap_preload.so first in LD_PRELOAD (heapsnap record does)", who);
  else if (!usable::g_blocks_aligned)
    snprintf(refusal, sizeof(refusal),
             "error: the program's allocator hands out blocks less than 8 bytes apart, which heapsnap "
             "cannot tell apart: not supported");
  sampled_blocks::init(config.sample_bytes <= sampled_blocks::kDenseSampleBytes,
                       block_unit_shift(usable::g_glibc_layout));
  g_pid = getpid();
  g_start_ns = mono_ns();
  const char *failure = nullptr;
  if (!heap::init()) failure = "cannot load libmimalloc.so.2 (apt-get install libmimalloc2.0)";
  if (!failure) {
    // From here on the mappings mimalloc (the private heap) and libunwind (its memory pools) make
    // are known as heapsnap's (own_mappings.h). A library the program also uses itself serves it
    // too: mimalloc is then left out; libunwind's pools (a few pages) are counted as heapsnap's.
    static const char *const kPrivate[] = {"libmimalloc", "libunwind", nullptr};
    got_route::route_mmaps(heap::shared_with_program() ? kPrivate + 1 : kPrivate);
    unwind::init();
    create_thread_key();
    snapshot::init();
    if (!writer_open_capture(false, 0)) failure = "cannot create the output file";
  }
  if (!failure && refusal[0]) {
    // The capture says why it holds nothing (summary and record show it), and so does stderr.
    writer_finish(refusal);
    set_state(kStopped);
    say_refusal(refusal);
    --t_local.guard;
    return;
  }
  if (!failure) {
    // Not refused (malloc and free still reach the shim), but said, in the capture and on stderr:
    // allocations made through another allocator's own API are not traced.
    char api[600];
    if (real::direct_allocator_api(api, sizeof(api))) {
      char note[800];
      int n = snprintf(note, sizeof(note),
                       "heapsnap: the program calls its allocator's own API, %s, which bypasses malloc and free: "
                       "blocks allocated or freed through it are not traced (totals and leaks cover malloc, free and "
                       "operator new/delete only)", api);
      if (n > int(sizeof(note)) - 1) n = int(sizeof(note)) - 1;
      if (n > 0) {
        outbox_append_marker(0, note, size_t(n));
        note[n] = '\n';
        (void)!write(2, note, size_t(n) + 1);
      }
    }
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    // The main thread registers now so that its ThreadEvent comes first.
    t_local.countdown = 0;
    // The first frame (process, modules) is written now: a program that dies before the first
    // periodic flush still leaves a readable capture.
    writer_flush_now();
    if (!writer_start_thread()) failure = "cannot start the writer thread";
    else start_tail_guard();
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
