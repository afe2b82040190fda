#include "snapshot/child.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_createCCtx_advanced: the child allocates from its arena
#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/config.h"
#include "core/tracer.h"
#include "core/private_heap.h"
#include "snapshot/child_internal.h"
#include "snapshot/child_memory.h"
#include "snapshot/child_threads.h"
#include "snapshot/child_types.h"

namespace hs::snapshot::child {
namespace {

// HEAPSNAP_DEBUG=1: the child's phases on stderr, wall and CPU milliseconds (a profile that a
// loaded machine does not blur as much as wall time alone).
struct Phases {
  const char *name[16];
  uint64_t wall[16], cpu[16];
  int n = 0;
  void mark(const char *what) {
    if (!config.debug || n == 16) return;
    name[n] = what;
    wall[n] = mono_ns();
    cpu[n++] = thread_cpu_ns();
  }
  void print(uint64_t t0, uint32_t threads) const {
    char msg[1024];
    // (cpu: the child's first thread only; the edges' other threads are not counted)
    size_t len = size_t(snprintf(msg, sizeof(msg), "heapsnap: snapshot child, %u scan thread%s, ms wall/cpu:", threads,
                                 threads == 1 ? "" : "s"));
    for (int i = 0; i < n && len < sizeof(msg); ++i) {
      uint64_t w = wall[i] - (i ? wall[i - 1] : t0), c = i ? cpu[i] - cpu[i - 1] : 0;
      len += size_t(snprintf(msg + len, sizeof(msg) - len, " %s %lu.%lu/%lu.%lu", name[i], (unsigned long)(w / 1000000),
                             (unsigned long)(w / 100000 % 10), (unsigned long)(c / 1000000), (unsigned long)(c / 100000 % 10)));
    }
    if (len < sizeof(msg)) len += size_t(snprintf(msg + len, sizeof(msg) - len, "\n"));
    if (len > sizeof(msg)) len = sizeof(msg);
    (void)!write(2, msg, len);
  }
};

[[noreturn]] void child_exit(int code) {
  syscall(SYS_exit_group, code);
  __builtin_unreachable();
}

void on_child_fault(int sig) {
  static const char msg[] = "heapsnap: snapshot child crashed\n";
  (void)!write(2, msg, sizeof(msg) - 1);
  child_exit(kExitCrashed + sig);
}

// A frozen at-peak child: the image stays as it was at the fork until the program says scan (a
// GoMessage on the pipe) or kills it; if the program is gone (this child was reparented), it
// exits. Returns the program's pause for this fork (which the child cannot measure: it may not
// run until long after the clone). A scan in the background runs on one thread.
uint64_t wait_for_go(int fd, uint64_t program_pid) {
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, 1000);
    if (r > 0) {
      GoMessage go{};
      ssize_t n = read(fd, &go, sizeof(go));
      if (n == ssize_t(sizeof(go))) {
        close(fd);
        if (go.background) config.snapshot_threads = 1;  // (this child's copy of the settings)
        return go.pause;
      }
      if (n >= 0 || (errno != EINTR && errno != EAGAIN)) child_exit(0);
    }
    if (uint64_t(getppid()) != program_pid) child_exit(0);
  }
}

}  // namespace

