// glibc's arenas walked chunk by chunk in the snapshot child (child_memory.h), for the RSS
// breakdown: per arena, the live blocks' requested bytes, allocator overhead, free chunks, the
// top chunk, and what malloc_trim would give back. glibc 2.27+ on x86-64 (DESIGN.md, "Outside-in
// heap walking"); every structure read is checked, and a heap whose layout does not check out is
// left unwalked (its bytes say so) rather than guessed.
//
// What is told apart and what is not: a chunk is free when the next chunk's PREV_INUSE bit is
// clear (it is in a bin: unsorted, small or large). tcache and fastbin chunks keep the bit set,
// so they look in use: a chunk glibc marks in use that holds no live block of the shim's shadow
// is "cached": in tcache or a fastbin, the tcache's own struct, or a block allocated before
// tracing began. child_caches.cc then follows the fastbins' and tcaches' lists to tell those
// apart within it.
#include <algorithm>

#include "core/private_heap.h"
#include "snapshot/child_memory.h"

namespace hs::snapshot::child {
namespace {

using memory::Kind;

constexpr uint64_t kHeapMax = uint64_t(64) << 20;  // HEAP_MAX_SIZE: thread heaps are aligned to it
// struct malloc_state (glibc 2.27+, x86-64): mutex, flags, have_fastchunks, fastbinsY[10], top,
// last_remainder, bins[254], binmap[4], next, next_free, attached_threads, system_mem, max_system_mem.
constexpr uint64_t kTopOffset = 96, kNextOffset = 2160, kStateBytes = 2200;
constexpr uint64_t kMinSize = 32;           // MINSIZE
constexpr uint64_t kFreeChunkHeader = 48;   // sizeof(struct malloc_chunk): madvise starts after it

Kind kind_of(HeapPart p) {
  static const Kind k[kHeapParts] = {memory::kHeapLive, memory::kHeapOverhead, memory::kHeapFree,
                                     memory::kHeapCached, memory::kHeapTop, memory::kHeapUnwalked};
  return k[p];
}

struct Walk {
  Child &c;
  Meter &m;
  ArenaFigures &a;
  uint64_t tcache_size = 0;           // a tcache_perthread_struct's chunk: cached ones of it are noted
  uint64_t *tcache_structs = nullptr;
  size_t *ntcache = nullptr, tcache_cap = 0;
  uint64_t found_top = 0;             // the top chunk the walk took
  void put(uint64_t lo, uint64_t hi, HeapPart part) {
    if (hi <= lo) return;
    a.bytes[part] += hi - lo;
    a.rss[part] += m.add(lo, hi, kind_of(part));
  }
  // A chunk's pieces, when the whole chunk is resident in one mapping (most are): no page counts.
  void put_resident(long i, uint64_t lo, uint64_t hi, HeapPart part) {
    if (hi <= lo) return;
    a.bytes[part] += hi - lo;
    a.rss[part] += hi - lo;
    m.claim(i, hi - lo, kind_of(part));
  }
  // The run of live chunks that starts at block b (at chunk p), if there is one, taken whole
  // (run moves past it, p to its end): its chunks are as the chunk-by-chunk loop would take them
  // when the run ends inside the heap, holds no top chunk, and lies in one mapping all resident.
  // Then their live and overhead bytes are the run's sums, with the same claims.
  HS_INLINE bool step_over_run(const Child::LiveRun *&run, const Child::LiveRun *runs_end, uint32_t b, uint64_t &p,
                               uint64_t end, uint64_t top) {
    while (run != runs_end && run->first < b) ++run;
    if (run == runs_end || run->first != b) return false;
    const uint32_t lastb = b + run->count - 1;
    const uint64_t run_end = c.addr[lastb] - 16 + c.chunk[lastb];
    if (run_end > end || (top >= p && top < run_end) || (top == 0 && run_end == end)) return false;
    const long i = m.all_resident(p, run_end);
    if (i < 0) return false;
    put_resident(i, p, p + run->live, kLive);
    put_resident(i, p + run->live, run_end, kOverhead);
    a.live_chunks += run->count;
    p = run_end;
    ++run;
    return true;
  }
  // [start, end): one heap; chunks from `first`; top: the arena's top chunk (0: not known, then the
  // chunk that reaches the heap's end is taken for it).
  void heap(uint64_t start, uint64_t first, uint64_t end, uint64_t top) {
    ++a.heaps;
    a.size += end - start;
    put(start, first, kOverhead);  // heap_info, malloc_state
    const uint64_t page = m.page;
    const uint64_t *cur = std::lower_bound(c.addr, c.addr + c.n, first);
    const uint64_t *last = c.addr + c.n;
    uint64_t p = first;
    const uint32_t *chunk = c.chunk;
    // The runs of live chunks (Child::runs) from this heap's first block on.
    const Child::LiveRun *run = c.runs, *runs_end = c.runs + c.nruns;
    if (run && chunk)
      run = std::lower_bound(run, runs_end, uint32_t(cur - c.addr), [](const Child::LiveRun &r, uint32_t b) { return r.first < b; });
    else
      run = runs_end = nullptr;
    while (p + 16 <= end) {
      // A live block's chunk size is the one the enumeration read (Child::chunk): no header is
      // read again for it. Other chunks' headers are: each address follows from the one before
      // (latency-bound), so the chunk after each live block ahead is fetched in advance when it
      // is not the next live block's (a hole: free or cached chunks).
      while (cur != last && *cur < p + 16) ++cur;
      const bool at_block = cur != last && *cur == p + 16;
      if (at_block && run != runs_end && step_over_run(run, runs_end, uint32_t(cur - c.addr), p, end, top)) {
        cur += run[-1].count;
        continue;
      }
      if (last - cur > 17) {
        const size_t k = size_t(cur - c.addr) + 16;
        const uint64_t after = c.addr[k] - 16 + (chunk ? chunk[k] : 0);
        if (!chunk || !chunk[k] || after != c.addr[k + 1] - 16) __builtin_prefetch(reinterpret_cast<const void *>(chunk && chunk[k] ? after + 8 : c.addr[k] - 8));
      }
      uint64_t size = at_block && chunk && chunk[cur - c.addr] ? chunk[cur - c.addr] : image_word(p + 8) & ~uint64_t(7);
      if (size == 0 && end - p <= 32) break;  // the fencepost that ends an old heap
      if (size < 16 || size > end - p || (size & 15)) {
        put(p, end, kUnwalked);  // a torn header (a thread was inside malloc at the fork)
        a.complete = false;
        return;
      }
      if (p == top || (top == 0 && p + size == end)) {
        put(p, p + size, kTop);
        found_top = p;
        if (a.main && size > kMinSize + 1) {
          // systrim(0): what lies past the first MINSIZE, down to a page boundary, goes back.
          uint64_t extra = (size - kMinSize - 1) & ~(page - 1);
          a.trimmable += m.resident(p + size - extra, p + size);
        }
        p += size;
        break;
      }
      if (size == 16) {  // a fencepost
        put(p, p + size, kOverhead);
        p += size;
        continue;
      }
      // (A live block's chunk is in use: its next header is not read for the bit.)
      bool in_use = at_block || (p + size + 16 <= end ? (image_word(p + size + 8) & 1) != 0 : true);
      if (!in_use) {
        put(p, p + size, kFree);
        ++a.free_chunks;
        uint64_t lo = (p + kFreeChunkHeader + page - 1) & ~(page - 1), hi = (p + size) & ~(page - 1);
        if (hi > lo) a.trimmable += m.resident(lo, hi);
      } else {
        if (at_block) {
          uint64_t req = c.size[cur - c.addr];
          uint64_t live_hi = std::min(p + 16 + req, p + size);  // the next chunk's prev_size is usable too
          if (long i = m.all_resident(p, p + size); i >= 0) {
            put_resident(i, p, p + 16, kOverhead);
            put_resident(i, p + 16, live_hi, kLive);
            put_resident(i, live_hi, p + size, kOverhead);
          } else {
            put(p, p + 16, kOverhead);
            put(p + 16, live_hi, kLive);
            put(live_hi, p + size, kOverhead);
          }
          ++a.live_chunks;
        } else {
          put(p, p + size, kCached);
          ++a.cached_chunks;
          if (size == tcache_size && *ntcache < tcache_cap) tcache_structs[(*ntcache)++] = p;
        }
      }
      p += size;
    }
    put(p, end, kOverhead);  // past the top (a brk end not on a page), or an old heap's fenceposts
  }
};

// The end of the readable and writable memory from mapping i on, across mappings without a gap.
uint64_t rw_end(const Child &c, long i) {
  uint64_t end = c.maps[i].end;
  while (i + 1 < c.nmaps && c.maps[i + 1].start == end && c.maps[i + 1].readable && c.maps[i + 1].writable) end = c.maps[++i].end;
  return end;
}

struct ThreadHeap {
  uint64_t start, ar, prev, size;
};

// Whether the chunk at p looks like an arena's first one (PREV_INUSE set, a sane size).
bool first_chunk_ok(uint64_t p, uint64_t end) {
  if (p + 16 > end) return false;
  uint64_t head = image_word(p + 8), size = head & ~uint64_t(7);
  return (head & 1) && size >= kMinSize && size <= end - p && !(size & 15);
}

}  // namespace

uint32_t walk_arenas(Child &c, Meter &m, ArenaFigures *out, uint32_t cap, Range *walked, size_t *nwalked, size_t walked_cap) {
  *nwalked = 0;
  if (!usable::g_glibc_layout || cap == 0) return 0;
  auto *of_arena = static_cast<HeapOfArena *>(heap::alloc(walked_cap * sizeof(HeapOfArena)));
  constexpr size_t kTcacheCap = 1 << 16;  // (threads: each has one)
  auto *tcache_structs = static_cast<uint64_t *>(heap::alloc(kTcacheCap * sizeof(uint64_t)));
  size_t ntcache = 0;
  const uint64_t tcache_size = tcache_struct_chunk_size();
  uint32_t na = 0;
  auto note = [&](uint64_t lo, uint64_t hi) {
    if (*nwalked == walked_cap) return;
    if (of_arena) of_arena[*nwalked] = {lo, hi, na - 1};
    walked[(*nwalked)++] = {lo, hi};
  };
  auto walker = [&](ArenaFigures &a) {
    Walk w{c, m, a};
    if (tcache_structs) w.tcache_size = tcache_size, w.tcache_structs = tcache_structs, w.ntcache = &ntcache, w.tcache_cap = kTcacheCap;
    return w;
  };
  // Thread heaps: anonymous read-write mappings at a 64 MiB boundary that start with a heap_info
  // {ar_ptr, prev, size, mprotect_size, pagesize} whose fields check out.
  auto *heaps = static_cast<ThreadHeap *>(heap::alloc(size_t(c.nmaps + 1) * sizeof(ThreadHeap)));
  if (!heaps) return 0;
  long nh = 0;
  // A heap need not start its mapping: the kernel merges it with an anonymous mapping just below
  // (another heap's full 64 MiB, a stack), so every 64 MiB boundary inside one is looked at.
  size_t room = size_t(c.nmaps + 1);
  for (long i = 0; i < c.nmaps; ++i) {
    const Mapping &mp = c.maps[i];
    if (mp.path[0] || !mp.readable || !mp.writable || is_ours(mp)) continue;
    // (Not the child's own arena, 64 GiB of it: a look at each 64 MiB boundary there faulted in a
    // page a time, about 2 ms in all.)
    if (mp.start >= c.arena_lo && mp.end <= c.arena_hi) continue;
    for (uint64_t at = (mp.start + kHeapMax - 1) & ~(kHeapMax - 1); at + 4096 <= mp.end; at += kHeapMax) {
      if (size_t(nh) == room) {
        auto *more = static_cast<ThreadHeap *>(heap::grow(heaps, room * 2 * sizeof(ThreadHeap)));
        if (!more) break;
        heaps = more;
        room *= 2;
      }
      const uint64_t *h = reinterpret_cast<const uint64_t *>(at);
      uint64_t ar = h[0], prev = h[1], size = h[2], mprot = h[3];
      if (size < 4096 || size > kHeapMax || (size & 4095) || mprot < size || mprot > kHeapMax) continue;
      if (at + size > rw_end(c, i)) continue;
      if (prev == 0 ? (ar != at + 48 && ar != at + 32) : (prev & (kHeapMax - 1)) != 0) continue;
      if (ar & 15) continue;
      heaps[nh++] = {at, ar, prev, size};
    }
  }
  uint64_t main_state = 0;
  // Each thread arena: its first heap holds its malloc_state, right after the heap_info.
  for (long f = 0; f < nh && na + 1 < cap; ++f) {
    if (heaps[f].prev != 0) continue;
    const uint64_t ar = heaps[f].ar, info_bytes = ar - heaps[f].start;
    ArenaFigures &a = out[na++];
    a = ArenaFigures{};
    a.state = ar;
    a.complete = true;
    uint64_t top = image_word(ar + kTopOffset);
    bool top_ok = false;
    for (long k = 0; k < nh; ++k)
      if (heaps[k].ar == ar && top > heaps[k].start && top < heaps[k].start + heaps[k].size)
        top_ok = top + 16 <= heaps[k].start + heaps[k].size &&
                 top + (image_word(top + 8) & ~uint64_t(7)) == heaps[k].start + heaps[k].size;
    if (!top_ok) top = 0;
    Walk w = walker(a);
    for (long k = 0; k < nh; ++k) {
      if (heaps[k].ar != ar) continue;
      uint64_t first = heaps[k].start + info_bytes;
      if (k == f) {
        first = ar + kStateBytes;
        if ((first + 16) & 15) first += 16 - ((first + 16) & 15);
      }
      uint64_t end = heaps[k].start + heaps[k].size;
      note(heaps[k].start, end);
      if (!first_chunk_ok(first, end)) {
        ++a.heaps;
        a.size += end - heaps[k].start;
        w.put(heaps[k].start, end, kUnwalked);
        a.complete = false;
        continue;
      }
      w.heap(heaps[k].start, first, end, top);
    }
    // main_arena is on the arenas' ring (malloc_state.next) and in no heap.
    uint64_t next = image_word(ar + kNextOffset);
    for (int steps = 0; next && !main_state && steps < 1024; ++steps) {
      bool in_heap = false;
      for (long k = 0; k < nh && !in_heap; ++k) in_heap = heaps[k].ar == next;
      if (!in_heap) {
        // (In libc's data, readable through all of the malloc_state, or not main_arena at all.)
        long mi = mapping_of(c, next);
        if (mi < 0 || !c.maps[mi].readable || next + kStateBytes > rw_end(c, mi)) break;
        main_state = next;
        break;
      }
      next = image_word(next + kNextOffset);
    }
  }
  // The main arena: the brk heap (the kernel may show it as several mappings).
  for (long i = 0; i < c.nmaps && na < cap; ++i) {
    if (strcmp(c.maps[i].path, "[heap]") != 0) continue;
    uint64_t start = c.maps[i].start, end = c.maps[i].end;
    while (i + 1 < c.nmaps && c.maps[i + 1].start == end && strcmp(c.maps[i + 1].path, "[heap]") == 0) end = c.maps[++i].end;
    ArenaFigures &a = out[na++];
    a = ArenaFigures{};
    a.main = true;
    a.state = main_state;
    a.complete = true;
    uint64_t first = start;
    if ((first + 16) & 15) first += 16 - ((first + 16) & 15);
    uint64_t top = main_state ? image_word(main_state + kTopOffset) : 0;
    if (top < first || top + 16 > end || top + (image_word(top + 8) & ~uint64_t(7)) > end) top = 0;
    Walk w = walker(a);
    note(start, end);
    if (!first_chunk_ok(first, end)) {
      ++a.heaps;
      a.size += end - start;
      w.put(start, end, kUnwalked);
      a.complete = false;
    } else {
      w.heap(start, first, end, top);
      if (!a.state) a.state = main_state = find_main_state(c, w.found_top);  // (no thread arena: a lone ring)
    }
    break;
  }
  if (of_arena && tcache_structs) count_caches(m, out, na, of_arena, *nwalked, tcache_structs, ntcache);
  std::sort(walked, walked + *nwalked, [](const Range &x, const Range &y) { return x.lo < y.lo; });
  return na;
}

}  // namespace hs::snapshot::child
