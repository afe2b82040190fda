// The tracer's own anonymous mappings, known as such (issue 32: "heapsnap's own memory" in the RSS
// breakdown). Small mmaps of the tracer's (mimalloc's per-thread data, libunwind's memory pools,
// the tables' side arrays) are otherwise anonymous memory like the program's, and the kernel
// merges them with the program's or the loader's neighbouring mappings, so that no mapping's
// address or size tells them apart. Each is therefore
//   - named "heapsnap" (prctl PR_SET_VMA_ANON_NAME, Linux 5.17 with CONFIG_ANON_VMA_NAME): smaps
//     and pmap show [anon:heapsnap], and the kernel no longer merges it with unnamed neighbours;
//   - and kept in a registry of address ranges, lock-free (a thread may map while another forks a
//     snapshot child), which the snapshot child reads in its copy of the program: it claims their
//     resident pages as heapsnap's and leaves them out of the roots, on kernels without names too.
// The libraries the tracer loads (mimalloc, libunwind) call mmap and munmap themselves: their
// calls are routed through here (got_route.h).
#pragma once
#include <cstddef>
#include <cstdint>

namespace hs::own_mappings {

// The name the tracer's anonymous mappings get (smaps: [anon:heapsnap]).
constexpr char kName[] = "heapsnap";

// [p, p + len) is the tracer's from now on: named, registered. No allocation, no lock, errno kept.
void note(void *p, size_t len);
// [p, p + len) is about to be unmapped: no longer the tracer's (registered ranges are trimmed or
// split to what stays mapped).
void forget(void *p, size_t len);
// Names [p, p + len) only (a mapping the tracer knows by other means: the shadow's leaves, its
// threads' stacks), so that the kernel keeps it apart. Returns false where the kernel cannot.
bool name(void *p, size_t len);

// The registered ranges, for the snapshot child: copies up to cap of them into lo[]/hi[] and
// returns the count. A range being changed by another thread at the fork may be seen as before or
// after the change.
size_t copy(uint64_t *lo, uint64_t *hi, size_t cap);
// Ranges that did not fit in the registry (they stay counted as the program's memory).
uint64_t dropped();

// The libc mmap and munmap, through the registry (got_route.h points the libraries' calls here).
void *mmap_noted(void *addr, size_t len, int prot, int flags, int fd, long off);
int munmap_noted(void *addr, size_t len);

}  // namespace hs::own_mappings
