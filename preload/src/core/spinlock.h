// A tiny test-and-test-and-set lock. The tracer never holds one across a call out of the shim
// (no allocation, no system call inside), so critical sections are a few hundred cycles at most.
#pragma once
#include <atomic>

namespace hs {

class SpinLock {
 public:
  void lock() {
    while (flag_.exchange(true, std::memory_order_acquire)) {
      while (flag_.load(std::memory_order_relaxed)) __builtin_ia32_pause();
    }
  }
  bool try_lock() { return !flag_.exchange(true, std::memory_order_acquire); }
  void unlock() { flag_.store(false, std::memory_order_release); }
  // After fork only the forking thread exists: a lock held by a vanished thread is reset.
  void reset() { flag_.store(false, std::memory_order_relaxed); }

 private:
  std::atomic<bool> flag_{false};
};

struct SpinGuard {
  explicit SpinGuard(SpinLock &l) : lock(l) { lock.lock(); }
  ~SpinGuard() { lock.unlock(); }
  SpinLock &lock;
};

}  // namespace hs
