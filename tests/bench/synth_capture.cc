// Writes a capture holding one heap snapshot of a synthetic object graph, without running any
// program, so that the graph engine can be tested and measured at 10^8 nodes:
//   synth_capture N KIND OUT.hsnap [SEED [incomplete]]      KIND: heap | random | list | dlist | tree
// "incomplete" marks the snapshot as one whose child failed part-way (what a killed child leaves).
// Node 0 of the generated graph becomes the root range; node i >= 1 becomes block i - 1.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "capture/capture_file_writer.h"
#include "graph/csr_graph.h"
#include "graph/synthetic.h"

using namespace heapsnap;

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: synth_capture N heap|random|list|dlist|tree OUT.hsnap [SEED [incomplete]]\n");
    return 2;
  }
  uint32_t n = uint32_t(strtoul(argv[1], nullptr, 10));
  std::string kind = argv[2];
  uint64_t seed = argc > 4 ? strtoull(argv[4], nullptr, 10) : 1;
  bool incomplete = argc > 5 && std::string(argv[5]) == "incomplete";
  auto t0 = std::chrono::steady_clock::now();
  graph::SyntheticGraph sg;
  if (kind == "heap") sg = graph::heap_like_graph(n, seed);
  else if (kind == "random") sg = graph::random_graph(n, 2.0, seed);
  else if (kind == "list") sg = graph::linked_list(n, seed);
  else if (kind == "dlist") sg = graph::doubly_linked_list(n, seed);
  else if (kind == "tree") sg = graph::binary_tree(n, seed);
  else {
    fprintf(stderr, "synth_capture: unknown kind %s\n", kind.c_str());
    return 2;
  }
  graph::CsrGraph g = graph::build_csr(sg.num_nodes, sg.from, sg.to);
  sg.from.clear();
  sg.from.shrink_to_fit();
  sg.to.clear();
  sg.to.shrink_to_fit();
  capture::CaptureFileWriter w(argv[3], 1, 0, 1);
  w.set_frame_hints(true);  // as the shim's snapshot child writes them
  if (!w.ok()) {
    fprintf(stderr, "synth_capture: cannot create %s\n", argv[3]);
    return 1;
  }
  wire::Record r;
  auto *p = r.mutable_process();
  p->set_pid(1);
  p->set_executable("synthetic:" + kind);
  p->add_argv("synth_capture");
  p->set_sample_bytes(1);
  p->set_snapshots_enabled(true);
  w.add(r);
  r.Clear();
  const uint32_t blocks = g.num_nodes - 1;
  auto *b = r.mutable_snapshot_begin();
  b->set_index(0);
  b->set_label("synthetic " + kind + " graph");
  // The totals a real snapshot carries: the loader sizes its columns from live_blocks.
  uint64_t heap_bytes = 0;
  for (uint32_t i = 1; i < g.num_nodes; ++i) heap_bytes += sg.shallow_size[i];
  b->mutable_totals()->set_live_blocks(blocks);
  b->mutable_totals()->set_alloc_calls(blocks);
  b->mutable_totals()->set_bytes_allocated(heap_bytes);
  b->mutable_totals()->set_heap_bytes(int64_t(heap_bytes));
  w.add(r);
  const uint64_t base = 0x100000000ull;
  uint64_t bytes = 0;
  for (uint32_t first = 0; first < blocks; first += 65536) {
    uint32_t last = std::min<uint32_t>(blocks, first + 65536);
    r.Clear();
    auto *sb = r.mutable_snapshot_blocks();
    sb->set_index(0);
    sb->set_first_block(first);
    uint64_t prev = 0, prev_site = 0;
    for (uint32_t i = first; i < last; ++i) {
      uint64_t a = base + uint64_t(i) * 64;
      sb->add_addr_delta(int64_t(a - prev));
      prev = a;
      sb->add_size(sg.shallow_size[i + 1]);
      bytes += sg.shallow_size[i + 1];
      uint64_t site = 0x400000 + (i % 13) * 0x40;  // thirteen "allocation sites"
      sb->add_call_site_delta(int64_t(site - prev_site));
      prev_site = site;
      sb->add_stack(0);
      sb->add_id(0);
      sb->add_time_ms(0);
    }
    w.add(r);
  }
  // Edges of blocks (nodes >= 1), grouped by source in records of about 1M edges.
  uint64_t edges = 0;
  r.Clear();
  auto *se = r.mutable_snapshot_edges();
  uint32_t prev_source = 0;
  bool open = false;
  for (uint32_t v = 1; v < g.num_nodes; ++v) {
    // Edges back into node 0 have no block to land on: the super root is not a block.
    std::vector<uint32_t> succ;
    for (uint32_t t : g.successors(v))
      if (t != 0) succ.push_back(t);
    if (succ.empty()) continue;
    if (!open) {
      se->set_index(0);
      se->set_base_block(v - 1);
      prev_source = v - 1;
      open = true;
    }
    se->add_from_delta(v - 1 - prev_source);
    prev_source = v - 1;
    se->add_count(uint32_t(succ.size()));
    for (size_t k = 0; k < succ.size(); ++k) {
      se->add_to_delta(int64_t(succ[k]) - int64_t(v));
      se->add_offset(uint32_t(8 * k));
    }
    edges += succ.size();
    if (se->to_delta_size() >= (1 << 20)) {
      w.add(r);
      r.Clear();
      se = r.mutable_snapshot_edges();
      open = false;
    }
  }
  if (open) w.add(r);
  // Node 0's edges: one global root range.
  r.Clear();
  auto *rt = r.mutable_snapshot_roots();
  rt->set_index(0);
  rt->set_kind(wire::ROOT_GLOBAL);
  rt->set_name("synthetic globals");
  int64_t prev_t = 0;
  uint64_t k = 0;
  for (uint32_t t : g.successors(0)) {
    if (t == 0) continue;
    rt->add_target_delta(int64_t(t - 1) - prev_t);
    prev_t = int64_t(t) - 1;
    rt->add_root_offset(k ? 8 : 0);
    ++k;
  }
  rt->set_start(0x7f0000000000ull);
  rt->set_length(k * 8);
  w.add(r);
  r.Clear();
  auto *e = r.mutable_snapshot_end();
  e->set_index(0);
  e->set_blocks(blocks);
  e->set_bytes(bytes);
  e->set_edges(edges);
  e->set_root_edges(k);
  e->set_roots(1);
  e->set_complete(!incomplete);
  if (incomplete) e->set_error("snapshot child killed by signal 9");
  w.add(r);
  r.Clear();
  r.mutable_end()->set_reason("exit");
  w.add(r);
  if (!w.close()) {
    fprintf(stderr, "synth_capture: write failed\n");
    return 1;
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fprintf(stderr, "synth_capture: %u blocks, %llu edges, %llu root edges, %.1f MB file, %.1f s\n", blocks,
          (unsigned long long)edges, (unsigned long long)k, double(w.bytes_written()) / 1e6, s);
  return 0;
}
