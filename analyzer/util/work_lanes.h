// Lanes of work, each run in posting order by its own thread: work posted to one lane never
// overlaps and keeps its order, so each lane can own some output (a column) without locks.
// With no threads the work runs at once on the caller's thread, in the same order per lane.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <thread>
#include <vector>

namespace heapsnap::util {

class WorkLanes {
 public:
  // threads: 0 runs everything on the caller's thread; else lane l runs on thread l % threads.
  explicit WorkLanes(unsigned threads) {
    for (unsigned i = 0; i < threads; ++i) workers_.push_back(std::make_unique<Worker>());
    for (auto &w : workers_) w->thread = std::thread([w = w.get()] { w->run(); });
  }
  ~WorkLanes() {
    for (auto &w : workers_) {
      {
        std::lock_guard<std::mutex> lock(w->mu);
        w->quit = true;
      }
      w->cv.notify_all();
      w->thread.join();
    }
  }
  WorkLanes(const WorkLanes &) = delete;
  WorkLanes &operator=(const WorkLanes &) = delete;

  unsigned threads() const { return unsigned(workers_.size()); }
  void post(unsigned lane, std::function<void()> fn) {
    if (workers_.empty()) {
      fn();
      return;
    }
    Worker &w = *workers_[lane % workers_.size()];
    {
      std::lock_guard<std::mutex> lock(w.mu);
      w.queue.push_back(std::move(fn));
    }
    w.cv.notify_all();
  }
  // Returns when all the work posted so far has run.
  void drain() {
    for (auto &w : workers_) {
      std::unique_lock<std::mutex> lock(w->mu);
      w->cv.wait(lock, [&] { return w->queue.empty() && !w->busy; });
    }
  }

 private:
  struct Worker {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> queue;
    bool busy = false, quit = false;
    std::thread thread;
    void run() {
      pthread_setname_np(pthread_self(), "hs-decode");
      std::unique_lock<std::mutex> lock(mu);
      for (;;) {
        cv.wait(lock, [&] { return quit || !queue.empty(); });
        if (queue.empty()) return;  // quit, and nothing left
        std::function<void()> fn = std::move(queue.front());
        queue.pop_front();
        busy = true;
        lock.unlock();
        fn();
        lock.lock();
        busy = false;
        if (queue.empty()) cv.notify_all();
      }
    }
  };
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace heapsnap::util
