// Loads a snapshot through each of load_snapshot's decoders (raw on the reader's thread, raw on
// decode lanes, libprotobuf) and says where their results differ: outcome, error message and every
// column. Used by the unit test (snapshot_decode_test.cc), the real-capture check
// (snapshot_decode_check.cc) and the fuzz harness.
#pragma once
#include <string>

#include "capture/capture_reader.h"
#include "snapshot/heap_snapshot.h"

namespace heapsnap::snapshot::testing {

// What differs between a and b ("" if nothing); ok_* / err_*: load_snapshot's results.
inline std::string snapshot_difference(const HeapSnapshot &a, bool ok_a, const std::string &err_a, const HeapSnapshot &b,
                                       bool ok_b, const std::string &err_b) {
  if (ok_a != ok_b) return "outcome " + std::to_string(ok_a) + " vs " + std::to_string(ok_b);
  if (err_a != err_b) return "error '" + err_a + "' vs '" + err_b + "'";
  if (!ok_a) return "";
  if (a.blocks() != b.blocks()) return "block count";
  for (uint32_t i = 0; i < a.blocks(); ++i)
    if (a.addr[i] != b.addr[i] || a.size[i] != b.size[i] || a.call_site[i] != b.call_site[i] ||
        a.call_site.index(i) != b.call_site.index(i))
      return "block " + std::to_string(i);
  if (a.call_site.sites() != b.call_site.sites()) return "site table";
  if (a.id != b.id || a.stack != b.stack || a.time_ms != b.time_ms || a.pool != b.pool) return "identity columns";
  if (a.edge_begin != b.edge_begin) return "edge_begin";
  if (a.edge_target != b.edge_target) return "edge_target";
  if (a.edge_offset != b.edge_offset) return "edge_offset";
  if (a.edge_interior != b.edge_interior) return "edge_interior";
  if (a.type != b.type || a.type_names != b.type_names) return "types";
  if (a.vectors.size() != b.vectors.size()) return "vector headers";
  for (size_t i = 0; i < a.vectors.size(); ++i)
    if (a.vectors[i].pointer != b.vectors[i].pointer || a.vectors[i].from_root != b.vectors[i].from_root ||
        a.vectors[i].size != b.vectors[i].size || a.vectors[i].capacity != b.vectors[i].capacity)
      return "vector header " + std::to_string(i);
  if (a.root_target != b.root_target || a.root_offset != b.root_offset || a.root_interior != b.root_interior ||
      a.roots.size() != b.roots.size())
    return "roots";
  if (a.info.have_begin != b.info.have_begin || a.info.have_end != b.info.have_end || a.info.label != b.info.label)
    return "info";
  if (a.memory_bytes() != b.memory_bytes()) return "memory_bytes";
  return "";
}

struct DecodeComparison {
  bool ok = false;          // the protobuf path's outcome
  std::string error;        // its error
  std::string difference;   // "" when every decoder agrees
};

// Loads snapshot `index` of path with each decoder (and threads 1 and 3 for the raw one).
inline DecodeComparison compare_decoders(const std::string &path, uint32_t index, const LoadOptions &base = {}) {
  DecodeComparison out;
  HeapSnapshot ref;
  std::string open_err;
  auto load = [&](bool raw, unsigned threads, HeapSnapshot *s, std::string *err) {
    auto reader = capture::CaptureReader::open(path, &open_err);
    if (!reader) return false;
    LoadOptions o = base;
    o.raw_records = raw;
    o.threads = threads;
    return load_snapshot(*reader, index, s, err, o);
  };
  out.ok = load(false, 1, &ref, &out.error);
  for (unsigned threads : {1u, 3u}) {
    HeapSnapshot s;
    std::string err;
    bool ok = load(true, threads, &s, &err);
    std::string d = snapshot_difference(s, ok, err, ref, out.ok, out.error);
    if (!d.empty()) {
      out.difference = "raw decoder, " + std::to_string(threads) + " thread(s), vs protobuf: " + d;
      return out;
    }
  }
  return out;
}

}  // namespace heapsnap::snapshot::testing
