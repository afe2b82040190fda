// Hand-built replay results for the exporters' and the report's unit tests: stack-tree chains
// added as one Stack record would add them, and per-stack figures set directly.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "replay/replay.h"

namespace heapsnap::testing {

// Appends a chain of new nodes under `parent` (their addresses outermost first) as one Stack
// record would; returns the leaf id.
inline uint32_t add_chain(replay::ReplayResult &r, uint32_t parent, const std::vector<uint64_t> &addrs) {
  wire::Stack s;
  uint32_t first = uint32_t(r.stacks.nodes() + 1);
  s.set_parent(parent);
  s.set_first_node(first);
  s.set_id(first + uint32_t(addrs.size()) - 1);
  uint64_t prev = r.stacks.address(parent);
  for (uint64_t a : addrs) {
    s.add_frame_delta(int64_t(a - prev));
    prev = a;
  }
  std::string err;
  REQUIRE_MESSAGE(r.stacks.add(s, &err), err);
  return s.id();
}

// The figures of one stack-tree node, as one sample would have produced them.
inline void set_figures(replay::ReplayResult &r, uint32_t node, double calls, double bytes, double live_calls,
                        double live_bytes) {
  if (r.by_stack.size() <= node) r.by_stack.resize(node + 1);
  auto &f = r.by_stack[node];
  f.alloc_calls = calls;
  f.alloc_bytes = bytes;
  f.live_calls = live_calls;
  f.live_bytes = live_bytes;
  f.samples = 1;
}

}  // namespace heapsnap::testing
