// C++ allocation forms with exactly known counts: `cxx_patterns MODE N` (see alloc_patterns.c).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

struct alignas(64) Aligned {
  char bytes[96];
};

struct Node {
  long value;
  Node *next;
};

// Makes the pointer escape so the compiler cannot drop a new/delete pair.
__attribute__((noinline)) static void escape(void *p) { asm volatile("" : : "r"(p) : "memory"); }
static volatile void *sink;

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  long n = atol(argv[2]);
  const char *m = argv[1];
  if (!strcmp(m, "new")) {
    for (long i = 0; i < n; ++i) {
      Node *p = new Node{i, nullptr};
      escape(p);
      delete p;  // sized delete with -fsized-deallocation (the default in C++14 and later)
    }
  } else if (!strcmp(m, "array")) {
    for (long i = 0; i < n; ++i) {
      int *p = new int[i % 50 + 1];
      escape(p);
      delete[] p;
    }
  } else if (!strcmp(m, "aligned")) {
    for (long i = 0; i < n; ++i) {
      Aligned *p = new Aligned;
      if (reinterpret_cast<unsigned long>(p) % 64) abort();
      escape(p);
      delete p;
      Aligned *a = new Aligned[3];
      escape(a);
      delete[] a;
    }
  } else if (!strcmp(m, "nothrow")) {
    for (long i = 0; i < n; ++i) {
      Node *p = new (std::nothrow) Node{i, nullptr};
      escape(p);
      ::operator delete(p, std::nothrow);
    }
  } else if (!strcmp(m, "list_leak")) {
    // A leaked linked list of n nodes: n blocks of sizeof(Node) stay allocated.
    Node *head = nullptr;
    for (long i = 0; i < n; ++i) head = new Node{i, head};
    sink = head;
  } else if (!strcmp(m, "badalloc")) {
    // A huge request must still throw std::bad_alloc through the shim.
    try {
      sink = new char[size_t(1) << 62];
      puts("no throw");
    } catch (const std::bad_alloc &) {
      puts("caught bad_alloc");
    }
  } else {
    return 2;
  }
  printf("done %s %ld\n", m, n);
  return 0;
}
