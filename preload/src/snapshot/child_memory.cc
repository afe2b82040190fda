// The SnapshotMemory record (child_memory.h): the program's RSS split into parts that add up to
// it, at the fork: each anonymous mapping's Rss from the child's own page tables (PAGEMAP_SCAN,
// image_scan.h, else its /proc/self/smaps: they are the fork's copy; the program runs on and its
// own figures, read later, would mix the two moments), each file mapping's from the program's (its
// maps and pagemap, else its smaps: fork does not copy the page tables of file mappings the program
// never wrote; see smaps.h, merge_fork_image); the child then
// claims, in its copy, what it knows of each anonymous mapping, in order of precedence:
// heapsnap's own memory, thread stacks, glibc's mmapped chunks, modules' .bss, and the arenas
// chunk by chunk. What no claim takes is the mapping's own kind (smaps.h, base_kind).
//
// Residency is taken (memory_begin: by the same PAGEMAP_SCAN as the child's own figures, else by
// mincore) before the child reads any of the program's memory or the tracer's tables: a read of a
// page never touched maps the zero page in the child, which mincore counts as resident (smaps does
// not). HEAPSNAP_DEBUG=1 prints the mappings where the two views differ.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>

#include "core/config.h"
#include "core/private_heap.h"
#include "core/thread_state.h"
#include "snapshot/child_memory.h"
#include "snapshot/image_scan.h"

