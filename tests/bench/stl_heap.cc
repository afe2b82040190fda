// A C++ heap of about N blocks held by globals through the STL, for scripts/bench_types: what types
// and named roots cost the analyzer on a real program's snapshot (issue 29's cost target).
//
//   stl_heap N     builds the structures below (about N blocks in all), then returns from main;
//                  record it with --snapshot-before-destructors to see them alive.
//
// A quarter of the blocks each, every kind of site and type the analyzer names:
//   g_names    std::map<int, std::string>           a node and a string buffer per entry
//   g_index    std::unordered_map<long, std::vector<int>>   a node and a vector buffer per entry,
//                                                    and the bucket array
//   g_shapes   std::vector<std::unique_ptr<Shape>>  polymorphic objects (a vtable in the first word)
//   g_nodes    std::list<std::shared_ptr<Node>>     a list node and a make_shared block per entry
// It prints the blocks it made on stderr (the program's own count, to check the snapshot's).
#include <cstdio>
#include <cstdlib>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

struct Shape {
  virtual ~Shape() = default;
  virtual double area() const = 0;
};
struct Circle : Shape {
  double r;
  explicit Circle(double r) : r(r) {}
  double area() const override { return 3.14159 * r * r; }
};
struct Square : Shape {
  double side;
  long tag[2];
  explicit Square(double s) : side(s), tag{0, 0} {}
  double area() const override { return side * side; }
};
struct Node {
  long id;
  std::weak_ptr<Node> parent;
  explicit Node(long id) : id(id) {}
};

std::map<int, std::string> g_names;
std::unordered_map<long, std::vector<int>> g_index;
std::vector<std::unique_ptr<Shape>> g_shapes;
std::list<std::shared_ptr<Node>> g_nodes;

int main(int argc, char **argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 1000000;
  const long quarter = n / 4;
  for (long i = 0; i < quarter / 2; ++i)
    g_names.emplace(int(i), "name of entry number " + std::to_string(i));  // > 15 chars: on the heap
  g_index.reserve(size_t(quarter / 2));
  for (long i = 0; i < quarter / 2; ++i) g_index[i * 7919].assign(size_t(1 + i % 6), int(i));
  g_shapes.reserve(size_t(quarter));
  for (long i = 0; i < quarter; ++i) {
    if (i % 2) g_shapes.push_back(std::make_unique<Circle>(double(i)));
    else g_shapes.push_back(std::make_unique<Square>(double(i)));
  }
  for (long i = 0; i < quarter / 2; ++i) {
    g_nodes.push_back(std::make_shared<Node>(i));
    if (i) g_nodes.back()->parent = *std::next(g_nodes.rbegin());
  }
  const long blocks = 2 * (quarter / 2) * 3 + quarter + 2;  // + the bucket array and g_shapes' buffer
  std::fprintf(stderr, "stl_heap: about %ld blocks (%zu names, %zu index entries, %zu shapes, %zu nodes)\n",
               blocks, g_names.size(), g_index.size(), g_shapes.size(), g_nodes.size());
  return 0;
}
