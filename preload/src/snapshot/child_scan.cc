#include "snapshot/child_internal.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>

#include <sys/syscall.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_createCCtx_advanced: the child allocates from its arena
#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/thread_state.h"
#include "sampling/frame_rules.h"
#include "snapshot/child_edges.h"
#include "snapshot/child_types.h"

namespace hs::snapshot::child {

// The blocks' edges on one thread (HEAPSNAP_SNAPSHOT_THREADS=1; child_scan_parallel.cc for more):
// each record compressed as soon as it is full, the types noted as the scan meets them.
HS_POPCNT_CLONES void scan_blocks(Child &c) {
  EdgeRecord e;
  e.out = &c.out;
  e.index = c.index;
  const ScanBounds sb(c);
  auto note = [&](uint32_t i, uint64_t w) { type_note(c, i, w); };
  for (uint32_t i = 0; i < c.n && !c.error; ++i)
    if (scan_block(c, sb, e, i, note) && edge_record_flush(e)) flush_frame(c, false);
  if (edge_record_flush(e)) flush_frame(c, false);
  c.edges += e.total;
  c.interior += e.total_interior;
  if (e.failed()) c.error = "out of memory (edges)";
}

// Whether v, an interior pointer into block t, is where the chunk after t begins (its header):
// glibc's arena (main_arena, in libc's .data) points there from its bins, fastbins, top and last
// remainder, and the first word of that header (prev_size) overlaps the last 8 bytes of t's
// usable size. Such a word is the allocator's, not the program's: no root.
HS_INLINE bool is_next_chunk_header(const Child &c, uint32_t t, uint64_t v) {
  uint64_t a = c.addr[t];
  uint64_t head = reinterpret_cast<const uint64_t *>(a)[-1];
  return !(head & 2) && v == a - 16 + (head & ~uint64_t(7));  // 2 = IS_MMAPPED (no next chunk)
}

// Whether the root word at p is the dtv field of a thread's control block (x86-64 glibc's
// tcbhead_t: tcb, dtv, self, with tcb and self its own address). It points 16 bytes into the
// thread's DTV, a block ld.so callocs for every thread: a reference to the whole block, not a
// "possibly lost" interior one (threads that have ended keep theirs in glibc's stack cache).
HS_INLINE bool is_thread_dtv_field(uint64_t p, uint64_t start, uint64_t end) {
  if (p < start + 8 || p + 16 > end) return false;
  const uint64_t *w = reinterpret_cast<const uint64_t *>(p);
  return w[-1] == p - 8 && w[1] == p - 8;
}

// The name of the program's thread `tid` (pthread_setname_np, or the program's name), read from
// /proc: the child is a fork, so the threads are the parent's. "" when it cannot be read (the
// thread has ended since, or /proc is not mounted).
const char *thread_name(const Child &c, uint64_t tid, char (&out)[32]) {
  out[0] = 0;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%llu/task/%llu/comm", (unsigned long long)c.main_tid, (unsigned long long)tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  ssize_t n = read(fd, out, sizeof(out) - 1);
  close(fd);
  if (n <= 0) n = 0;
  while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == 0)) --n;
  out[n] = 0;
  return out;
}

// The frames of thread `tid`'s stack, innermost first, stepped from its registers with
// .eh_frame's rules (frame_rules.h, the walker the sampled stacks use): so that a root word of
// the stack can be said to be in the frame of the function that holds it. Every read lies in
// [sp, stack_end) (the child's copy of the stack); a frame without a rule, or one that does not
// move up the stack, ends the walk. Writes SnapshotRoots fields 11 and 12 into the record of the
// range [start, stack_end) that holds the stack pointer; nothing when the registers are not known.
static void write_frames(Child &c, uint64_t tid, uint64_t start, uint64_t stack_end) {
  if (!c.regs) return;
  const regs::ThreadRegs *t = nullptr;
  for (uint32_t i = 0; i < c.regs->n; ++i)
    if (c.regs->threads[i].tid == tid && c.regs->threads[i].how != regs::kNone) t = &c.regs->threads[i];
  if (!t || t->words[15] >= stack_end || t->words[15] + 256 < start) return;
  constexpr int kMaxFrames = 128;
  uint64_t sp = t->words[15], pc = t->words[16], bp = t->how == regs::kSignal ? t->words[10] : 0;
  const uint64_t lo = sp;
  wire::Buf cfas, pcs;
  for (int i = 0; i < kMaxFrames && pc; ++i) {
    frame_rules::Rule rule;
    // (Frame 0's pc is the instruction interrupted; the others are return addresses, whose call
    // is the byte before.)
    if (!frame_rules::find(i == 0 ? pc : pc - 1, &rule)) break;
    if (rule.base == frame_rules::kCfaFromBp && !bp) break;
    const uint64_t cfa = (rule.base == frame_rules::kCfaFromBp ? bp : sp) + int64_t(rule.cfa_offset);
    if (cfa <= sp || cfa < lo + 8 || cfa > stack_end) break;
    cfas.varint(cfa);
    pcs.varint(pc);
    if (rule.flags & frame_rules::kOutermost) break;
    if (rule.flags & frame_rules::kBpSaved) {
      const uint64_t at = cfa + int64_t(rule.bp_offset);
      if (at < lo || at + 8 > stack_end) break;
      bp = *reinterpret_cast<const uint64_t *>(at);
    }
    pc = *reinterpret_cast<const uint64_t *>(cfa - 8);
    sp = cfa;
  }
  if (!cfas.size()) return;
  c.out.len(11, cfas.data(), cfas.size());
  c.out.len(12, pcs.data(), pcs.size());
}

