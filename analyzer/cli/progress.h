// Progress of long work on stderr, only when stderr is a terminal (quiet in pipes and CI).
#pragma once
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace heapsnap::cli {

class Progress {
 public:
  explicit Progress(std::string what) : what_(std::move(what)), on_(isatty(2)) {}
  ~Progress() { done(); }
  std::function<void(uint64_t, uint64_t)> callback() {
    if (!on_) return {};
    return [this](uint64_t d, uint64_t t) { update(d, t); };
  }
  void update(uint64_t done, uint64_t total) {
    auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(200) || total == 0) return;
    last_ = now;
    fprintf(stderr, "\r%s %3.0f%%", what_.c_str(), 100.0 * double(done) / double(total));
    shown_ = true;
  }
  void done() {
    if (shown_) fprintf(stderr, "\r%*s\r", int(what_.size()) + 6, "");
    shown_ = false;
  }

 private:
  std::string what_;
  bool on_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace heapsnap::cli
