#include "cli/snapshot_args.h"

#include <cstdio>

#include "cli/term_style.h"

namespace heapsnap::cli {

void add_snapshot_args(CLI::App *cmd, SnapshotArgs &a, bool rows) {
  cmd->add_option("file", a.file, "capture file")->required();
  cmd->add_option("--snapshot", a.snapshot, "snapshot index (default: the last complete one; see `heapsnap snapshots`)");
  cmd->add_flag("--json", a.json, "machine-readable output");
  cmd->add_flag("--bytes", a.raw_bytes, "print sizes as plain byte counts");
  cmd->add_option("--interior", a.interior, "follow interior pointers: on (default) or off (memcheck's 'possibly lost' view)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--debug-dir", a.debug_dirs, "directory with separate debug files; repeatable");
  if (rows) cmd->add_option("-n,--limit", a.limit, "rows to show (default 20)");
}

bool load_chosen_snapshot(const SnapshotArgs &a, snapshot::HeapSnapshot *out, const snapshot::LoadOptions &opts) {
  std::string err;
  auto reader = capture::CaptureReader::open(a.file, &err);
  if (!reader) {
    print_error("%s", err.c_str());
    return false;
  }
  int index = a.snapshot;
  if (index < 0) {
    auto list = snapshot::list_snapshots(*reader);
    for (const auto &s : list)
      if (s.have_end && s.end.complete()) index = int(s.index);
    if (index < 0) {
      // A damaged or cut capture says where: the reader's first problem, a snapshot whose records
      // stop, or the end of a file that lacks its end record.
      char why[96] = "";
      std::string what;
      if (!reader->problems().empty()) {
        snprintf(why, sizeof(why), "the capture is damaged: offset 0x%llx: ", (unsigned long long)reader->problems()[0].offset);
        what = reader->problems()[0].what;
      } else {
        bool ended = false;
        if (auto r2 = capture::CaptureReader::open(a.file, &err)) {
          r2->set_record_filter([](uint32_t field) { return field == wire::Record::kEndFieldNumber; });
          r2->for_each_record([&](const wire::Record &rec, const capture::RecordPos &) {
            ended = ended || rec.has_end();
            return true;
          });
        }
        if (!ended)
          snprintf(why, sizeof(why), "the capture stops at offset 0x%llx without its end record: cut off?",
                   (unsigned long long)reader->file_size());
      }
      if (why[0])
        print_error("%s has no complete snapshot (%s%s)", a.file.c_str(), why, what.c_str());
      else
        print_error("%s has no complete snapshot (record with --snapshot-at-exit or another trigger)", a.file.c_str());
      return false;
    }
    reader = capture::CaptureReader::open(a.file, &err);
  } else {
    // Asked for by index: an incomplete one (its child died or failed part-way) holds a partial
    // heap or none, and every answer from it would look like a real, smaller heap.
    auto list = snapshot::list_snapshots(*reader);
    for (const auto &s : list) {
      if (int(s.index) != index || (s.have_end && s.end.complete())) continue;
      std::string why = !s.have_end ? "its records stop before its end (the program or the snapshot child was killed?)"
                                    : (s.end.error().empty() ? "it failed part-way" : s.end.error());
      print_error("%s: snapshot %d is incomplete: %s; `heapsnap snapshots %s` lists the complete ones", a.file.c_str(),
                  index, why.c_str(), a.file.c_str());
      return false;
    }
    reader = capture::CaptureReader::open(a.file, &err);
  }
  bool ok = snapshot::load_snapshot(*reader, uint32_t(index), out, &err, opts);
  if (!ok) {
    print_error("%s", err.c_str());
    return false;
  }
  if (!err.empty()) print_warning("%s", err.c_str());
  return true;
}

}  // namespace heapsnap::cli
