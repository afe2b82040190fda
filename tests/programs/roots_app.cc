// Roots that are variables, containers held by them, and a leaked cycle, with the truth printed
// (tests/integration/roots_cases.py): a Cache behind `Cache *g_cache` holding an
// unordered_map<std::string, std::vector<int>>; a static std::map<int, std::unique_ptr<Session>>
// g_sessions of 2,000 sessions; a std::list held by a local of a thread that is still running; two
// make_shared objects pointing at each other and dropped (a leaked cycle). For each it prints the
// heap bytes it holds (requested sizes, from libstdc++'s node types), then ends with _exit: the
// exit snapshot sees the heap as main left it, before any static destructor.
//
// Built -g -O1 (roots_app) and stripped (roots_app_stripped).
#include <pthread.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

struct Cache {
  std::unordered_map<std::string, std::vector<int>> entries;
  long hits = 0, misses = 0;
};

struct Session {
  int id = 0;
  std::string user;
  std::vector<char> buffer;
};

struct Peer {
  std::shared_ptr<Peer> other;
  char tag[40];
};

struct Item {
  std::array<char, 200> data;
};

Cache *g_cache;
static std::map<int, std::unique_ptr<Session>> g_sessions;

static int g_ready[2], g_hold[2];

// libstdc++'s nodes, as the containers allocate them.
using CacheNode = std::__detail::_Hash_node<std::pair<const std::string, std::vector<int>>, true>;
using SessionNode = std::_Rb_tree_node<std::pair<const int, std::unique_ptr<Session>>>;
using ItemNode = std::_List_node<Item>;

static size_t string_heap(const std::string &s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; }

__attribute__((noinline)) size_t fill_cache() {
  g_cache = new Cache;
  for (int i = 0; i < 300; i++) {
    std::vector<int> v;
    v.reserve(50 + i % 7);
    v.assign(50 + i % 7, i);
    g_cache->entries.emplace("cache key number " + std::to_string(i) + " with some padding", std::move(v));
  }
  size_t bytes = sizeof(Cache) + (g_cache->entries.bucket_count() > 1 ? g_cache->entries.bucket_count() * sizeof(void *) : 0);
  for (const auto &[k, v] : g_cache->entries) bytes += sizeof(CacheNode) + string_heap(k) + v.capacity() * sizeof(int);
  return bytes;
}

__attribute__((noinline)) size_t add_sessions() {
  for (int i = 0; i < 2000; i++) {
    auto s = std::make_unique<Session>();
    s->id = i;
    s->user = "user name long enough to be on the heap " + std::to_string(i);
    s->buffer.reserve(1000);
    g_sessions.emplace(i, std::move(s));
  }
  size_t bytes = 0;
  for (const auto &[id, s] : g_sessions)
    bytes += sizeof(SessionNode) + sizeof(Session) + string_heap(s->user) + s->buffer.capacity();
  return bytes;
}

__attribute__((noinline)) void *list_thread(void *) {
  pthread_setname_np(pthread_self(), "list-keeper");  // the roots name it so
  std::list<Item> items;
  for (int i = 0; i < 500; i++) items.emplace_back().data[0] = char(i);
  size_t bytes = items.size() * sizeof(ItemNode);
  if (write(g_ready[1], &bytes, sizeof(bytes)) != sizeof(bytes)) return nullptr;
  char c;
  while (read(g_hold[0], &c, 1) < 0) {
  }
  return &items;  // never reached before the exit snapshot
}

__attribute__((noinline)) size_t leak_cycle() {
  auto a = std::make_shared<Peer>();
  auto b = std::make_shared<Peer>();
  std::memset(a->tag, 'a', sizeof(a->tag));
  std::memset(b->tag, 'b', sizeof(b->tag));
  a->other = b;
  b->other = a;
  // make_shared's one block: the control block (vtable pointer and two counts), then the Peer.
  return 2 * (16 + sizeof(Peer));
}

// Dead stack words with pointers into the heap would be roots of their own: clear them.
__attribute__((noinline)) void scrub_stack() {
  volatile char buf[32768];
  std::memset(const_cast<char *>(buf), 0, sizeof(buf));
}

int main() {
  if (pipe(g_ready) != 0 || pipe(g_hold) != 0) return 1;
  size_t cache = fill_cache();
  size_t sessions = add_sessions();
  size_t cycle = leak_cycle();
  pthread_t t;
  if (pthread_create(&t, nullptr, list_thread, nullptr) != 0) return 1;
  size_t list = 0;
  if (read(g_ready[0], &list, sizeof(list)) != sizeof(list)) return 1;
  scrub_stack();
  std::printf("g_cache %zu\ng_sessions %zu\nsessions %zu\nlist %zu\ncycle %zu\nsession_node %zu\nsession_size %zu\n",
              cache, sessions, g_sessions.size(), list, cycle, sizeof(SessionNode), sizeof(Session));
  std::fflush(stdout);
  _exit(0);
}
