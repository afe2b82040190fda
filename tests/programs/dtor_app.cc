// A static std::map that its destructor empties at exit (tests/integration/roots_cases.py,
// before_destructors): a snapshot after destructors sees none of it, one before them all of it.
// Prints the bytes the map holds (its nodes and their strings, from libstdc++'s node type). With
// the argument "exit" the program calls exit() itself instead of returning from main.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

static std::map<int, std::string> g_table;
// With external linkage and a std::string in its type, its symbol carries an ABI tag
// (_Z8g_labelsB5cxx11: "g_labels[abi:cxx11]" demangled); roots name it g_labels.
std::map<int, std::string> g_labels;
// A class template of the program's own holding a pointer: paths name its field (inner) from its
// instance's DWARF layout, found by the readable name Wrapper<Payload>.
struct Payload {
  char bytes[77];
};
template <typename T>
struct Wrapper {
  long tag;
  T *inner;
};
Wrapper<Payload> *g_wrapped;

using TableNode = std::_Rb_tree_node<std::pair<const int, std::string>>;

int main(int argc, char **argv) {
  for (int i = 0; i < 1000; i++) g_table.emplace(i, std::string(100, char('a' + i % 26)));
  g_labels.emplace(1, std::string(40, 'x'));
  g_wrapped = new Wrapper<Payload>{7, new Payload{}};
  std::printf("table %zu\n", g_table.size() * (sizeof(TableNode) + 101));
  std::fflush(stdout);
  if (argc > 1 && !std::strcmp(argv[1], "exit")) std::exit(0);
  return 0;
}
