// glibc's caches of freed chunks told apart in the snapshot child (child_memory.h): the chunks of
// each arena's fastbins and of each thread's tcache. Both keep the chunk marked in use, so the
// arena walk (child_arenas.cc) can only call them "cached"; here their lists are followed from
// their heads, every node checked (inside a walked heap, aligned, of its bin's size) and counted
// only when the whole list checks out, so that a list torn by a thread inside malloc at the fork
// counts as cached rather than guessed. glibc 2.27+ on x86-64:
//   fastbins   malloc_state.fastbinsY[10] at offset 16; bin i holds chunks of 32 + 16 i bytes,
//              linked by fd (chunk + 16)
//   tcache     a tcache_perthread_struct per thread, itself a chunk glibc allocates unseen by the
//              shim (so a cached one): counts[64] (uint16_t from 2.30, char before) then
//              entries[64]; bin i holds chunks of 32 + 16 i bytes, linked through the user memory
//   Safe-linking (2.32+): a stored link is (address of the link >> 12) ^ the pointer.
#include <gnu/libc-version.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "snapshot/child_memory.h"

namespace hs::snapshot::child {
namespace {

struct Glibc {
  int minor = 0;
  bool safe_linking() const { return minor >= 32; }
  bool wide_counts() const { return minor >= 30; }
};

Glibc glibc_version() {
  Glibc g;
  const char *v = gnu_get_libc_version();  // "2.36": a static string, no allocation
  if (v && v[0] == '2' && v[1] == '.') g.minor = atoi(v + 2);
  return g;
}

uint64_t reveal(const Glibc &g, uint64_t link_at, uint64_t stored) { return g.safe_linking() ? (link_at >> 12) ^ stored : stored; }

// The arena whose walked heap holds [lo, hi), or -1.
long arena_of(const HeapOfArena *heaps, size_t n, uint64_t lo, uint64_t hi) {
  const HeapOfArena *it = std::upper_bound(heaps, heaps + n, lo, [](uint64_t v, const HeapOfArena &h) { return v < h.hi; });
  if (it == heaps + n || it->lo > lo || hi > it->hi) return -1;
  return long(it->arena);
}

// A chunk of size `size` at p, inside a walked heap: its arena, else -1.
long chunk_ok(const HeapOfArena *heaps, size_t n, uint64_t p, uint64_t size) {
  if (p & 15) return -1;
  long a = arena_of(heaps, n, p, p + size);
  if (a < 0 || (image_word(p + 8) & ~uint64_t(7)) != size) return -1;
  return a;
}

struct Counted {
  uint64_t chunk, size;
  long arena;
};

}  // namespace

uint64_t tcache_struct_chunk_size() {
  const Glibc g = glibc_version();
  // counts[64] and entries[64], in a chunk with its 16-byte header, rounded to 16.
  const uint64_t bytes = (g.wide_counts() ? 128 : 64) + 64 * 8;
  return (bytes + 8 + 15) & ~uint64_t(15);
}

void count_caches(Meter &m, ArenaFigures *arenas, uint32_t na, HeapOfArena *heaps, size_t nheaps,
                  const uint64_t *tcache_structs, size_t nstructs) {
  if (!na || !nheaps) return;
  const Glibc g = glibc_version();
  std::sort(heaps, heaps + nheaps, [](const HeapOfArena &x, const HeapOfArena &y) { return x.lo < y.lo; });
  // No list can be longer than the arena's cached chunks (a cycle or a torn link stops there).
  uint64_t cached_total = 0;
  for (uint32_t i = 0; i < na; ++i) cached_total += arenas[i].cached_chunks;
  auto *nodes = static_cast<Counted *>(heap::alloc(size_t(cached_total + 1) * sizeof(Counted)));
  if (!nodes) return;

  // Fastbins, arena by arena.
  for (uint32_t ai = 0; ai < na; ++ai) {
    ArenaFigures &a = arenas[ai];
    if (!a.state) continue;
    for (int bin = 0; bin < 10; ++bin) {
      const uint64_t size = 32 + 16 * uint64_t(bin);
      size_t n = 0;
      bool ok = true;
      uint64_t link_at = a.state + 16 + 8 * uint64_t(bin);
      uint64_t p = image_word(link_at);  // (the head is not mangled)
      while (p && ok) {
        long at = n < a.cached_chunks ? chunk_ok(heaps, nheaps, p, size) : -1;
        if (at < 0) {
          ok = false;
          break;
        }
        nodes[n++] = {p, size, at};
        link_at = p + 16;
        p = reveal(g, link_at, image_word(link_at));
      }
      if (!ok) continue;  // (left as cached)
      for (size_t k = 0; k < n; ++k) {
        ArenaFigures &owner = arenas[nodes[k].arena];
        owner.fastbin_bytes += size;
        owner.fastbin_rss += m.resident(nodes[k].chunk, nodes[k].chunk + size);
        ++owner.fastbin_chunks;
      }
    }
  }

  // Each tcache: a candidate struct counts when every bin's list is exactly as long as its count.
  const uint64_t counts_bytes = g.wide_counts() ? 128 : 64, struct_size = tcache_struct_chunk_size();
  for (size_t s = 0; s < nstructs; ++s) {
    const uint64_t mem = tcache_structs[s] + 16;
    size_t n = 0;
    bool ok = true;
    for (int bin = 0; bin < 64 && ok; ++bin) {
      const uint64_t count = g.wide_counts() ? reinterpret_cast<const uint16_t *>(mem)[bin] : reinterpret_cast<const uint8_t *>(mem)[bin];
      const uint64_t size = 32 + 16 * uint64_t(bin);
      uint64_t e = image_word(mem + counts_bytes + 8 * uint64_t(bin));  // (the heads are not mangled)
      for (uint64_t k = 0; k < count && ok; ++k) {
        long at = e > 16 && n < cached_total ? chunk_ok(heaps, nheaps, e - 16, size) : -1;
        if (at < 0) {
          ok = false;
          break;
        }
        nodes[n++] = {e - 16, size, at};
        e = reveal(g, e, image_word(e));
      }
      ok = ok && e == 0;  // the list ends where its count does
    }
    if (!ok) continue;
    long own = arena_of(heaps, nheaps, tcache_structs[s], tcache_structs[s] + struct_size);
    if (own >= 0) nodes[n++] = {tcache_structs[s], struct_size, own};  // the struct itself
    for (size_t k = 0; k < n; ++k) {
      ArenaFigures &owner = arenas[nodes[k].arena];
      owner.tcache_bytes += nodes[k].size;
      owner.tcache_rss += m.resident(nodes[k].chunk, nodes[k].chunk + nodes[k].size);
      ++owner.tcache_chunks;
    }
  }
  // A list may run on past a heap's walked part (a chunk torn by a thread inside malloc at the
  // fork stops the walk, and chunk_ok knows the heap, not how far the walk got): an arena whose
  // lists add up to more than its cached chunks keeps them all as cached, not told apart, rather
  // than figures the analyzer must refuse.
  for (uint32_t ai = 0; ai < na; ++ai) {
    ArenaFigures &a = arenas[ai];
    if (a.fastbin_bytes + a.tcache_bytes > a.bytes[kCached] || a.fastbin_chunks + a.tcache_chunks > a.cached_chunks ||
        a.fastbin_rss + a.tcache_rss > a.rss[kCached])
      a.fastbin_bytes = a.fastbin_rss = a.fastbin_chunks = a.tcache_bytes = a.tcache_rss = a.tcache_chunks = 0;
  }
}

uint64_t find_main_state(Child &c, uint64_t top) {
  // main_arena is in libc's data; a lone arena's ring is itself (malloc_state.next), and its top
  // is the brk heap's top chunk: both checked, the pair is found nowhere else.
  constexpr uint64_t kTop = 96, kNext = 2160, kState = 2200;
  if (!top) return 0;
  for (long i = 0; i < c.nmaps; ++i) {
    const Mapping &mp = c.maps[i];
    if (!mp.readable || !mp.writable || !strstr(mp.path, "libc.so")) continue;
    // The data segment, and the anonymous .bss right after it.
    uint64_t end = mp.end;
    if (i + 1 < c.nmaps && c.maps[i + 1].start == end && !c.maps[i + 1].path[0] && c.maps[i + 1].readable && c.maps[i + 1].writable)
      end = c.maps[i + 1].end;
    for (uint64_t at = mp.start; at + kState <= end; at += 8) {
      if (image_word(at + kTop) != top) continue;
      uint64_t next = image_word(at + kNext);
      if (next == at) return at;
    }
  }
  return 0;
}

}  // namespace hs::snapshot::child
