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

// For `newhandler`: a handler that gives up on its third call, and one that throws.
static int handler_calls;
static void handler_gives_up() {
  if (++handler_calls == 3) std::set_new_handler(nullptr);
}
static void handler_throws() {
  ++handler_calls;
  throw std::bad_alloc();
}
static const size_t kHuge = size_t(1) << 62;  // no allocator can give this

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
  } else if (!strcmp(m, "newhandler")) {
    // operator new's failure path through the shim, which finds libstdc++'s pieces at run time:
    // the handler is called until it removes itself, then std::bad_alloc; the nothrow forms give
    // nullptr even when the handler throws.
    const char *forms[] = {"new", "new[]", "aligned new", "aligned new[]"};
    for (int f = 0; f < 4; ++f) {
      handler_calls = 0;
      std::set_new_handler(handler_gives_up);
      try {
        switch (f) {
          case 0: sink = ::operator new(kHuge); break;
          case 1: sink = ::operator new[](kHuge); break;
          case 2: sink = ::operator new(kHuge, std::align_val_t(64)); break;
          default: sink = ::operator new[](kHuge, std::align_val_t(64)); break;
        }
        printf("%s: no throw\n", forms[f]);
      } catch (const std::bad_alloc &) {
        printf("%s: bad_alloc after %d handler calls\n", forms[f], handler_calls);
      }
      for (int h = 0; h < 2; ++h) {
        handler_calls = 0;
        std::set_new_handler(h ? handler_throws : nullptr);
        void *q = nullptr;
        switch (f) {
          case 0: q = ::operator new(kHuge, std::nothrow); break;
          case 1: q = ::operator new[](kHuge, std::nothrow); break;
          case 2: q = ::operator new(kHuge, std::align_val_t(64), std::nothrow); break;
          default: q = ::operator new[](kHuge, std::align_val_t(64), std::nothrow); break;
        }
        printf("%s nothrow, %s: %s after %d handler calls\n", forms[f], h ? "throwing handler" : "no handler",
               q ? "a block" : "nullptr", handler_calls);
      }
      std::set_new_handler(nullptr);
    }
  } else {
    return 2;
  }
  printf("done %s %ld\n", m, n);
  return 0;
}
