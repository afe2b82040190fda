// See symbolize_target.h. Each function passes __LINE__ on the line of the call it wants
// symbolized; the empty asm after each call keeps the call from becoming a tail call.
#include "symbolize_target.h"

#include "symbolize_target_inline.h"

#define ST_NOIPA __attribute__((noipa))
#define ST_NO_TAIL_CALL() asm volatile("" ::: "memory")

extern "C" {

ST_NOIPA void st_capture(st_capture_t* c, int line) {
  c->ret = __builtin_return_address(0);
  c->line = line;
}

ST_NOIPA void st_plain(st_capture_t* c) {
  st_capture(c, __LINE__);
  ST_NO_TAIL_CALL();
}

ST_NOIPA void st_with_inline(st_capture_t* c) {
  st_inline_outer(c, __LINE__);
  ST_NO_TAIL_CALL();
}

}  // extern "C"

namespace heapsnap_test {

template <typename T>
ST_NOIPA void templated(st_capture_t* c, T) {
  st_capture(c, __LINE__);
  ST_NO_TAIL_CALL();
}

struct Widget {
  ST_NOIPA void poke(st_capture_t* c) const;
};

ST_NOIPA void Widget::poke(st_capture_t* c) const {
  st_capture(c, __LINE__);
  ST_NO_TAIL_CALL();
}

// Internal linkage: GCC emits no DW_AT_linkage_name, the symbolizer qualifies DW_AT_name itself.
namespace {
struct Hidden {
  ST_NOIPA void run(st_capture_t* c) const {
    st_capture(c, __LINE__);
    ST_NO_TAIL_CALL();
  }
};
}  // namespace

}  // namespace heapsnap_test

extern "C" {

ST_NOIPA void st_template(st_capture_t* c) {
  heapsnap_test::templated<int>(c, 42);
  ST_NO_TAIL_CALL();
}

ST_NOIPA void st_hidden(st_capture_t* c) {
  heapsnap_test::Hidden h;
  h.run(c);
  ST_NO_TAIL_CALL();
}

ST_NOIPA void st_method(st_capture_t* c) {
  heapsnap_test::Widget w;
  w.poke(c);
  ST_NO_TAIL_CALL();
}

}  // extern "C"
