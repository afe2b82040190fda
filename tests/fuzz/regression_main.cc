// Runs every input checked into tests/fuzz/regressions/ through the fuzz harness, snapshots
// included: files under a directory named "records" are decompressed record streams
// (capture_records_fuzz inputs), under "delimited" records separated by "HSREC!" (snapshot_fuzz
// inputs), all others whole capture files (capture_fuzz inputs). A crash, a sanitizer report or an allocation
// beyond the address-space limit set here (a length taken from the file unchecked) fails the test.
//
// usage: fuzz_regressions DIR|FILE...
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "capture_harness.h"

#if defined(__SANITIZE_ADDRESS__)
#define HEAPSNAP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HEAPSNAP_ASAN 1
#endif
#endif

namespace fs = std::filesystem;

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
    return 2;
  }
#ifndef HEAPSNAP_ASAN
  // No input of a few KiB has any business needing more: a bigger allocation is a bug.
  struct rlimit lim = {3ull << 30, 3ull << 30};
  setrlimit(RLIMIT_AS, &lim);
#endif
  setvbuf(stdout, nullptr, _IOLBF, 0);  // a crash report follows the name of the input it is about
  heapsnap::fuzz::quiet_protobuf_logs();
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    fs::path p(argv[i]);
    if (fs::is_directory(p)) {
      for (const auto &e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file() && e.path().filename().string()[0] != '.' && e.path().extension() != ".md")
          inputs.push_back(e.path());
    } else {
      inputs.push_back(p);
    }
  }
  std::sort(inputs.begin(), inputs.end());
  int failed = 0;
  for (const auto &p : inputs) {
    std::ifstream in(p, std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string kind = p.parent_path().filename().string();
    bool records = kind == "records", delimited = kind == "delimited";
    printf("run  %s\n", p.c_str());
    auto t0 = std::chrono::steady_clock::now();
    try {
      const auto *d = reinterpret_cast<const uint8_t *>(data.data());
      if (records) heapsnap::fuzz::run_record_stream(d, data.size(), true);
      else if (delimited) heapsnap::fuzz::run_delimited_records(d, data.size(), true);
      else heapsnap::fuzz::run_capture_bytes(d, data.size(), true);
    } catch (const std::exception &e) {
      printf("FAIL %s: exception: %s\n", p.c_str(), e.what());
      ++failed;
      continue;
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    printf("ok   %s (%s, %zu bytes, %.1f ms)\n", p.c_str(), records ? "record stream" : delimited ? "delimited records" : "capture",
           data.size(), ms);
  }
  printf("%zu inputs, %d failed\n", inputs.size(), failed);
  return failed ? 1 : 0;
}
