// libFuzzer target: a whole capture file (header + zstd frames) through reader, summary, replay
// and stacks. Seeds: real captures of tests/programs (scripts/fuzz makes them).
#include <cstddef>
#include <cstdint>

#include "capture_harness.h"

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  heapsnap::fuzz::quiet_protobuf_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  heapsnap::fuzz::run_capture_bytes(data, size);
  return 0;
}
