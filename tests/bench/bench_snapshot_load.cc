// Times load_snapshot alone (the read phase of top-retainers) with each block/edge decoder:
//   bench_snapshot_load CAPTURE [RUNS [protobuf|raw1|lanes]]
// prints, per decoder (libprotobuf; raw on the reader's thread; raw on decode lanes; or only the
// one named), the median wall time of RUNS loads (default 3), the process CPU time they took
// (user + system, all threads: on a busy machine the steadier figure) and the process's peak
// resident set so far (name one decoder to see its own).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/resource.h>
#include <vector>

#include "capture/capture_reader.h"
#include "snapshot/heap_snapshot.h"

using namespace heapsnap;

namespace {

double cpu_s() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_snapshot_load CAPTURE [RUNS]\n");
    return 2;
  }
  const int runs = argc > 2 ? std::max(1, atoi(argv[2])) : 3;
  struct Way {
    const char *name;
    bool raw;
    unsigned threads;
  } ways[] = {{"protobuf", false, 1}, {"raw1", true, 1}, {"lanes", true, 0}};
  const std::string only = argc > 3 ? argv[3] : "";
  uint64_t blocks = 0, edges = 0;
  for (const Way &w : ways) {
    if (!only.empty() && only != w.name) continue;
    std::vector<double> wall;
    double cpu0 = cpu_s();
    for (int r = 0; r < runs; ++r) {
      std::string err;
      auto reader = capture::CaptureReader::open(argv[1], &err);
      if (!reader) {
        fprintf(stderr, "%s: %s\n", argv[1], err.c_str());
        return 1;
      }
      snapshot::LoadOptions o;
      o.raw_records = w.raw;
      o.threads = w.threads;
      o.identity = false;  // as top-retainers loads
      snapshot::HeapSnapshot s;
      auto t0 = std::chrono::steady_clock::now();
      if (!snapshot::load_snapshot(*reader, 0, &s, &err, o)) {
        fprintf(stderr, "%s: %s\n", argv[1], err.c_str());
        return 1;
      }
      wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      blocks = s.blocks();
      edges = s.edges();
    }
    double cpu = (cpu_s() - cpu0) / runs;
    std::sort(wall.begin(), wall.end());
    rusage u;
    getrusage(RUSAGE_SELF, &u);
    printf("%-9s %llu blocks, %llu edges: load %.3f s (median of %d), CPU %.3f s per load, peak RSS %.1f MB\n", w.name,
           (unsigned long long)blocks, (unsigned long long)edges, wall[wall.size() / 2], runs, cpu, double(u.ru_maxrss) / 1024);
  }
  return 0;
}
