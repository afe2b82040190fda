// Test target for the symbolizer: a shared library built with -g -O2 whose functions record a
// return address inside themselves plus the source lines a correct symbolizer must report.
#pragma once

extern "C" {

struct st_capture_t {
  void* ret;         // return address of the st_capture() call
  int line;          // line of that call
  int call_line[2];  // inlined case: where st_inline_outer calls st_inline_inner [0], and where
                     // st_with_inline calls st_inline_outer [1]
};

void st_capture(st_capture_t* c, int line);
void st_plain(st_capture_t* c);
void st_with_inline(st_capture_t* c);
void st_template(st_capture_t* c);  // via heapsnap_test::templated<int>
void st_method(st_capture_t* c);    // via heapsnap_test::Widget::poke
void st_hidden(st_capture_t* c);    // via heapsnap_test::(anonymous namespace)::Hidden::run
}
