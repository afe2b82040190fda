#include "tables/info_shadow.h"

#include <sys/mman.h>

#include <cstdlib>

#include "core/own_mappings.h"

namespace hs::info {

constinit WordMap words;
bool enabled = false;

namespace {
bool g_hugepages = true;
constexpr size_t kHuge = size_t(2) << 20;
constexpr size_t kMaxStretches = (size_t(1) << (shadow::kRegionShift - 4)) * 8 / kHuge;  // 16-byte units
// Per leaf, a bit per 2 MiB stretch already advised (written by the writer thread only).
uint64_t *g_advised[shadow::kTopEntries];
unsigned char g_vec[kMaxStretches * (kHuge / 4096)];
}  // namespace

void init(bool glibc_layout) {
  words.set_unit_shift(block_unit_shift(glibc_layout));
  const char *h = getenv("HEAPSNAP_SNAPSHOT_HUGEPAGES");
  g_hugepages = !(h && h[0] == '0');
}

void advise_hugepages() {
  if (!g_hugepages) return;
  const size_t leaf_bytes = words.leaf_bytes(), stretches = leaf_bytes / kHuge, pages = kHuge / 4096;
  for (size_t t = 0; t < shadow::kTopEntries; ++t) {
    uint64_t *leaf = words.leaf(t);
    if (!leaf) continue;
    // Leaves are 2 MiB-aligned in practice (the kernel aligns big anonymous mappings); a stretch
    // is counted from the leaf's start either way.
    const uint64_t base = reinterpret_cast<uint64_t>(leaf);
    if (!g_advised[t]) {
      g_advised[t] = static_cast<uint64_t *>(mmap(nullptr, (kMaxStretches + 63) / 64 * 8, PROT_READ | PROT_WRITE,
                                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      if (g_advised[t] == MAP_FAILED) {
        g_advised[t] = nullptr;
        continue;
      }
      own_mappings::note(g_advised[t], (kMaxStretches + 63) / 64 * 8);
    }
    uint64_t *adv = g_advised[t];
    size_t done = 0;
    for (size_t w = 0; w < (stretches + 63) / 64; ++w) done += size_t(__builtin_popcountll(adv[w]));
    if (done == stretches) continue;  // a heap's leaf is all advised once it has one dense stretch
    if (mincore(leaf, leaf_bytes, g_vec) != 0) continue;
    bool extend = false;  // the stretch below is dense: this one, untouched, is its growth
    for (size_t k = 0; k < stretches; ++k) {
      size_t resident = 0;
      for (size_t p = k * pages; p < (k + 1) * pages; ++p) resident += g_vec[p] & 1;
      bool dense = resident >= pages / 2;
      bool advise = dense || (extend && resident == 0);
      extend = advise;
      if (!advise || (adv[k / 64] >> (k % 64) & 1)) continue;
      // From here to the last stretch to advise in one call (fewer mapping splits).
      size_t end = k + 1;
      bool ext = true;
      while (end < stretches) {
        size_t r = 0;
        for (size_t p = end * pages; p < (end + 1) * pages; ++p) r += g_vec[p] & 1;
        bool d = r >= pages / 2;
        if (!(d || (ext && r == 0)) || (adv[end / 64] >> (end % 64) & 1)) break;
        ext = true;
        ++end;
      }
      if (madvise(reinterpret_cast<void *>(base + k * kHuge), (end - k) * kHuge, MADV_HUGEPAGE) == 0)
        for (size_t i = k; i < end; ++i) adv[i / 64] |= uint64_t(1) << (i % 64);
      k = end - 1;
      extend = true;
    }
  }
}

}  // namespace hs::info
