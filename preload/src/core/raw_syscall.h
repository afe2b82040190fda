// A system call that writes no errno: -errno on failure. For code that may run where errno (a
// thread-local) must not be touched: a snapshot child's workers share their starter's TLS
// (snapshot/child_threads.h), and the PAGEMAP_SCAN reads (snapshot/image_scan.h) run on one.
#pragma once
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "core/common.h"

namespace hs {

HS_INLINE long raw_syscall(long n, long a = 0, long b = 0, long c = 0, long d = 0) {
#if defined(__x86_64__)
  long ret;
  register long r10 asm("r10") = d;
  asm volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
  return ret;
#else
  // (Elsewhere the worker threads are not started: the caller's errno is its own.)
  const int saved = errno;
  long r = syscall(n, a, b, c, d);
  if (r < 0) r = -errno;
  errno = saved;
  return r;
#endif
}

}  // namespace hs