namespace hs::snapshot::child {

using memory::Kind;
using memory::kKinds;

void Meter::set_page() {
  long ps = sysconf(_SC_PAGESIZE);
  page = ps > 0 ? uint64_t(ps) : 4096;
  page_shift = unsigned(__builtin_ctzll(page));
}

bool Meter::init(memory::SmapsEntry *entries, long count, const uint8_t *(*taken)(uint64_t lo, uint64_t hi, void *ctx),
                 void *ctx) {
  e = entries;
  n = count;
  vec = static_cast<uint8_t **>(heap::alloc_zeroed(size_t(n + 1) * sizeof(uint8_t *)));
  vec_failed = static_cast<bool *>(heap::alloc_zeroed(size_t(n + 1)));
  full = static_cast<bool *>(heap::alloc_zeroed(size_t(n + 1)));
  res = static_cast<uint64_t(*)[kKinds]>(heap::alloc_zeroed(size_t(n + 1) * sizeof(*res)));
  virt = static_cast<uint64_t(*)[kKinds]>(heap::alloc_zeroed(size_t(n + 1) * sizeof(*virt)));
  if (!vec || !vec_failed || !full || !res || !virt) return false;
  for (long i = 0; i < n; ++i) {
    if (!e[i].rss || !memory::is_splittable(e[i])) continue;
    size_t pages = size_t((e[i].end - e[i].start) / page);
    // (A reservation of more than 64 GiB is not split: a vector of 16 M entries and more.)
    if (pages > (size_t(1) << 24)) {
      vec_failed[i] = true;
      continue;
    }
    // The vector memory_begin took, else one taken now (a mapping the child's maps did not have).
    vec[i] = const_cast<uint8_t *>(taken(e[i].start, e[i].end, ctx));
    if (!vec[i]) {
      vec[i] = static_cast<uint8_t *>(heap::alloc(pages + 1));
      // ENOMEM: the program mapped it after the fork; the child has none of it.
      if (!vec[i] || mincore(reinterpret_cast<void *>(e[i].start), e[i].end - e[i].start, vec[i]) != 0) vec_failed[i] = true;
    }
    if (vec_failed[i]) continue;
    size_t resident = 0;
    for (size_t pg = 0; pg < pages; ++pg) resident += vec[i][pg] & 1;
    full[i] = resident == pages;
  }
  return true;
}

long Meter::entry_at_or_after(uint64_t a) {
  if (cursor < n && e[cursor].start <= a && a < e[cursor].end) return cursor;
  if (cursor + 1 < n && e[cursor + 1].start <= a && a < e[cursor + 1].end) return ++cursor;
  const memory::SmapsEntry *it =
      std::upper_bound(e, e + n, a, [](uint64_t v, const memory::SmapsEntry &x) { return v < x.end; });
  if (it == e + n) return -1;
  cursor = long(it - e);
  return cursor;
}

uint64_t Meter::resident_in(long i, uint64_t lo, uint64_t hi) {
  if (!e[i].rss || vec_failed[i] || !vec[i]) return 0;
  const uint8_t *v = vec[i];
  uint64_t total = 0;
  for (uint64_t pg = lo & ~(page - 1); pg < hi; pg += page) {
    if (!(v[(pg - e[i].start) >> page_shift] & 1)) continue;
    uint64_t a = pg > lo ? pg : lo, b = pg + page < hi ? pg + page : hi;
    total += b - a;
  }
  return total;
}

uint64_t Meter::add(uint64_t lo, uint64_t hi, Kind k) {
  if (long i = all_resident(lo, hi); i >= 0) {
    claim(i, hi - lo, k);
    return hi - lo;
  }
  uint64_t total = 0;
  while (lo < hi) {
    long i = entry_at_or_after(lo);
    if (i < 0 || e[i].start >= hi) break;
    if (e[i].start > lo) lo = e[i].start;
    uint64_t cut = hi < e[i].end ? hi : e[i].end;
    uint64_t r;
    if (lo == e[i].start && cut == e[i].end) {
      r = e[i].rss;  // the whole mapping: its own Rss, no page count needed
    } else {
      r = resident_in(i, lo, cut);
    }
    virt[i][k] += cut - lo;
    res[i][k] += r;
    total += r;
    lo = cut;
  }
  return total;
}

uint64_t Meter::resident(uint64_t lo, uint64_t hi) {
  uint64_t total = 0;
  while (lo < hi) {
    long i = entry_at_or_after(lo);
    if (i < 0 || e[i].start >= hi) break;
    if (e[i].start > lo) lo = e[i].start;
    uint64_t cut = hi < e[i].end ? hi : e[i].end;
    total += resident_in(i, lo, cut);
    lo = cut;
  }
  return total;
}

namespace {

struct Claim {
  uint64_t lo, hi;
  Kind kind;
};

// Claims of one precedence class, minus what the classes before took (`taken`: sorted, merged),
// then merged into `taken`. Returns the new taken list's size.
size_t claim_class(Meter &m, Claim *cl, size_t n, Claim *&taken, size_t nt) {
  std::sort(cl, cl + n, [](const Claim &a, const Claim &b) { return a.lo < b.lo; });
  size_t t = 0;
  uint64_t done = 0;  // within this class, overlapping claims count once
  for (size_t i = 0; i < n; ++i) {
    uint64_t lo = cl[i].lo > done ? cl[i].lo : done, hi = cl[i].hi;
    while (lo < hi) {
      while (t < nt && taken[t].hi <= lo) ++t;
      if (t < nt && taken[t].lo <= lo) {
        lo = taken[t].hi;
        continue;
      }
      uint64_t cut = t < nt && taken[t].lo < hi ? taken[t].lo : hi;
      m.add(lo, cut, cl[i].kind);
      lo = cut;
    }
    if (hi > done) done = hi;
  }
  auto *merged = static_cast<Claim *>(heap::alloc((nt + n + 1) * sizeof(Claim)));
  if (!merged) return nt;
  size_t a = 0, b = 0, out = 0;
  while (a < nt || b < n) {
    const Claim &x = (b == n || (a < nt && taken[a].lo <= cl[b].lo)) ? taken[a++] : cl[b++];
    if (out && x.lo <= merged[out - 1].hi) {
      if (x.hi > merged[out - 1].hi) merged[out - 1].hi = x.hi;
    } else {
      merged[out++] = x;
    }
  }
  taken = merged;  // (the child's arena never frees)
  return out;
}

// The residency vectors memory_begin took, looked up by range: the piece that holds all of
// [lo, hi), else null.
const Residency *residency_of(const MemoryState &ms, uint64_t lo, uint64_t hi) {
  const Residency *it = std::upper_bound(ms.pieces, ms.pieces + ms.npieces, lo, [](uint64_t v, const Residency &r) { return v < r.hi; });
  return it != ms.pieces + ms.npieces && it->lo <= lo && hi <= it->hi ? it : nullptr;
}

// Resident bytes of [lo, hi) in the child at memory_begin (a mapping merged with the child's
// arena: its part outside the arena), from those vectors.
uint64_t resident_at_begin(uint64_t lo, uint64_t hi, void *ctx) {
  const auto &ms = *static_cast<const MemoryState *>(ctx);
  const uint64_t page = ms.m.page;
  lo &= ~(page - 1);
  const Residency *r = residency_of(ms, lo, hi);
  if (!r || !r->vec) return 0;
  uint64_t total = 0;
  for (uint64_t pg = lo; pg < hi; pg += page) total += (r->vec[(pg - r->lo) / page] & 1) ? page : 0;
  return total;
}

// The test hook HEAPSNAP_TEST_CHILD_HANDSHAKE=DIR (config.h): says it has forked (DIR/forked),
// then waits for DIR/go, for at most 30 s, so that a test program changes its memory between the
// fork and the read of its smaps, on purpose and not by a race.
void test_handshake() {
  char path[sizeof(config.test_child_handshake) + 16];
  snprintf(path, sizeof(path), "%s/forked", config.test_child_handshake);
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) close(fd);
  snprintf(path, sizeof(path), "%s/go", config.test_child_handshake);
  for (int i = 0; i < 30000 && access(path, F_OK) != 0; ++i) {
    timespec ts = {0, 1000000};
    nanosleep(&ts, nullptr);
  }
}

struct Stack {
  uint32_t tid;
  uint64_t lo, hi, rss, used;
};

void write_arena(wire::Buf &o, const ArenaFigures &a) {
  size_t at = o.open(5);
  o.u64(1, a.state);
  o.boolean(2, a.main);
  o.u64(3, a.heaps);
  o.u64(4, a.size);
  for (int p = 0; p < kHeapParts; ++p) {
    o.u64(uint32_t(5 + 2 * p), a.bytes[p]);
    o.u64(uint32_t(6 + 2 * p), a.rss[p]);
  }
  o.u64(17, a.live_chunks);
  o.u64(18, a.free_chunks);
  o.u64(19, a.cached_chunks);
  o.u64(20, a.trimmable);
  o.boolean(21, a.complete);
  o.u64(22, a.fastbin_bytes);
  o.u64(23, a.fastbin_rss);
  o.u64(24, a.fastbin_chunks);
  o.u64(25, a.tcache_bytes);
  o.u64(26, a.tcache_rss);
  o.u64(27, a.tcache_chunks);
  o.close(at);
}

}  // namespace