HS_POPCNT_CLONES void scan_root(Child &c, int kind, uint64_t detail, uint64_t start, uint64_t end, const char *name,
                                bool always = false, bool glibc_arena_words = false) {
  start = (start + 7) & ~uint64_t(7);
  if (end <= start) return;
  wire::Buf targets, offs, inter, vec_root, vec_size, vec_cap;
  uint64_t prev_t = 0, prev_off = 0, count = 0, prev_inter = 0, prev_vec = 0;
  // Pages never touched (most of an 8 MiB thread stack) hold only zeros: mincore() tells which
  // are resident, so the scan reads only those (and does not fault the rest in).
  constexpr uint64_t kPage = 4096, kChunk = 256;
  unsigned char resident[kChunk];
  uint64_t chunk_lo = 0, chunk_hi = 0;
  bool have_mincore = true;
  for (uint64_t p = start; p + 8 <= end; p += 8) {
    if (have_mincore && (p < chunk_lo || p >= chunk_hi)) {
      chunk_lo = p & ~(kPage - 1);
      chunk_hi = chunk_lo + kChunk * kPage;
      if (chunk_hi > ((end + kPage - 1) & ~(kPage - 1))) chunk_hi = (end + kPage - 1) & ~(kPage - 1);
      if (mincore(reinterpret_cast<void *>(chunk_lo), chunk_hi - chunk_lo, resident) != 0) have_mincore = false;
    }
    if (have_mincore && !(resident[(p - chunk_lo) / kPage] & 1)) {
      p = ((p / kPage) + 1) * kPage - 8;  // next page
      continue;
    }
    uint64_t v = *reinterpret_cast<const uint64_t *>(p);
    if (v < c.lo || v >= c.hi) continue;
    bool interior = false;
    uint32_t t = lookup(c, v, &interior);
    if (t == UINT32_MAX) continue;
    if (HS_UNLIKELY(glibc_arena_words) && interior && is_next_chunk_header(c, t, v)) continue;
    if (interior && v == c.addr[t] + 16 && is_thread_dtv_field(p, start, end)) interior = false;
    targets.varint(wire::zigzag(int64_t(t) - int64_t(prev_t)));
    prev_t = t;
    offs.varint(p - start - prev_off);
    prev_off = p - start;
    if (interior) {
      inter.varint(count - prev_inter);
      prev_inter = count;
    }
    // A static or a stack's std::vector header (child_edges.h, vector_triple). (Its two other
    // words are read even on a page mincore says is not resident: a read of the fork's memory.)
    uint64_t live;
    if (!interior && p + 24 <= end &&
        vector_triple(c, t, v, reinterpret_cast<const uint64_t *>(p)[1], reinterpret_cast<const uint64_t *>(p)[2], &live)) {
      vec_root.varint(count - prev_vec);
      prev_vec = count;
      vec_size.varint(live);
      vec_cap.varint(c.size[t]);
    }
    ++count;
  }
  ++c.roots;
  c.root_bytes += end - start;
  c.root_edges += count;
  if (!count && !always) return;
  wire::RecordMark m = wire::begin_record(c.out, wire::kSnapshotRoots);
  c.out.u64(1, c.index);
  c.out.u64(2, uint64_t(kind));
  c.out.u64(3, detail);
  c.out.u64(4, start);
  c.out.u64(5, end - start);
  c.out.len(6, targets.data(), targets.size());
  c.out.len(7, offs.data(), offs.size());
  if (inter.size()) c.out.len(8, inter.data(), inter.size());
  c.out.str(9, name);
  if (kind == 1 || kind == 2) {  // a thread's stack or registers: the thread's name
    char tn[32];
    if (thread_name(c, detail, tn)[0]) c.out.str(10, tn);
  }
  if (kind == 1) write_frames(c, detail, start, end);
  if (vec_root.size() && !vec_root.failed() && !vec_size.failed() && !vec_cap.failed()) {
    c.out.len(13, vec_root.data(), vec_root.size());
    c.out.len(14, vec_size.data(), vec_size.size());
    c.out.len(15, vec_cap.data(), vec_cap.size());
  }
  wire::end_record(c.out, m);
  flush_frame(c, false);
}

