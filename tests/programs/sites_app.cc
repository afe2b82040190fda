// Idiomatic C++ whose every allocation goes through the standard library's containers (and one
// C-style wrapper), for tests/integration/sites_cases.py: the site of each allocation must be the
// function of this file that filled the container, at -O0, -O1 and -O2.
//
// Each filling function is marked below with SITE and END comments naming it; the test reads this
// file to learn the lines each function spans. Usage: sites_app [scale] (default 1).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

struct Session {
  int id;
  char user[48];
  std::vector<int> pages;
};

struct Widget {
  double weights[32];
  long uses = 0;
};

std::unordered_map<std::string, std::vector<int>> g_cache;
std::map<int, std::unique_ptr<Session>> g_sessions;
std::list<std::string> g_history;
std::vector<std::string> g_names;
std::vector<std::shared_ptr<Widget>> g_widgets;
std::vector<char *> g_buffers;
std::vector<int> *g_lost;  // overwritten: the earlier vectors leak

// A C-style wrapper that programs keep in a file of their own: hidden with --hide-frames xmalloc.
extern "C" __attribute__((noinline)) void *xmalloc(size_t n) {  // SITE xmalloc
  void *p = malloc(n);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    abort();
  }
  return p;
}  // END xmalloc

__attribute__((noinline)) void fill_cache(int n) {  // SITE fill_cache
  for (int i = 0; i < n; ++i) {
    std::string key = "cache-key-number-" + std::to_string(i) + "-with-a-long-suffix";
    std::vector<int> &v = g_cache[key];
    for (int j = 0; j < 300; ++j) v.push_back(i * j);
  }
}  // END fill_cache

__attribute__((noinline)) void add_sessions(int n) {  // SITE add_sessions
  for (int i = 0; i < n; ++i) {
    auto s = std::make_unique<Session>();
    s->id = i;
    snprintf(s->user, sizeof(s->user), "user%d", i);
    s->pages.resize(64 + i % 64);
    g_sessions[i] = std::move(s);
  }
}  // END add_sessions

__attribute__((noinline)) void record_history(int n) {  // SITE record_history
  for (int i = 0; i < n; ++i) {
    std::string line(100 + i % 50, 'h');
    line += std::to_string(i);
    g_history.push_back(std::move(line));
  }
}  // END record_history

__attribute__((noinline)) void collect_names(int n) {  // SITE collect_names
  for (int i = 0; i < n; ++i) g_names.emplace_back(200 + i % 100, char('a' + i % 26));
}  // END collect_names

__attribute__((noinline)) void make_widgets(int n) {  // SITE make_widgets
  for (int i = 0; i < n; ++i) {
    auto w = std::make_shared<Widget>();
    w->uses = i;
    g_widgets.push_back(std::move(w));
  }
}  // END make_widgets

__attribute__((noinline)) void copy_buffers(int n) {  // SITE copy_buffers
  for (int i = 0; i < n; ++i) {
    char *b = static_cast<char *>(xmalloc(2000 + size_t(i % 7) * 100));
    memset(b, 'b', 2000);
    g_buffers.push_back(b);
  }
}  // END copy_buffers

__attribute__((noinline)) void leak_records(int n) {  // SITE leak_records
  for (int i = 0; i < n; ++i) {
    g_lost = new std::vector<int>(1000 + i);
    (*g_lost)[0] = i;
  }
}  // END leak_records

int main(int argc, char **argv) {  // SITE main
  int scale = argc > 1 ? atoi(argv[1]) : 1;
  if (scale < 1) scale = 1;
  fill_cache(2000 * scale);
  add_sessions(3000 * scale);
  record_history(20000 * scale);
  collect_names(20000 * scale);
  make_widgets(10000 * scale);
  copy_buffers(3000 * scale);
  leak_records(400 * scale);
  size_t total = g_cache.size() + g_sessions.size() + g_history.size() + g_names.size() + g_widgets.size() +
                 g_buffers.size();
  printf("%zu objects\n", total);
  fflush(stdout);
  // Ends without running the globals' destructors: the exit snapshot holds every container (and
  // `leaks` lists them), as in a program killed or ending through _exit.
  _exit(0);
}  // END main
