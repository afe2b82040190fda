// The capture's call stacks, rebuilt from Stack records (see proto/heapsnap.proto): a tree of
// frames rooted at the outermost caller, a stack named by its leaf node. Struct-of-arrays, one
// parent and one address per node; walking up is bounded because a parent's id is always smaller.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "heapsnap.pb.h"

namespace heapsnap::capture {

class StackTree {
 public:
  StackTree() : parent_(1, 0), addr_(1, 0) {}  // node 0: the root

  // Adds the nodes a Stack record introduces. Returns false (and says why) if the record does
  // not fit the tree built so far: then it is ignored.
  bool add(const wire::Stack &s, std::string *error);

  bool valid(uint32_t id) const { return id != 0 && id < parent_.size(); }
  uint32_t parent(uint32_t id) const { return parent_[id]; }
  uint64_t address(uint32_t id) const { return addr_[id]; }
  size_t nodes() const { return parent_.size() - 1; }
  uint64_t stacks() const { return stacks_; }

  // Frames of stack `id`, leaf first. An address of 0 (outermost) marks a stack cut at the
  // recording's maximum depth.
  void frames(uint32_t id, std::vector<uint64_t> *out) const {
    out->clear();
    if (!valid(id)) return;
    for (uint32_t n = id; n != 0; n = parent_[n]) out->push_back(addr_[n]);
  }

  size_t memory_bytes() const { return parent_.capacity() * 4 + addr_.capacity() * 8; }

 private:
  std::vector<uint32_t> parent_;
  std::vector<uint64_t> addr_;
  uint64_t stacks_ = 0;
};

inline bool StackTree::add(const wire::Stack &s, std::string *error) {
  ++stacks_;
  size_t count = size_t(s.frame_delta_size());
  if (count == 0) return true;  // an existing node became a stack of its own
  if (s.first_node() != parent_.size() || s.parent() >= parent_.size() ||
      uint64_t(s.first_node()) + count - 1 != s.id()) {
    *error = "stack " + std::to_string(s.id()) + ": nodes " + std::to_string(s.first_node()) +
             ".." + std::to_string(uint64_t(s.first_node()) + count - 1) + " under parent " +
             std::to_string(s.parent()) + " do not follow the " + std::to_string(nodes()) +
             " nodes read so far";
    return false;
  }
  uint64_t prev = addr_[s.parent()];
  uint32_t parent = s.parent();
  for (size_t i = 0; i < count; ++i) {
    prev += uint64_t(s.frame_delta(int(i)));
    addr_.push_back(prev);
    parent_.push_back(parent);
    parent = uint32_t(parent_.size() - 1);
  }
  return true;
}

}  // namespace heapsnap::capture
