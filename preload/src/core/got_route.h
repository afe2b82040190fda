// Routes the mmap and munmap calls of the libraries the tracer brings into the program (mimalloc,
// its private heap; libunwind, whose memory pools are mmapped) through own_mappings.h, so that
// their mappings are known as the tracer's. Their global offset table entries for those symbols
// are pointed at own_mappings' versions (heaptrack patches GOT entries in the same way); every
// other object, the program's first, keeps calling libc's directly.
#pragma once

namespace hs::got_route {

// Patches every loaded object whose file name contains one of the names (a null-terminated list).
// Returns the entries patched. Call once the libraries are loaded, before they map memory of
// their own that should count (what they mapped before is not known).
int route_mmaps(const char *const *names);

}  // namespace hs::got_route