[[noreturn]] HS_NOINLINE void run(const RunArgs &a) {
  uint64_t live_blocks = a.live_blocks;
  // The program's signal handlers are not ours to run here.
  sigset_t all;
  sigfillset(&all);
  sigdelset(&all, SIGSEGV);
  sigdelset(&all, SIGBUS);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_child_fault;
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
  // Its own name in ps and top: the fork took the forking thread's (heapsnap-writer, or the
  // program's thread), and a frozen at-peak child can live as long as the program.
  prctl(PR_SET_NAME, "heapsnap-snap", 0, 0, 0);
  uint64_t frozen_pause = a.go_fd >= 0 ? wait_for_go(a.go_fd, a.program_pid) : 0;
  uint64_t arena_lo = 0, arena_hi = 0;
  if (!heap::switch_to_child_arena(kChildArenaBytes, &arena_lo, &arena_hi)) child_exit(kExitNoMemory);

  Child *cp = static_cast<Child *>(heap::alloc_zeroed(sizeof(Child)));
  if (!cp) child_exit(kExitNoMemory);
  Child &c = *new (cp) Child();
  c.index = a.index;
  c.fd = a.fd;
  c.t0 = mono_ns();
  c.self_sp = a.sp;
  c.main_tid = a.program_pid;
  c.writer_lo = a.writer_lo;
  c.writer_hi = a.writer_hi;
  c.arena_lo = arena_lo;
  c.arena_hi = arena_hi;
  c.zstd = make_zstd();
  if (!c.zstd) child_exit(kExitNoMemory);

  if (a.begin) {
    wire::RecordMark b = wire::begin_record(c.out, wire::kSnapshotBegin);
    c.out.u64(1, c.index);
    c.out.u64(2, a.begin->when);
    c.out.u64(3, uint64_t(a.begin->trigger));
    c.out.str(4, a.begin->label);
    c.out.u64(5, a.go_fd >= 0 ? frozen_pause : c.t0 > a.begin->pause_from_ns ? c.t0 - a.begin->pause_from_ns : 0);
    size_t at = c.out.open(6);
    encode_totals(c.out, *a.begin->totals);
    c.out.close(at);
    c.out.boolean(7, true);
    wire::end_record(c.out, b);
  }

  const size_t kMaxMaps = 1 << 16;
  c.maps = static_cast<Mapping *>(heap::alloc(kMaxMaps * sizeof(Mapping)));
  char *scratch = static_cast<char *>(heap::alloc(32u << 20));
  c.nmaps = c.maps && scratch ? read_proc_maps(c.maps, kMaxMaps, scratch, 32u << 20) : -1;
  if (c.nmaps < 0) child_exit(kExitNoMaps);
  c.holds = static_cast<uint8_t *>(heap::alloc_zeroed(size_t(c.nmaps) + 1));

  Phases ph;
  ph.mark("maps");
  // The program's smaps and which pages the child's copy holds, before anything here reads the
  // program's memory or the tracer's tables (see child_memory.h).
  memory_begin(c, arena_lo, arena_hi);
  ph.mark("smaps");
  build_exclusions(c, arena_lo, arena_hi, a.extra, a.nextra);
  // Room for the blocks the totals count, and some (the arena is virtual: unused room is free).
  if (live_blocks > (uint64_t(1) << 28)) live_blocks = uint64_t(1) << 28;
  if (!reserve_blocks(c, live_blocks + live_blocks / 8 + 65536)) child_exit(kExitNoMemory);
  const uint32_t nthreads = threads::wanted();
  enumerate_blocks(c, nthreads);
  ph.mark("enumerate");
  // Before the pools' objects replace their arenas in the block list.
  if (!c.error) write_memory(c, *a.regs, arena_lo, arena_hi);
  ph.mark("memory");
  merge_pool_objects(c);
  mark_heap_mappings(c);
  if (c.n) {
    c.lo = c.addr[0];
    c.hi = c.addr[c.n - 1] + (c.size[c.n - 1] ? c.size[c.n - 1] : 1);
  }
  ph.mark("pools");
  write_blocks(c, nthreads);
  ph.mark("blocks");
  if (config.snapshot_contents) write_contents(c);
  ph.mark("contents");
  build_index(c, nthreads);
  ph.mark("index");
  types_begin(c);  // (out of memory: the classes stay unknown)
  if (nthreads > 1 && c.n && !c.error) {
    c.scan_threads = scan_blocks_parallel(c, nthreads);
  } else {
    scan_blocks(c);
  }
  types_flush(c);
  ph.mark("edges");
  scan_roots(c, *a.regs);
  scan_registers(c, *a.regs);
  ph.mark("roots");
  uint64_t scan_ns = mono_ns() - c.t0;
  if (config.test_child_error && !c.error) c.error = "test: the child's own error (HEAPSNAP_TEST_CHILD_ERROR)";

  wire::RecordMark m = wire::begin_record(c.out, wire::kSnapshotEnd);
  c.out.u64(1, c.index);
  c.out.u64(2, c.n);
  c.out.u64(3, c.bytes);
  c.out.u64(4, c.edges);
  c.out.u64(5, c.root_edges);
  c.out.u64(6, scan_ns);
  c.out.u64(7, mono_ns() - c.t0);
  c.out.boolean(8, c.error == nullptr);
  c.out.str(9, c.error);
  c.out.u64(10, c.roots);
  c.out.u64(11, c.root_bytes);
  c.out.u64(12, c.skipped);
  c.out.u64(13, c.interior);
  c.out.u64(14, c.scan_threads);
  timespec cpu;  // (the child's threads together: a figure a loaded machine does not inflate as it does wall time)
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu) == 0) c.out.u64(15, uint64_t(cpu.tv_sec) * 1000000000ull + uint64_t(cpu.tv_nsec));
  wire::end_record(c.out, m);
  // (kExitSaidWhy: the parent adds no end record of its own; kExitFileTorn also when the end
  // record itself could not be written.)
  const char *error = c.error;
  c.error = nullptr;
  flush_frame(c, true);
  const bool end_written = c.error == nullptr && !c.file_torn;
  if (!error) error = c.error;
  ph.mark("end");
  if (config.debug) ph.print(c.t0, c.scan_threads);
  child_exit(!error ? kExitDone : end_written ? kExitSaidWhy : kExitFileTorn);
}

}  // namespace hs::snapshot::child
