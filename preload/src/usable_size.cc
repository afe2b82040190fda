#include "usable_size.h"

namespace hs::usable {

bool g_glibc_layout = false;

void init() {
  static const size_t sizes[] = {0, 1, 8, 24, 25, 40, 100, 1000, 4096, 70000, 300000, 5000000};
  bool same = true;
  for (size_t n : sizes) {
    void *p = real::fn.malloc(n);
    if (!p) return;
    same = same && glibc_usable(p) == real::fn.usable_size(p);
    real::fn.free(p);
    void *q = real::fn.memalign(256, n);
    if (!q) return;
    same = same && glibc_usable(q) == real::fn.usable_size(q);
    real::fn.free(q);
  }
  g_glibc_layout = same;
}

}  // namespace hs::usable
