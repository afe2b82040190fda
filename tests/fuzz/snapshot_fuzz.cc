// libFuzzer target: heap snapshots. The input is a decompressed record stream, as for
// capture_records_fuzz (wrapped into a valid capture here), run through everything that target
// runs plus every snapshot's loading, memcheck classification, object graph and dominators.
// Seeds: captures of tests/programs recorded with --snapshot-at-exit (scripts/fuzz makes them).
#include <cstddef>
#include <cstdint>

#include "capture_harness.h"

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  heapsnap::fuzz::quiet_protobuf_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  heapsnap::fuzz::run_record_stream(data, size, true);
  return 0;
}
