#include "cli/snapshot_args.h"

#include <cstdio>

#include "cli/term_style.h"

namespace heapsnap::cli {

// The names --snapshot takes besides an index (snapshot::trigger_name's).
constexpr const char *kTriggerNames =
    "peak, exit, before-destructors, growth, signal, periodic, heap-threshold, rss-threshold, client";

void add_snapshot_args(Cmd cmd, SnapshotArgs &a, bool rows) {
  cmd.option("file", a.file, "capture file").required();
  cmd.option_function(
         "--snapshot",
         [&a](const std::string &v) {
           if (!v.empty() && v.find_first_not_of("0123456789") == std::string::npos && v.size() < 10)
             a.snapshot = std::stoi(v);
           else if (snapshot::trigger_from_name(v) >= 0)
             a.snapshot_trigger = v;
           else
             reject_value("--snapshot", "'" + v + "' is not a snapshot index or trigger (" + kTriggerNames + ")");
         },
         std::string("snapshot index, or a trigger (") + kTriggerNames +
             "): the last complete snapshot of that trigger (default: the last complete one taken; see `heapsnap "
             "snapshots`)")
      .type_name("N|TRIGGER");
  cmd.flag("--json", a.json, "machine-readable output");
  cmd.flag("--bytes", a.raw_bytes, "print sizes as plain byte counts");
  cmd.option("--interior", a.interior, "follow interior pointers: on (default) or off (memcheck's 'possibly lost' view)")
      .one_of({"on", "off"});
  cmd.option("--debug-dir", a.debug_dirs, "directory with separate debug files; repeatable");
  if (rows) cmd.option("-n,--limit", a.limit, "rows to show (default 20)");
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
    // The last taken, by time: at-peak and growth snapshots are written at the end of the capture
    // (deferred), after the records of snapshots taken later, so neither file order nor index
    // order is what is meant.
    auto list = snapshot::list_snapshots(*reader);
    const snapshot::SnapshotInfo *pick = nullptr;
    bool trigger_known = a.snapshot_trigger.empty();
    for (const auto &s : list) {
      if (!a.snapshot_trigger.empty() && a.snapshot_trigger != snapshot::trigger_name(s.trigger)) continue;
      trigger_known = true;
      if (s.have_end && s.end.complete() && (!pick || s.time_ns >= pick->time_ns)) pick = &s;
    }
    if (pick) index = int(pick->index);
    if (!pick && !a.snapshot_trigger.empty()) {
      print_error("%s has no complete %s snapshot%s; `heapsnap snapshots %s` lists them", a.file.c_str(),
                  a.snapshot_trigger.c_str(), trigger_known ? " (only incomplete ones)" : "", a.file.c_str());
      return false;
    }
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
