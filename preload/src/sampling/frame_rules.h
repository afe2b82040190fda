// How to step from a frame to its caller at a code address, read from the loaded module's
// .eh_frame (the DWARF call-frame information every x86-64 object carries for exceptions), for
// the shim's own stack walker (fast_unwind.h). Only the rules ordinary compiled code uses are
// taken: the frame's CFA (canonical frame address: the caller's stack pointer) is the stack or
// frame pointer plus a constant, the return address is at CFA - 8, and rbp is either untouched or
// saved at CFA + n. Anything else (DWARF expressions, signal frames, a CFA in another register,
// no FDE at all) is refused, and the caller unwinds with libunwind instead.
#pragma once
#include <cstdint>

namespace hs::frame_rules {

enum Base : uint8_t { kCfaFromSp = 0, kCfaFromBp = 1 };
enum Flags : uint8_t {
  kBpSaved = 1,    // rbp is restored from CFA + bp_offset
  kOutermost = 2,  // the return address is undefined: no caller (_start, clone3)
};

struct Rule {
  int32_t cfa_offset;  // CFA = (sp or bp) + cfa_offset
  int16_t bp_offset;   // with kBpSaved
  uint8_t base;        // Base
  uint8_t flags;       // Flags
};
static_assert(sizeof(Rule) == 8, "a rule fits a word");

// The rule in force at pc (an address inside a function: a return address minus one). False if
// the walker cannot follow it. Reads the module's unwind tables in memory (found with
// _dl_find_object), allocates nothing, takes no lock: it runs inside the program's malloc.
bool find(uintptr_t pc, Rule *out);

}  // namespace hs::frame_rules