namespace {

// A mapping of the child's that may be anonymous memory of the program's (smaps.h, is_splittable:
// the child's maps do not say which are shared; a vector too many costs a little time only).
bool may_split(const Mapping &mp) {
  return !mp.path[0] || strcmp(mp.path, "[heap]") == 0 || strcmp(mp.path, "[stack]") == 0 ||
         strncmp(mp.path, "[anon:", 6) == 0;
}

// scan_image's vectors (image_scan.h, ResidencySink): one for each piece of those mappings that it
// scans, so that mincore need not walk their page tables a second time.
uint8_t *scanned_vector(const memory::SmapsEntry &e, void *ctx) {
  auto &ms = *static_cast<MemoryState *>(ctx);
  Mapping mp{};
  memcpy(mp.path, e.path, sizeof(mp.path));
  const size_t pages = size_t((e.end - e.start) >> ms.m.page_shift);
  if (!ms.pieces || e.shared || !may_split(mp) || pages > (size_t(1) << 24)) return nullptr;  // (as take_residency)
  auto *v = static_cast<uint8_t *>(heap::alloc_zeroed(pages + 1));
  if (v) ms.pieces[ms.npieces++] = {e.start, e.end, v};
  return v;
}

// mincore's vectors of those mappings, but for the child's arena [skip_lo, skip_hi) (the kernel
// may have merged a neighbour with it: the rest of that mapping is a piece of its own), where
// scan_image gave none.
void take_residency(const Child &c, MemoryState &ms, uint64_t skip_lo, uint64_t skip_hi) {
  if (!ms.pieces) return;
  const uint64_t page = ms.m.page;
  const size_t scanned = ms.npieces;
  for (long i = 0; i < c.nmaps; ++i) {
    const Mapping &mp = c.maps[i];
    if (!may_split(mp)) continue;
    uint64_t cuts[2][2] = {{mp.start, mp.end < skip_lo ? mp.end : skip_lo}, {mp.start > skip_hi ? mp.start : skip_hi, mp.end}};
    if (!(mp.start < skip_hi && skip_lo < mp.end)) cuts[0][1] = mp.end, cuts[1][0] = cuts[1][1] = 0;
    for (auto &cut : cuts) {
      if (cut[1] <= cut[0]) continue;
      const size_t pages = size_t((cut[1] - cut[0]) / page);
      if (pages > (size_t(1) << 24)) continue;  // (as Meter::init: not split)
      const Residency *have = std::lower_bound(ms.pieces, ms.pieces + scanned, cut[0], [](const Residency &r, uint64_t v) { return r.lo < v; });
      if (have != ms.pieces + scanned && have->lo == cut[0] && have->hi == cut[1]) continue;
      auto *v = static_cast<uint8_t *>(heap::alloc(pages + 1));
      if (v && mincore(reinterpret_cast<void *>(cut[0]), cut[1] - cut[0], v) != 0) v = nullptr;
      ms.pieces[ms.npieces++] = {cut[0], cut[1], v};
    }
  }
  if (ms.npieces > scanned)
    std::sort(ms.pieces, ms.pieces + ms.npieces, [](const Residency &a, const Residency &b) { return a.lo < b.lo; });
}

// Meter::init's lookup of those vectors: the one that holds [lo, hi), from lo's page.
const uint8_t *taken_vector(uint64_t lo, uint64_t hi, void *ctx) {
  const auto &ms = *static_cast<const MemoryState *>(ctx);
  const Residency *r = residency_of(ms, lo, hi);
  return r && r->vec ? r->vec + (lo - r->lo) / ms.m.page : nullptr;
}

}  // namespace

