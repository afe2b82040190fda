// Live sampled blocks: address -> sample id, so that a free (or realloc) names the block it ends
// by its id instead of by address. Addresses are reused by the allocator and are nearly random
// to a compressor; ids of short-lived blocks are close to the thread's latest id, so frees encode
// as small repeating numbers (the capture of a Python run shrinks several-fold).
//
// Striped open-addressing tables (linear probing, backward-shift deletion): a free from another
// thread contends only on one of 64 stripes. Keys are stored disguised (see common.h).
#pragma once
#include <cstdint>

namespace hs::sampled_blocks {

struct Name {
  uint64_t id;     // sample id
  uint32_t stack;  // allocation stack
};
bool insert(const void *p, Name n);             // false if out of memory (block stays unnamed)
void prefetch(const void *p);                    // hint: insert(p) or take(p) comes soon
bool take(const void *p, Name *n);              // removes; false if p is not a sampled block
bool peek(const void *p, Name *n);              // lock-free read (snapshot child only)
void lock_all();                                 // fork: the child must not inherit a torn stripe
void unlock_all();
void after_fork_child();

}  // namespace hs::sampled_blocks
