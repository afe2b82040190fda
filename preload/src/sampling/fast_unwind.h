// The shim's own stack walker for sampled allocations, in front of libunwind.
//
// Why: in every-allocation mode unwinding was the largest part of the tracer's cost (libunwind
// 29% of a traced python run, 22% of sqlite3's), and consecutive samples of a thread share most
// of their stack: 83% of the frames of python's samples and 62% of sqlite3's are those of the
// thread's previous sample (measured on their captures). libunwind walks every frame each time.
//
// How: each frame is stepped with the rule .eh_frame gives for its address (frame_rules.h,
// cached per thread by address). The thread remembers its last walks (16 when sampling densely):
// every frame's state (pc, stack pointer, rbp) and what the walk read from the stack. When a new
// walk reaches a frame in the same state as a frame of a remembered walk, and every stack word
// that walk read from there on (return addresses, saved rbp) still holds what it read, the rest
// of the walk is the remembered one's: stepping is a function of the frame's state, the stack's
// contents and the rules of the code, and none of them changed. So the result is exactly the
// full walk's, and the frames above the join cost one or two loads each instead of a step.
//
// Safety: every stack read is bounded by the thread's stack [lo, hi); a frame outside it, a
// rule the walker does not take (frame_rules.h), or a stack deeper than kFrames ends the attempt
// and the caller uses libunwind. Code unloaded by dlclose may leave stale rules: code_changed()
// (called when the module list loses a library) drops every thread's cache.
#pragma once
#include <cstdint>

namespace hs::fast_unwind {

struct Cache;  // one per thread, in the private heap (about 12 KiB, and 8.5 KiB per remembered walk)

// Why a walk was left to libunwind.
enum Declined : int {
  kOtherStack = -1,  // not on the thread's stack (sigaltstack, a coroutine's)
  kNoRule = -2,      // a frame without a rule the walker takes (frame_rules.h)
  kOutOfStack = -3,  // a rule led outside the stack
  kTooDeep = -4,     // more frames than the cache holds
  kNoMemory = -5,    // the private heap could not hold the cache
};

// Walks the calling thread's stack, leaf first, starting with the first frame outside the shim
// (the program's call of the allocation function).
// Returns the number of frames (*out points at their return addresses, inside *cache, valid
// until the next walk), or a Declined reason (negative): libunwind must do it. Allocates *cache
// on first use. *id (untouched by a declined walk) points at the stack id remembered with the
// walk (0: none yet; the caller stores the id it interns there), or is null: an exact repeat of a remembered walk comes back
// with that walk's id, and needs no hashing or lookup.
int walk(Cache *&cache, uint64_t stack_lo, uint64_t stack_hi, const uintptr_t **out, uint32_t **id);
// The stack table started afresh (a forked child's capture): remembered ids are void.
void forget_ids(Cache *cache);
// The return address of the frame the last kNoRule stopped at (0 if none).
uintptr_t declined_pc(const Cache *cache);

void release(Cache *cache);
void code_changed();
// Dense sampling (every allocation, or close) remembers more walks per thread than sparse.
void set_sampling(uint64_t mean_bytes);

}  // namespace hs::fast_unwind