// A register root that holds nothing to scan: a thread whose registers were not captured, and why.
void write_missing_registers(Child &c, uint32_t tid, const char *name) {
  wire::RecordMark m = wire::begin_record(c.out, wire::kSnapshotRoots);
  c.out.u64(1, c.index);
  c.out.u64(2, uint64_t(2));
  c.out.u64(3, tid);
  c.out.str(9, name);
  char tn[32];
  if (thread_name(c, tid, tn)[0]) c.out.str(10, tn);
  wire::end_record(c.out, m);
}

// The registers of the program's other threads (thread_regs.h): a root of their own kind per
// thread ("registers of thread T"), from the copy the parent made before the clone.
void scan_registers(Child &c, const regs::Result &r) {
  for (uint32_t i = 0; i < r.n && !c.error; ++i) {
    const regs::ThreadRegs &t = r.threads[i];
    char name[160];
    if (t.how == regs::kSignal) {
      snprintf(name, sizeof(name), "of thread %u%s", t.tid,
               t.interrupted == 2   ? " (its signal interrupted a system call, which it then continued)"
               : t.interrupted == 1 ? " (its signal may have interrupted a system call: EINTR)"
                                    : "");
      uint64_t lo = reinterpret_cast<uint64_t>(t.words);
      scan_root(c, 2, t.tid, lo, lo + t.nwords * 8, name, true);
    } else if (t.how == regs::kSyscall) {
      const char *sys = regs::syscall_name(t.syscall_nr);
      char nr[24];
      if (!sys) snprintf(nr, sizeof(nr), "%d", int(t.syscall_nr));
      snprintf(name, sizeof(name), "of thread %u (blocked in %s%s: stack pointer and pc only)", t.tid,
               t.syscall_nr < 0 ? "the kernel, not in a system call" : sys ? sys : "system call ",
               t.syscall_nr < 0 || sys ? "" : nr);
      uint64_t lo = reinterpret_cast<uint64_t>(t.words);
      scan_root(c, 2, t.tid, lo, lo + t.nwords * 8, name, true);
    } else {
      snprintf(name, sizeof(name), "of thread %u not captured: %s", t.tid, t.why ? t.why : "unknown");
      write_missing_registers(c, t.tid, name);
    }
  }
  flush_frame(c, false);
}

// The stack pointer of thread `tid` when the handshake learnt it, else 0.
uint64_t known_sp(const regs::Result &r, uint32_t tid) {
  for (uint32_t i = 0; i < r.n; ++i)
    if (r.threads[i].tid == tid) return r.threads[i].sp;
  return 0;
}

// The thread whose known stack pointer lies in [lo, hi), else 0.
uint32_t thread_with_sp_in(const regs::Result &r, uint64_t lo, uint64_t hi, uint64_t *sp) {
  for (uint32_t i = 0; i < r.n; ++i)
    if (r.threads[i].sp >= lo && r.threads[i].sp < hi) {
      *sp = r.threads[i].sp;
      return r.threads[i].tid;
    }
  return 0;
}

// Below a thread's stack pointer: the 128-byte red zone (live), then dead words and, for a thread
// parked by the register signal, its signal frame (the registers, a root of their own kind).
constexpr uint64_t kRedZone = 128;

