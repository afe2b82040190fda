// Always-inlined helpers for symbolize_target.cc, kept in a header so that the inlined frames
// have a different file from their caller.
#pragma once

#include "symbolize_target.h"

#define ST_ALWAYS_INLINE __attribute__((always_inline)) inline

ST_ALWAYS_INLINE void st_inline_inner(st_capture_t* c, int call_line) {
  c->call_line[0] = call_line;
  st_capture(c, __LINE__);
}

ST_ALWAYS_INLINE void st_inline_outer(st_capture_t* c, int call_line) {
  c->call_line[1] = call_line;
  st_inline_inner(c, __LINE__);
}
