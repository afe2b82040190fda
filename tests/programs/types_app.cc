// Polymorphic objects whose classes and counts the program knows (tests/integration/
// compat_cases.py types): shapes made by a factory and held as Shape*, sessions held by a static
// std::map, a class in a namespace, a template. It prints each class's count and size, then ends
// with _exit: the exit snapshot sees the heap as main left it (no static destructor has run).
#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace geo {
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
  double side, pad[3] = {0, 0, 0};
  explicit Square(double s) : side(s) {}
  double area() const override { return side * side; }
};
}  // namespace geo

template <typename T>
struct Boxed {
  virtual ~Boxed() = default;
  T value{};
};

struct Session {
  virtual ~Session() = default;
  virtual int kind() const { return 1; }
  int id = 0;
  std::string name;
  std::vector<int> payload;
};

struct Plain {  // no vtable: no class known
  long a, b;
};

std::vector<std::unique_ptr<geo::Shape>> g_shapes;
static std::map<int, std::unique_ptr<Session>> g_sessions;
std::vector<Boxed<int> *> g_boxes;
std::vector<Plain *> g_plain;

__attribute__((noinline)) geo::Shape *make_shape(int i) {
  if (i % 3 == 0) return new geo::Square(i);
  return new geo::Circle(i);
}

int main() {
  for (int i = 0; i < 1500; i++) g_shapes.emplace_back(make_shape(i));
  for (int i = 0; i < 2000; i++) {
    auto s = std::make_unique<Session>();
    s->id = i;
    s->name = "session name long enough to leave the small-string buffer " + std::to_string(i);
    s->payload.assign(100, i);
    g_sessions[i] = std::move(s);
  }
  for (int i = 0; i < 300; i++) g_boxes.push_back(new Boxed<int>());
  for (int i = 0; i < 400; i++) g_plain.push_back(new Plain{i, i});
  std::printf("geo::Circle %d %zu\ngeo::Square %d %zu\nSession %d %zu\nBoxed<int> %d %zu\n", 1000, sizeof(geo::Circle),
              500, sizeof(geo::Square), 2000, sizeof(Session), 300, sizeof(Boxed<int>));
  std::fflush(stdout);
  _exit(0);
}
