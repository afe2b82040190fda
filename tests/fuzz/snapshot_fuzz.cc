// libFuzzer target: heap snapshots. The input is the records of a capture without their length
// prefixes, separated by "HSREC!" (frames by "HSFRAME!"): the target adds the lengths and wraps the
// stream into a valid capture, so mutations that copy, drop or reorder whole records, or change a
// record's size, keep it well formed. Run through everything capture_records_fuzz runs plus every
// snapshot's loading, memcheck classification, object graph and dominators.
// Every snapshot is loaded by each block/edge decoder (raw, raw on lanes, libprotobuf) and the
// results compared: a difference aborts.
// Seeds: captures of tests/programs recorded with --snapshot-at-exit (scripts/fuzz makes them).
#include <cstddef>
#include <cstdint>

#include "capture_harness.h"

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  heapsnap::fuzz::quiet_protobuf_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  heapsnap::fuzz::run_delimited_records(data, size, true);
  return 0;
}
