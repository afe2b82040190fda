// Field names on retention paths (analyzer/symbolize/type_layouts.h): libstdc++'s nodes and
// buffers by the names BlockTyper gives them, and the program's classes by their DWARF layouts.
#include <doctest/doctest.h>

#include "symbolize/type_layouts.h"

using heapsnap::symbolize::container_field;
using heapsnap::symbolize::TypeLayouts;
using heapsnap::symbolize::TypeMember;

TEST_CASE("type layouts: container nodes and buffers") {
  const std::string map = "std::map<int, std::unique_ptr<Session>> node";
  CHECK(container_field(map, 0) == "color");
  CHECK(container_field(map, 8) == "parent");
  CHECK(container_field(map, 16) == "left");
  CHECK(container_field(map, 24) == "right");
  CHECK(container_field(map, 32) == "key");
  CHECK(container_field(map, 40) == "value");  // int key, 8-aligned unique_ptr after it
  const std::string umap = "std::unordered_map<std::string, std::vector<int>> node";
  CHECK(container_field(umap, 0) == "next");
  CHECK(container_field(umap, 8) == "key");
  CHECK(container_field(umap, 16) == "key (+8)");
  CHECK(container_field(umap, 40) == "value");
  CHECK(container_field(umap, 48) == "value (+8)");
  CHECK(container_field("std::map<Key, Value> node", 48) == "value (+16)");  // key size unknown: from the pair
  CHECK(container_field("std::set<Thing*> node", 32) == "value");
  CHECK(container_field("std::list<Item> node", 8) == "prev");
  CHECK(container_field("std::list<Item> node", 24) == "value (+8)");
  CHECK(container_field("std::vector<Session*> buffer", 24) == "[3]");
  CHECK(container_field("std::vector<std::shared_ptr<Peer>> buffer", 32) == "[2]");
  CHECK(container_field("std::vector<char> buffer", 24) == "");  // element size not in the name
  CHECK(container_field("std::unordered_map<int, int> buckets", 80) == "bucket [10]");
  CHECK(container_field("Session", 8) == "");
}

TEST_CASE("type layouts: the program's classes, nested, inherited, in arrays and make_shared") {
  TypeLayouts t;
  t.add("Inner", 16, {{0, 8, "count", ""}, {8, 8, "next", ""}});
  t.add("Session", 64, {{0, 4, "id", ""}, {8, 32, "user", ""}, {40, 24, "buffer", ""}});
  t.add("Derived", 40, {{0, 16, "", "Inner"}, {16, 16, "inner", "Inner"}, {32, 8, "tail", ""}});
  t.add("Session", 8, {{0, 8, "other", ""}});  // a second definition of a name: the first stays
  CHECK(t.field_at("Session", 0) == "id");
  CHECK(t.field_at("Session", 16) == "user");
  CHECK(t.field_at("Session", 40) == "buffer");
  CHECK(t.field_at("Session", 64) == "");
  CHECK(t.field_at("Derived", 8) == "next");  // the base class's member, unprefixed
  CHECK(t.field_at("Derived", 24) == "inner.next");
  CHECK(t.field_at("Derived", 32) == "tail");
  CHECK(t.field_at("Session array", 64 + 40) == "[1].buffer");
  CHECK(t.field_at("Session (make_shared)", 8) == "control block");
  CHECK(t.field_at("Session (make_shared)", 16 + 40) == "buffer");
  CHECK(t.field_at("Unknown", 8) == "");
  TypeLayouts other;
  other.add("Other", 8, {{0, 8, "p", ""}});
  t.merge(std::move(other));
  CHECK(t.field_at("Other", 0) == "p");
  CHECK(t.size() == 4);
}
