#include "replay/root_frames.h"

namespace heapsnap::replay {

const DisplayFrame *stack_root_frame(StackSymbolizer &sym, const snapshot::RootRange &rr, size_t i) {
  if (i >= rr.frame_pc.size()) return nullptr;
  // A return address is the instruction after the call: pc itself is inside the caller's frame.
  // Frame 0's pc is where the thread stopped, exact: pc + 1 looks it up as a return address would.
  const auto &chain = sym.frames_of(i == 0 ? rr.frame_pc[0] + 1 : rr.frame_pc[i]);
  return chain.empty() ? nullptr : &chain.back();
}

}  // namespace heapsnap::replay
