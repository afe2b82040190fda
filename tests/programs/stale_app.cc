// Stale words with a known truth (issue 29, must-have 4; tests/integration/stale_cases.py): words
// that still hold heap addresses although the program no longer uses them, and what a
// conservative scan makes of them. Each part prints its truth ("key value" lines), and the heap is
// snapshotted at _exit, as main left it.
//
// (1) Spare capacity: `g_vec`, a std::vector<Node *> that held 1,000 nodes, resized to 10: the
//     990 pointers past end() stay in its buffer. Those 990 nodes are owned by `g_list`, a
//     std::list<Node *>. Truth: g_vec holds its buffer and 10 nodes, g_list its 990 list nodes
//     and the 990 nodes.
// (2) Dead stack: fill_dead() fills a local array with pointers to 512 "kept" blocks (then held by
//     the global g_kept alone) and 512 "lost" blocks (then held by nothing), 64 KiB below main's
//     frame, and returns. Truth: the lost blocks are unreachable, the kept ones g_kept's alone.
// (3) Freed and reused memory: 100 blocks of 64 bytes, each with a pointer to a "target" block at
//     offset 24, are freed; 100 new blocks of 64 bytes (malloc hands the same chunks back, their
//     bytes unchanged past glibc's 16-byte tcache links) are held by g_reused and never written.
//     Truth: the targets are lost; the program counts how many stale words survived reuse. And 100
//     blocks freed for good (no reuse: a size nothing asks for again) that held the only pointers
//     to 100 "orphan" blocks: the orphans are lost.
//
// Built -g -O1.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <vector>

struct Node {
  long payload[6];  // 48 bytes
};

std::vector<Node *> g_vec;
std::list<Node *> g_list;
void *g_kept[512];
void *g_reused[100];

constexpr int kVec = 1000, kKeep = 10;
constexpr size_t kKeptSize = 72, kLostSize = 88, kReuseSize = 64, kTargetSize = 104;
constexpr size_t kFreedSize = 1512, kOrphanSize = 120;

__attribute__((noinline)) void spare_capacity() {
  g_vec.reserve(kVec);
  for (int i = 0; i < kVec; i++) g_vec.push_back(new Node{});
  for (int i = kKeep; i < kVec; i++) g_list.push_back(g_vec[i]);
  g_vec.resize(kKeep);  // 990 stale pointers in [end, end of storage)
}

// The array sits in this frame; the caller's padding puts it well below main's frame, where the
// exit snapshot's own frames do not reach.
__attribute__((noinline)) void fill_dead() {
  volatile uintptr_t words[1024];
  for (int i = 0; i < 512; i++) {
    words[i] = uintptr_t(malloc(kKeptSize));
    g_kept[i] = reinterpret_cast<void *>(words[i]);
  }
  for (int i = 512; i < 1024; i++) words[i] = uintptr_t(malloc(kLostSize));
  // The lost blocks' only pointers are now in this dead frame.
}

__attribute__((noinline)) void deep_dead() {
  volatile char pad[65536];
  pad[0] = 1;
  fill_dead();
  pad[1] = pad[0];
}

// Makes the compiler treat p's memory as used: without it, GCC drops a malloc whose block is only
// written and freed (and then the orphan, whose pointer only went there).
static inline void escape(void *p) { asm volatile("" : : "r"(p) : "memory"); }

// Returns how many of the reused blocks still hold their predecessor's pointer at offset 24.
__attribute__((noinline)) int freed_and_reused() {
  void *old[100], *targets[100];
  for (int i = 0; i < 100; i++) {
    old[i] = malloc(kReuseSize);
    memset(old[i], 0, kReuseSize);
    void *target = targets[i] = malloc(kTargetSize);
    memcpy(static_cast<char *>(old[i]) + 24, &target, sizeof(target));
    escape(old[i]);
  }
  for (int i = 99; i >= 0; i--) free(old[i]);
  // tcache holds 7 chunks of a size, the rest go to fastbins: both hand them back, last in first out.
  int stale = 0;
  for (int i = 0; i < 100; i++) {
    g_reused[i] = malloc(kReuseSize);
    // Never written: what the freed block left (read through volatile, so nothing assumes a value).
    uintptr_t w = *reinterpret_cast<volatile uintptr_t *>(static_cast<char *>(g_reused[i]) + 24);
    for (int j = 0; j < 100; j++) stale += g_reused[i] == old[j] && w == uintptr_t(targets[j]);
  }
  return stale;
}

__attribute__((noinline)) void freed_for_good() {
  void *holders[100];
  for (int i = 0; i < 100; i++) {
    holders[i] = malloc(kFreedSize);
    void *orphan = malloc(kOrphanSize);
    memcpy(static_cast<char *>(holders[i]) + 24, &orphan, sizeof(orphan));
    escape(holders[i]);
  }
  for (int i = 0; i < 100; i++) free(holders[i]);
}

// main's own dead words (the calls above left addresses in registers spilt to its frame's
// callees): cleared, so that what is measured is the deep array alone.
__attribute__((noinline)) void scrub_stack() {
  volatile char buf[8192];
  std::memset(const_cast<char *>(buf), 0, sizeof(buf));
}

// `stale_app shallow`: fill_dead right below main's frame and nothing scrubbed, to measure what the
// exit snapshot's own frames leave of the dead words (printed by the test, not asserted).
int main(int argc, char **argv) {
  bool shallow = argc > 1 && strcmp(argv[1], "shallow") == 0;
  spare_capacity();
  if (shallow) fill_dead();
  else deep_dead();
  int stale = freed_and_reused();
  freed_for_good();
  if (!shallow) scrub_stack();
  std::printf("vec_truth %zu\nlist_truth %zu\nlist_node %zu\nnode %zu\nvec_nodes %d\nlist_nodes %d\n",
              g_vec.capacity() * sizeof(Node *) + kKeep * sizeof(Node), g_list.size() * (2 * sizeof(void *) + sizeof(Node *)) + g_list.size() * sizeof(Node),
              2 * sizeof(void *) + sizeof(Node *), sizeof(Node), kKeep, int(g_list.size()));
  std::printf("kept %zu\nlost %zu\nreused_stale %d\nreused %zu\ntarget %zu\norphans %zu\n", 512 * kKeptSize,
              512 * kLostSize, stale, 100 * kReuseSize, 100 * kTargetSize, 100 * kOrphanSize);
  std::fflush(stdout);
  _exit(0);
}