void memory_begin(Child &c, uint64_t arena_lo, uint64_t arena_hi) {
  auto *ms = static_cast<MemoryState *>(heap::alloc_zeroed(sizeof(MemoryState)));
  if (!ms) return;
  c.memory = new (ms) MemoryState();
  if (config.test_child_handshake[0]) test_handshake();
  ms->t0 = ms->lap_at = mono_ns();
  ms->n = -1;
  // The child's own figures first: the fork's page tables of the program's anonymous memory (see
  // smaps.h, merge_fork_image), before the child reads anything: by PAGEMAP_SCAN (image_scan.h),
  // else from its /proc/self/smaps. Then the program's figures, beside the enumeration (read_program).
  memory::g_scan_hooks = {config.test_no_pagemap_scan, config.test_refuse_scan_guard};
  const size_t own_cap = size_t(c.nmaps) + 2;
  ms->own = static_cast<memory::SmapsEntry *>(heap::alloc(own_cap * sizeof(memory::SmapsEntry)));
  auto *regions = static_cast<memory::PageRegion *>(heap::alloc(memory::kScanRegions * sizeof(memory::PageRegion)));
  ms->m.set_page();
  ms->pieces = static_cast<Residency *>(heap::alloc((size_t(c.nmaps) * 2 + 1) * sizeof(Residency)));
  const memory::ResidencySink sink = {scanned_vector, ms, ms->m.page_shift};
  ms->n_own = ms->own && regions ? memory::scan_image(c.maps, c.nmaps, arena_lo, arena_hi, ms->own, own_cap, regions, &sink) : -1;
  ms->own_scanned = ms->n_own >= 0;
  if (!ms->own_scanned) {
    ms->own = read_smaps("/proc/self/smaps", &ms->n_own);
    ms->npieces = 0;  // (a scan that failed part of the way: mincore's vectors of every piece)
  }
  ms->lap(MemoryState::kOwnSmaps);
  take_residency(c, *ms, arena_lo, arena_hi);
  ms->lap(MemoryState::kMincore);
  snprintf(ms->program_path, sizeof(ms->program_path), "/proc/%lu/smaps", (unsigned long)c.main_tid);
  snprintf(ms->status_path, sizeof(ms->status_path), "/proc/%lu/status", (unsigned long)c.main_tid);
  snprintf(ms->maps_path, sizeof(ms->maps_path), "/proc/%lu/maps", (unsigned long)c.main_tid);
  snprintf(ms->pagemap_path, sizeof(ms->pagemap_path), "/proc/%lu/pagemap", (unsigned long)c.main_tid);
  // (HEAPSNAP_SNAPSHOT_THREADS=1: the child runs on one thread, this read too.)
  if (threads::wanted() <= 1 || !threads::start(ms->worker, read_program, ms)) read_program(ms);
  ms->ns = mono_ns() - ms->t0;
}

