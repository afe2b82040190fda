// The field that holds a pointer, by its owner's type: a retention path says "field +40 (buffer)",
// not only "+40". Two sources:
//  - the member layouts of the classes a program defines, from DWARF (data_symbols.cc collects
//    them while it reads the variables): the program's classes and class templates' instances
//    (not the standard library's), looked up by the qualified, readable names BlockTyper gives
//    the program's own types ("Holder<std::string>": readable_name.h) (from a vtable,
//    the allocation's frames or the type of the variable that holds the block);
//  - libstdc++'s container nodes and buffers, by the names BlockTyper gives them ("std::map<K, V>
//    node", "std::vector<T> buffer"): their layouts are the library's, fixed (container_field).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace heapsnap::symbolize {

struct TypeMember {
  uint64_t offset = 0, size = 0;
  std::string name;  // "" for a base class (its members are the class's own, unprefixed)
  std::string type;  // a class whose fields name the bytes below (nested), or ""
};

class TypeLayouts {
 public:
  // The first layout of a name wins (each unit of a program repeats its headers' classes).
  bool has(const std::string &name) const { return by_name_.count(name) != 0; }
  void add(const std::string &name, uint64_t size, std::vector<TypeMember> members);
  void merge(TypeLayouts &&other);
  size_t size() const { return by_name_.size(); }
  size_t memory_bytes() const;

  // The field at `offset` of an object of `type` (a BlockTyper name): "user", "inner.count",
  // "value (+8)", "[3]"; "" when not known.
  std::string field_at(const std::string &type, uint64_t offset) const;

 private:
  struct Layout {
    uint64_t size = 0;
    std::vector<TypeMember> members;  // by offset
  };
  std::string member_at(const std::string &type, uint64_t offset, int depth) const;
  std::unordered_map<std::string, Layout> by_name_;
};

// The field of one of libstdc++'s container nodes or buffers at `offset`, by the name BlockTyper
// gives it; "" for other names.
std::string container_field(const std::string &type, uint64_t offset);

}  // namespace heapsnap::symbolize
