// snapshot_decode_check CAPTURE...: loads every snapshot of each capture with each block/edge
// decoder (raw on the reader's thread, raw on decode lanes, libprotobuf; see snapshot_compare.h)
// and says whether they agree. Exit 0: all agree; 1: a difference (printed); 2: usage. The
// graph-decoders integration case runs it over captures of traced programs.
#include <cstdio>
#include <string>

#include "snapshot_compare.h"

using namespace heapsnap;

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: snapshot_decode_check CAPTURE...\n");
    return 2;
  }
  int bad = 0;
  for (int i = 1; i < argc; ++i) {
    std::string err;
    auto reader = capture::CaptureReader::open(argv[i], &err);
    if (!reader) {
      fprintf(stderr, "%s: %s\n", argv[i], err.c_str());
      return 1;
    }
    auto list = snapshot::list_snapshots(*reader);
    for (const auto &info : list) {
      auto c = snapshot::testing::compare_decoders(argv[i], info.index);
      if (!c.difference.empty()) {
        printf("%s: snapshot %u: %s\n", argv[i], info.index, c.difference.c_str());
        ++bad;
      } else {
        printf("%s: snapshot %u: decoders agree (%s)\n", argv[i], info.index, c.ok ? "loaded" : c.error.c_str());
      }
    }
  }
  return bad ? 1 : 0;
}
