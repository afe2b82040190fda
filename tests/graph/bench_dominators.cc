// bench_dominators [N=1e7] [heap|random|list|dlist|tree] [seed=1] [keep|consume]
//
// keep (default) times compute_dominators; consume times compute_dominators_consuming, which
// uses the graph's arrays as its working space (what top-retainers runs).
//
// Times each stage of the graph engine on a synthetic graph and reports memory per node:
//   engine  = bytes_used(graph) + DominatorTree::work_peak_bytes (what the engine allocates),
//   rss/dom = graph + the resident-set growth while computing dominators (VmHWM, reset first),
//   hwm     = the whole process's peak resident set (includes the generator's edge arrays).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "graph/csr_graph.h"
#include "graph/dominators.h"
#include "graph/retained.h"
#include "graph/synthetic.h"

using namespace heapsnap::graph;

namespace {

// Reads a "VmXXX:   1234 kB" line of /proc/self/status, in bytes (0 if unavailable).
size_t proc_status_bytes(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t len = std::strlen(key);
  while (std::getline(in, line))
    if (line.compare(0, len, key) == 0) return std::strtoull(line.c_str() + len + 1, nullptr, 10) * 1024;
  return 0;
}

// Resets VmHWM to the current RSS (Linux >= 4.0), so a stage's own peak can be read.
bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return out.good();
}

double seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Wall time, plus this thread's CPU time: on a shared machine the CPU figure is the steadier
// one (the engine is single-threaded, so the two agree on an idle machine).
struct Lap {
  double wall = 0;
  double cpu = 0;
  Lap& operator+=(const Lap& o) {
    wall += o.wall;
    cpu += o.cpu;
    return *this;
  }
};

class Stopwatch {
 public:
  Lap lap() {
    const double wall = seconds(CLOCK_MONOTONIC), cpu = seconds(CLOCK_THREAD_CPUTIME_ID);
    const Lap l{wall - wall_, cpu - cpu_};
    wall_ = wall;
    cpu_ = cpu;
    return l;
  }

 private:
  double wall_ = seconds(CLOCK_MONOTONIC);
  double cpu_ = seconds(CLOCK_THREAD_CPUTIME_ID);
};

void print_lap(const char* name, const Lap& l, const char* note = "") {
  std::printf("%-12s %8.3f s  (cpu %.3f s)%s\n", name, l.wall, l.cpu, note);
}

}  // namespace

int main(int argc, char** argv) {
  const double n_arg = argc > 1 ? std::strtod(argv[1], nullptr) : 1e7;
  const std::string kind = argc > 2 ? argv[2] : "heap";
  const uint64_t seed = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1;
  const bool consume = argc > 4 && std::string(argv[4]) == "consume";
  if (!(n_arg >= 1 && n_arg < 4294967295.0)) {
    std::fprintf(stderr, "N must be in [1, 2^32-1)\n");
    return 2;
  }
  const auto n = static_cast<uint32_t>(n_arg);

  Stopwatch clock;
  SyntheticGraph s;
  if (kind == "heap") s = heap_like_graph(n, seed);
  else if (kind == "random") s = random_graph(n, 2.0, seed);
  else if (kind == "list") s = linked_list(n, seed);
  else if (kind == "dlist") s = doubly_linked_list(n, seed);
  else if (kind == "tree") s = binary_tree(n, seed);
  else {
    std::fprintf(stderr, "unknown kind '%s' (heap|random|list|dlist|tree)\n", kind.c_str());
    return 2;
  }
  const Lap t_gen = clock.lap();
  const size_t edges = s.from.size();

  CsrGraph g = build_csr(s.num_nodes, s.from, s.to);
  std::vector<uint32_t>().swap(s.from);  // the engine works from the CSR alone
  std::vector<uint32_t>().swap(s.to);
  const Lap t_csr = clock.lap();

  const size_t rss_before = proc_status_bytes("VmRSS:");
  const size_t hwm_setup = proc_status_bytes("VmHWM:");  // the reset below forgets it
  const bool hwm_reset = reset_peak_rss();
  const size_t graph_bytes = bytes_used(g);
  clock.lap();
  DominatorTree t = consume ? compute_dominators_consuming(g) : compute_dominators(g);
  const Lap t_dom = clock.lap();
  const size_t dom_hwm = proc_status_bytes("VmHWM:");
  std::vector<uint32_t>().swap(g.offsets);  // retained needs only the tree
  std::vector<uint32_t>().swap(g.targets);

  clock.lap();
  const RetainedSizes r = compute_retained(t, s.shallow_size);
  const Lap t_ret = clock.lap();
  const DomChildren children = dominator_children(t);
  const Lap t_children = clock.lap();

  const double per = 1.0 / n;
  std::printf("kind=%s nodes=%u edges=%zu (%.2f/node) reachable=%zu seed=%llu%s\n", kind.c_str(), n,
              edges, double(edges) * per, t.preorder.size(), (unsigned long long)seed,
              consume ? " (graph consumed)" : "");
  Lap engine = t_csr;
  engine += t_dom;
  engine += t_ret;
  print_lap("generate", t_gen);
  print_lap("csr build", t_csr);
  print_lap("dominators", t_dom);
  std::printf("  steps, cpu: dfs %.3f s, predecessors %.3f s, semidominators %.3f s, idoms %.3f s\n",
              t.steps.dfs.cpu_s, t.steps.preds.cpu_s, t.steps.semi.cpu_s, t.steps.idom.cpu_s);
  std::printf("  steps, wall: dfs %.3f s, predecessors %.3f s, semidominators %.3f s, idoms %.3f s\n",
              t.steps.dfs.wall_s, t.steps.preds.wall_s, t.steps.semi.wall_s, t.steps.idom.wall_s);
  print_lap("retained", t_ret);
  print_lap("engine", engine, "  = csr + dominators + retained");
  print_lap("dom children", t_children, "  (top-down CSR, not in the total)");
  std::printf("root retains %llu bytes in %u nodes\n", (unsigned long long)r.bytes[0], r.count[0]);
  if (consume)  // the peak counts the graph while the computation held it
    std::printf("memory/node: engine %.1f B (dominator peak, graph included; graph %.1f)\n",
                double(t.work_peak_bytes) * per, double(graph_bytes) * per);
  else
    std::printf("memory/node: engine %.1f B (graph %.1f + dominator peak %.1f)\n",
                double(graph_bytes + t.work_peak_bytes) * per, double(graph_bytes) * per,
                double(t.work_peak_bytes) * per);
  if (hwm_reset && dom_hwm >= rss_before)
    std::printf("             rss/dom %.1f B (graph + resident growth during dominators)\n",
                double(graph_bytes + dom_hwm - rss_before) * per);
  const size_t hwm = std::max(hwm_setup, proc_status_bytes("VmHWM:"));
  std::printf("             hwm %.1f B (process peak RSS %.1f MiB, includes generator edges)\n",
              double(hwm) * per, double(hwm) / (1 << 20));
  (void)children;
  return 0;
}
