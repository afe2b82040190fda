// The analyzer's reading of SnapshotMemory (analyzer/memory/memory_breakdown.h): captures are
// untrusted, so a record whose figures do not hold together is refused with the frame's offset;
// a snapshot without one says so; and the diagnoses carry their numbers.
#include "memory/memory_breakdown.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <string>

#include "capture/capture_file_writer.h"

using namespace heapsnap;

namespace {

std::string temp_path(const char *name) { return "/tmp/heapsnap_memory_test_" + std::to_string(getpid()) + "_" + name; }

wire::SnapshotMemory good_record() {
  wire::SnapshotMemory m;
  m.set_index(0);
  m.set_rss_bytes(100 << 20);
  m.set_vm_rss_bytes(100 << 20);
  m.set_threads(3);
  auto part = [&](wire::MemoryKind k, uint64_t rss) {
    auto *p = m.add_parts();
    p->set_kind(k);
    p->set_rss(rss);
    p->set_size(rss);
  };
  part(wire::MEM_HEAP_LIVE, 20 << 20);
  part(wire::MEM_HEAP_FREE, 50 << 20);
  part(wire::MEM_HEAP_TOP, 10 << 20);
  part(wire::MEM_CODE, 20 << 20);
  auto *a = m.add_arenas();
  a->set_main(true);
  a->set_size(100 << 20);
  a->set_live_bytes(20 << 20);
  a->set_live_rss(20 << 20);
  a->set_free_bytes(30 << 20);
  a->set_free_rss(30 << 20);
  a->set_free_chunks(1000);
  a->set_top_bytes(10 << 20);
  a->set_top_rss(10 << 20);
  a->set_trimmable(12 << 20);
  for (int i = 0; i < 2; ++i) {
    auto *t = m.add_arenas();
    t->set_size(64 << 20);
    t->set_free_bytes(10 << 20);
    t->set_free_rss(10 << 20);
  }
  return m;
}

std::string write(const char *name, const wire::SnapshotMemory &m) {
  std::string path = temp_path(name);
  capture::CaptureFileWriter w(path, 3, 3);
  wire::Record r;
  r.mutable_process()->set_pid(1);
  w.add(r);
  wire::Record mr;
  *mr.mutable_snapshot_memory() = m;
  w.add(mr);
  CHECK(w.close());
  return path;
}

bool load(const std::string &path, memory::Breakdown *b, std::string *err, bool *missing, uint32_t index = 0) {
  std::string open_err;
  auto reader = capture::CaptureReader::open(path, &open_err);
  REQUIRE(reader);
  return memory::load_breakdown(*reader, index, b, err, missing);
}

}  // namespace

TEST_CASE("memory record: read back, with diagnoses that carry their numbers") {
  std::string path = write("good", good_record());
  memory::Breakdown b;
  std::string err;
  bool missing = true;
  REQUIRE(load(path, &b, &err, &missing));
  CHECK_FALSE(missing);
  CHECK(b.rss == 100u << 20);
  CHECK(b.part(wire::MEM_HEAP_FREE) == 50u << 20);
  CHECK(b.arenas.size() == 3);
  auto d = memory::diagnose(b);
  bool frag = false, trim = false, arenas = false;
  for (const auto &x : d) {
    if (x.id == "fragmentation") frag = x.bytes == 50u << 20 && x.text.find("50.00 MiB") != std::string::npos;
    if (x.id == "not_returned") trim = x.bytes == 12u << 20;
    if (x.id == "arenas") arenas = x.bytes == 10u << 20;  // two thread arenas of 10 MiB slack: one would go
  }
  CHECK(frag);
  CHECK(trim);
  CHECK(arenas);
  SUBCASE("another snapshot's index: missing") {
    memory::Breakdown b2;
    CHECK_FALSE(load(path, &b2, &err, &missing, 5));
    CHECK(missing);
    CHECK(err.find("no memory breakdown") != std::string::npos);
  }
  unlink(path.c_str());
}

TEST_CASE("memory record: figures that do not hold together are refused, naming the offset") {
  wire::SnapshotMemory m = good_record();
  SUBCASE("parts that do not add up to the RSS") { m.mutable_parts(0)->set_rss(1); }
  SUBCASE("an unknown kind") { m.mutable_parts(1)->set_kind(wire::MemoryKind(99)); }
  SUBCASE("a kind twice") { m.mutable_parts(1)->set_kind(wire::MEM_HEAP_LIVE); }
  SUBCASE("an arena with more resident than bytes") { m.mutable_arenas(0)->set_top_rss(1ull << 40); }
  SUBCASE("an arena whose parts exceed its size") { m.mutable_arenas(1)->set_size(1); }
  SUBCASE("a stack with more resident than its size") {
    auto *s = m.add_stacks();
    s->set_size(4096);
    s->set_rss(8192);
  }
  std::string path = write("bad", m);
  memory::Breakdown b;
  std::string err;
  bool missing = true;
  CHECK_FALSE(load(path, &b, &err, &missing));
  CHECK_FALSE(missing);
  CHECK(err.find("frame at offset 0x") != std::string::npos);
  unlink(path.c_str());
}
