// What tracer.cc (start-up and its globals) and private_heap.cc (mimalloc) give the rest of the
// shim, for a test program that links the shim's pieces directly (shim_concurrency_test):
// tracer.cc's constructor would start tracing the test program itself, and interpose.cc is left
// out so that the test program keeps its own malloc.
//
// The private heap is the test program's malloc here. Under ThreadSanitizer, memory that an
// uninstrumented allocator (mimalloc, dlopen'd) hands from one thread to another looks like a
// race; through the sanitizer's malloc it does not, and the code under test is the same.
#include <cstdlib>
#include <cstring>

#include "core/private_heap.h"
#include "core/thread_state.h"
#include "core/tracer.h"

namespace hs {

std::atomic<int> g_state{kUninit};
uint64_t g_start_ns = 0;
int g_pid = 0;
GlobalTotals g_totals;

void stop_tracing(const char *why) {
  int expected = kActive;
  if (!g_state.compare_exchange_strong(expected, kStopped)) return;
  writer_note_failure(why);
}

namespace heap {

bool init() { return true; }
bool ready() { return true; }
void *alloc(size_t n) { return malloc(n); }
void *alloc_zeroed(size_t n) { return calloc(1, n); }
void *grow(void *p, size_t n) { return realloc(p, n); }
void release(void *p) { free(p); }
bool owns(const void *) { return false; }
uint64_t held_bytes() { return 0; }
bool switch_to_child_arena(size_t, uint64_t *, uint64_t *) { return false; }

}  // namespace heap
}  // namespace hs