void write_memory(Child &c, const regs::Result &rr, uint64_t arena_lo, uint64_t arena_hi) {
  if (!c.memory) return;
  const uint64_t t0 = mono_ns();
  const char *error = nullptr;
  MemoryState &ms = *c.memory;
  ms.lap_at = t0;
  threads::join(ms.worker);
  ms.lap(MemoryState::kWait);
  if (ms.own && ms.program) {
    if (ms.own_scanned && !ms.program_scanned) memory::take_split(ms.own, ms.n_own, ms.program, ms.n_program);
    const size_t cap = size_t(ms.n_own + ms.n_program + 2);
    ms.entries = static_cast<memory::SmapsEntry *>(heap::alloc(cap * sizeof(memory::SmapsEntry)));
    if (ms.entries)
      ms.n = memory::merge_fork_image(ms.own, ms.n_own, ms.program, ms.n_program, arena_lo, arena_hi, resident_at_begin,
                                      &ms, ms.entries, cap, &ms.changed);
  }
  if (ms.n > 0 && ms.program_scanned) {
    // Without the program's anonymous figures, what changed since the fork is known in sum only:
    // VmRSS, read after the fork, against the fork image's Rss (scan_program found no mapping of
    // the program's with pages the image lacks, so the two count the same mappings).
    uint64_t image = 0;
    for (long i = 0; i < ms.n; ++i) image += ms.entries[i].rss;
    ms.changed = ms.status_rss > image ? ms.status_rss - image : image - ms.status_rss;
  }
  if (ms.n > 0 && !ms.m.init(ms.entries, ms.n, taken_vector, &ms)) ms.n = 0;
  ms.lap(MemoryState::kMerge);
  const long n = ms.n;
  memory::SmapsEntry *entries = ms.entries;
  const uint64_t status_rss = ms.status_rss;
  Meter &m = ms.m;
  if (n <= 0) {
    // No breakdown, but a record that says why (the analyzer must not show zeros for it).
    wire::RecordMark r = wire::begin_record(c.out, wire::kSnapshotMemory);
    c.out.u64(1, c.index);
    c.out.u64(3, status_rss);
    c.out.str(11, n < 0 ? "cannot read /proc/PID/smaps" : "out of memory");
    wire::end_record(c.out, r);
    return;
  }

  // 1. heapsnap's own memory: its tables, buffers and stacks (build_exclusions), its private
  //    heap's segments. (Its library's mappings are file-backed: base_kind knows them.)
  const size_t max_claims = g_nexcluded + size_t(c.nmaps) + 1024 + rr.n + 16;  // (stacks: registry + others)
  auto *cl = static_cast<Claim *>(heap::alloc(max_claims * sizeof(Claim)));
  Claim *taken = static_cast<Claim *>(heap::alloc(sizeof(Claim)));
  size_t nt = 0, k = 0;
  if (!cl || !taken) error = "out of memory";
  for (size_t i = 0; cl && i < g_nexcluded; ++i)
    if (!(g_excluded[i].lo == arena_lo && g_excluded[i].hi == arena_hi)) cl[k++] = {g_excluded[i].lo, g_excluded[i].hi, memory::kHeapsnap};
  for (long i = 0; cl && i < c.nmaps; ++i)
    if (!c.maps[i].path[0] && is_ours(c.maps[i])) cl[k++] = {c.maps[i].start, c.maps[i].end, memory::kHeapsnap};
  if (cl) nt = claim_class(m, cl, k, taken, nt);

  // 2. Thread stacks: the registry's, each the mapping that holds it.
  ThreadStackRange ranges[1024];
  size_t nranges = thread_stacks(ranges, 1024);
  auto *stacks = static_cast<Stack *>(heap::alloc((nranges + 1) * sizeof(Stack)));
  size_t nstacks = 0;
  for (size_t i = 0; stacks && i < nranges; ++i) {
    long e = m.entry_at_or_after(ranges[i].hi - 1);
    if (e < 0 || entries[e].start >= ranges[i].hi || !memory::is_splittable(entries[e])) continue;
    uint64_t lo = ranges[i].lo > entries[e].start ? ranges[i].lo : entries[e].start;
    if (ranges[i].hi - ranges[i].lo <= 1) lo = entries[e].start;  // only a hint: its whole mapping
    uint64_t hi = entries[e].end;
    uint64_t sp = 0;
    for (uint32_t t = 0; t < rr.n; ++t)
      if (rr.threads[t].tid == ranges[i].tid) sp = rr.threads[t].sp;
    if (ranges[i].tid == uint32_t(c.main_tid) && !sp) sp = c.self_sp;  // (the forking thread is not in rr)
    if (!sp && c.self_sp >= lo && c.self_sp < hi) sp = c.self_sp;
    stacks[nstacks++] = {ranges[i].tid, lo, hi, 0, sp >= lo && sp < hi ? hi - sp : 0};
  }
  // Threads the registry does not know (they never allocated): the mapping their stack pointer is in.
  for (uint32_t t = 0; stacks && t < rr.n; ++t) {
    uint64_t sp = rr.threads[t].sp;
    long e = sp ? m.entry_at_or_after(sp) : -1;
    if (e < 0 || entries[e].start > sp || !memory::is_splittable(entries[e])) continue;
    bool known = false;
    for (size_t i = 0; i < nstacks && !known; ++i) known = stacks[i].tid == rr.threads[t].tid || (sp >= stacks[i].lo && sp < stacks[i].hi);
    if (known) continue;
    auto *more = static_cast<Stack *>(heap::grow(stacks, (nstacks + 1) * sizeof(Stack)));
    if (!more) break;
    stacks = more;
    stacks[nstacks++] = {rr.threads[t].tid, entries[e].start, entries[e].end, 0, entries[e].end - sp};
  }
  k = 0;
  for (size_t i = 0; cl && i < nstacks && k < max_claims; ++i) cl[k++] = {stacks[i].lo, stacks[i].hi, memory::kThreadStacks};
  if (cl) nt = claim_class(m, cl, k, taken, nt);

  // 3. The arenas, chunk by chunk.
  constexpr uint32_t kMaxArenas = 1024;
  constexpr size_t kMaxHeaps = 1 << 16;
  auto *arenas = static_cast<ArenaFigures *>(heap::alloc(kMaxArenas * sizeof(ArenaFigures)));
  auto *walked = static_cast<Range *>(heap::alloc(kMaxHeaps * sizeof(Range)));
  size_t nwalked = 0;
  ms.lap(MemoryState::kClaims);
  uint32_t narenas = arenas && walked ? walk_arenas(c, m, arenas, kMaxArenas, walked, &nwalked, kMaxHeaps) : 0;
  ms.lap(MemoryState::kArenas);

  // 4. glibc's mmapped chunks (IS_MMAPPED): the chunk's mapping, from prev_size (its offset) on.
  //    Only blocks outside the heaps walked can be (their headers are not read again).
  uint64_t mmapped = 0, mmapped_live = 0;
  if (usable::g_glibc_layout) {
    auto *mc = static_cast<Claim *>(heap::alloc((size_t(c.n) + 1) * sizeof(Claim)));
    size_t nm = 0, w = 0;
    for (uint32_t b = 0; mc && b < c.n; ++b) {
      while (w < nwalked && walked[w].hi <= c.addr[b]) ++w;
      if (w < nwalked && walked[w].lo <= c.addr[b]) {  // skip to the heap's end
        b = uint32_t(std::lower_bound(c.addr + b, c.addr + c.n, walked[w].hi) - c.addr) - 1;
        continue;
      }
      // (The header's first word may lie before the block's mapping for a torn candidate.)
      if (mapping_of(c, c.addr[b] - 16) < 0) continue;
      const uint64_t *h = reinterpret_cast<const uint64_t *>(c.addr[b]) - 2;
      if (!(h[1] & 2)) continue;
      uint64_t chunk = c.addr[b] - 16, size = h[1] & ~uint64_t(7), off = h[0];
      if (off > chunk || off >= (uint64_t(1) << 32)) off = 0;
      mc[nm++] = {chunk - off, chunk + size, memory::kMmappedChunks};
      ++mmapped;
      mmapped_live += c.size[b];
    }
    if (mc) nt = claim_class(m, mc, nm, taken, nt);
  }

  ms.lap(MemoryState::kMmapped);

  // 5. Modules' .bss (an anonymous mapping right after a module's data, as far as its program
  //    headers reach): the module's data; heapsnap's own library's is heapsnap's.
  k = 0;
  for (long i = 0; cl && i < n && k < max_claims; ++i) {
    if (entries[i].path[0] || entries[i].shared) continue;
    long mi = mapping_of(c, entries[i].start);
    if (mi < 0 || c.maps[mi].start != entries[i].start) continue;
    uint64_t data_end;
    const char *module = module_of(c, mi, &data_end);
    if (!module) continue;
    bool ours = strstr(module, "libheapsnap_preload") || strstr(module, "libmimalloc");
    uint64_t hi = data_end < entries[i].end ? data_end : entries[i].end;
    if (hi > entries[i].start) cl[k++] = {entries[i].start, hi, ours ? memory::kHeapsnap : memory::kModuleData};
  }
  if (cl) nt = claim_class(m, cl, k, taken, nt);

  // Stacks' resident bytes, as claimed (a stack's mapping is its own: smaps' Rss, or counted).
  for (size_t i = 0; i < nstacks; ++i) stacks[i].rss = m.resident(stacks[i].lo, stacks[i].hi);

  // Each mapping's Rss by kind.
  uint64_t rss[kKinds] = {}, size[kKinds] = {}, swap[kKinds] = {}, anon[kKinds] = {}, shared[kKinds] = {};
  uint32_t maps_of[kKinds] = {};
  uint64_t total = 0;
  for (long i = 0; i < n; ++i) {
    const memory::SmapsEntry &e = entries[i];
    Kind rest = memory::base_kind(entries, n, i);
    uint64_t part[kKinds];
    memory::distribute(e.rss, m.res[i], rest, part);
    uint64_t claimed_virt = 0;
    for (int q = 0; q < kKinds; ++q) claimed_virt += m.virt[i][q];
    total += e.rss;
    if (config.debug && m.vec[i]) {  // mincore's count vs the Rss taken (zero pages make them differ)
      uint64_t mine = m.resident(e.start, e.end);
      if (mine > e.rss + 65536 || e.rss > mine + 65536) {
        char msg[256];
        int len = snprintf(msg, sizeof(msg), "heapsnap: memory: %lx-%lx %s: Rss %lu, resident in the child %lu\n",
                           (unsigned long)e.start, (unsigned long)e.end, e.path, (unsigned long)e.rss, (unsigned long)mine);
        (void)!write(2, msg, size_t(len) < sizeof(msg) ? size_t(len) : sizeof(msg) - 1);
        for (int q = 0; q < kKinds; ++q)
          if (m.virt[i][q]) {
            len = snprintf(msg, sizeof(msg), "    %s: %lu of %lu\n", memory::kind_name(Kind(q)), (unsigned long)m.res[i][q], (unsigned long)m.virt[i][q]);
            (void)!write(2, msg, size_t(len) < sizeof(msg) ? size_t(len) : sizeof(msg) - 1);
          }
      }
    }
    for (int q = 0; q < kKinds; ++q) {
      uint64_t v = m.virt[i][q] + (q == rest && e.end - e.start > claimed_virt ? e.end - e.start - claimed_virt : 0);
      if (!v && !part[q]) continue;
      rss[q] += part[q];
      size[q] += v;
      ++maps_of[q];
      // Swap, anonymous and shared bytes follow the Rss split (all to `rest` when none is resident).
      auto share = [&](uint64_t x) -> uint64_t {
        if (!e.rss) return q == rest ? x : 0;
        return uint64_t((unsigned __int128)x * part[q] / e.rss);
      };
      swap[q] += share(e.swap);
      anon[q] += share(e.anonymous);
      shared[q] += share(e.shared_bytes);
    }
  }

  ms.lap(MemoryState::kTally);
  if (config.debug) {
    static const char *const kStep[MemoryState::kSteps] = {"own figures", "program figures (worker)",
                                                           "program figures cpu (worker)", "mincore (others)",
                                                           "wait for the worker", "merge", "claims", "arenas",
                                                           "mmapped chunks", "tally"};
    char msg[768];
    size_t len = size_t(snprintf(msg, sizeof(msg), "heapsnap: memory breakdown, ms:"));
    for (int q = 0; q < MemoryState::kSteps && len < sizeof(msg); ++q)
      len += size_t(snprintf(msg + len, sizeof(msg) - len, " %s %.1f", kStep[q], double(ms.step_ns[q]) / 1e6));
    if (len < sizeof(msg))
      len += size_t(snprintf(msg + len, sizeof(msg) - len, "; own figures from %s, the program's from %s%s\n",
                             ms.own_scanned ? "pagemap" : "smaps", ms.program_source,
                             ms.own_scanned && !memory::scan_takes_guard() ? " (PAGE_IS_GUARD refused: scans without it)" : ""));
    (void)!write(2, msg, len < sizeof(msg) ? len : sizeof(msg) - 1);
  }

  wire::RecordMark r = wire::begin_record(c.out, wire::kSnapshotMemory);
  c.out.u64(1, c.index);
  c.out.u64(2, total);
  c.out.u64(3, status_rss);
  for (int q = 0; q < kKinds; ++q) {
    if (!maps_of[q]) continue;
    size_t at = c.out.open(4);
    c.out.u64(1, uint64_t(q) + 1);  // MemoryKind: 0 is "unknown"
    c.out.u64(2, rss[q]);
    c.out.u64(3, size[q]);
    c.out.u64(4, swap[q]);
    c.out.u64(5, anon[q]);
    c.out.u64(6, shared[q]);
    c.out.u64(7, maps_of[q]);
    c.out.close(at);
  }
  for (uint32_t i = 0; i < narenas; ++i) write_arena(c.out, arenas[i]);
  for (size_t i = 0; i < nstacks; ++i) {
    size_t at = c.out.open(6);
    c.out.u64(1, stacks[i].tid);
    c.out.u64(2, stacks[i].lo);
    c.out.u64(3, stacks[i].hi - stacks[i].lo);
    c.out.u64(4, stacks[i].rss);
    c.out.u64(5, stacks[i].used);
    c.out.close(at);
  }
  c.out.u64(7, rr.n + 1);
  c.out.u64(8, uint64_t(n));
  c.out.u64(9, ms.changed);
  c.out.u64(10, ms.ns + (mono_ns() - t0));
  c.out.str(11, error);
  c.out.u64(12, mmapped);
  c.out.u64(13, mmapped_live);
  c.out.u64(14, m.page);
  wire::end_record(c.out, r);
  flush_frame(c, false);
}

}  // namespace hs::snapshot::child