// The end of the memory a module's program headers ask for (its .bss ends there), read from the
// ELF header at the start of its first mapping (m: that mapping, offset 0); 0 if unreadable.
uint64_t module_image_end(const Mapping &m) {
  if (m.offset != 0 || !m.readable || m.end - m.start < sizeof(Elf64_Ehdr)) return 0;
  const auto *eh = reinterpret_cast<const Elf64_Ehdr *>(m.start);
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phoff + uint64_t(eh->e_phnum) * sizeof(Elf64_Phdr) > m.end - m.start)
    return 0;
  const auto *ph = reinterpret_cast<const Elf64_Phdr *>(m.start + eh->e_phoff);
  uint64_t lo = UINT64_MAX, hi = 0;
  for (unsigned i = 0; i < eh->e_phnum; ++i) {
    if (ph[i].p_type != PT_LOAD) continue;
    if (ph[i].p_vaddr < lo) lo = ph[i].p_vaddr;
    if (ph[i].p_vaddr + ph[i].p_memsz > hi) hi = ph[i].p_vaddr + ph[i].p_memsz;
  }
  if (lo == UINT64_MAX) return 0;
  // The first mapping holds the lowest segment's page: the load bias follows.
  return m.start - (lo & ~uint64_t(4095)) + hi;
}

void scan_roots(Child &c, const regs::Result &rr) {
  c.regs = &rr;
  ThreadStackRange stacks[1024];
  size_t nstacks = thread_stacks(stacks, 1024);
  for (long i = 0; i < c.nmaps && !c.error; ++i) {
    const Mapping &m = c.maps[i];
    if (!m.readable || !m.writable || c.holds[i] == kHoldsHeap || is_ours(m)) continue;
    bool module_path = m.path[0] == '/';
    uint64_t module_end;
    const char *module = module_of(c, i, &module_end);
    uint64_t from = m.start;
    // The shim's data, and another allocator's (its bookkeeping: free lists and caches whose stale
    // pointers reach blocks it has handed out again, no roots of the program).
    if (module && (strstr(module, "libheapsnap_preload") ||
                   (usable::g_allocator_path[0] && strcmp(module, usable::g_allocator_path) == 0))) {
      if (module_path || module_end >= m.end) continue;
      module = nullptr;  // past it, what ld.so mapped next (the main thread's static TLS)
      from = module_end;
    }
    // glibc's own data holds main_arena, whose pointers to chunk headers are no roots.
    bool libc_arena = false;
    if (module && usable::g_glibc_layout) {
      const char *base = strrchr(module, '/');
      libc_arena = strncmp(base ? base + 1 : module, "libc.so", 7) == 0;
    }
    if (m.path[0] == '[' && strcmp(m.path, "[stack]") != 0 && strcmp(m.path, "[heap]") != 0) continue;  // vvar, vdso
    if (strcmp(m.path, "[heap]") == 0) continue;  // the main arena: blocks, not roots
    uint64_t start = from, end = m.end;
    if (c.self_sp > start && c.self_sp < end) start = c.self_sp;  // the forking thread: live part only
    if (strcmp(m.path, "[stack]") == 0) {
      uint64_t sp = known_sp(rr, uint32_t(c.main_tid));
      if (sp > start + kRedZone && sp < end) start = sp - kRedZone;
      scan_root(c, 1, c.main_tid, start, end, "[stack] main thread", true);  // (a thread is a root object even when it holds nothing)
      continue;
    }
    uint32_t tid = 0;
    for (size_t s = 0; s < nstacks; ++s)
      if (stacks[s].lo < m.end && stacks[s].hi > m.start) tid = stacks[s].tid;
    // Another thread's stack: from its stack pointer when the handshake learnt it (a thread the
    // registry does not know is found by its stack pointer too).
    uint64_t sp = tid ? known_sp(rr, tid) : 0;
    if (!tid && !module && !m.path[0]) tid = thread_with_sp_in(rr, m.start, m.end, &sp);
    if (sp > start + kRedZone && sp < end) start = sp - kRedZone;
    auto scan = [&](uint64_t lo, uint64_t hi) {
      if (tid) {
        scan_root(c, 1, tid, lo, hi, "thread stack", true);
      } else if (module) {
        if (lo < module_end) scan_root(c, 0, 0, lo, hi < module_end ? hi : module_end, module, false, libc_arena);
        if (hi > module_end) scan_root(c, 4, 0, lo > module_end ? lo : module_end, hi, "anonymous");
      } else {
        scan_root(c, 4, 0, lo, hi, m.path[0] ? m.path : "anonymous");
      }
    };
    // A mapping the kernel merged with glibc's mmapped chunks, or holding pool objects: the rest
    // of it is the program's.
    if (c.holds[i] == kHoldsBlocksOnly)
      for_each_included(start, end, [&](uint64_t lo, uint64_t hi) { for_each_outside_blocks(c, lo, hi, scan); });
    else
      for_each_included(start, end, scan);
  }
}

}  // namespace hs::snapshot::child
