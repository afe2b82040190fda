#!/usr/bin/env python3
"""RSS explained (issue 32): `heapsnap memory` on tests/programs/memory_app.c, whose modes each make
one situation on purpose and print what the program itself knows. In every case the parts add up
to the RSS in the record exactly, and that RSS is the kernel's VmRSS within 1%; then:

- arenas: 6 threads each allocate in an arena of their own and free 3 blocks of 4: one thread arena
  per thread, each with its live and freed bytes; "too many arenas" and "fragmentation" diagnosed.
- fragment: 200,000 blocks of 256 bytes, every other one freed: live and free parts as the program
  counts them; "fragmentation" diagnosed.
- trim: 64 MiB freed at the end of the brk heap with M_TRIM_THRESHOLD raised: a top chunk of at
  least that, malloc_trim would return it; "freed but not returned" diagnosed.
- stacks: 4 threads with 32 MiB stacks touched 4 MiB deep: their stacks' touched part and size;
  "stacks much bigger than used" diagnosed.
- mmaps: the program's own mappings, touched: the program's anonymous part holds them.
- rss_over_time: the coarse RSS parts the writer reads from smaps_rollup (one flush in 10): with the
  program waiting on stdin until `heapsnap timeline` on the growing capture shows 4 of them (no
  sleep of a fixed length), every point's parts add up to its RSS, anonymous <= RSS, the heap part
  holds the program's live bytes, heapsnap's own is shown apart; the text table prints them.
- caches: 100 freed blocks of 64 and of 200 bytes between live ones, in the main arena: its tcache
  holds 7 chunks of each size at least (and its struct), its fastbins the other 93 of 80 bytes at
  least, and the 200-byte ones are in the bins as free chunks; tcache and fastbins are within the
  cached part, and the table shows the columns.
- threads: the tracer's own small mappings are heapsnap's, not the program's: mimalloc maps its
  thread data (8 KiB) for each thread the tracer serves, and the kernel merges those mappings with
  one another and with the loader's; the program's anonymous part of 16 threads that each allocate
  a block is that of 2 such threads (it was 14 x 8 KiB more), heapsnap's part holds the difference.
- skew: the breakdown is of the fork, though the child reads smaps later while the program runs
  on: with the test hook HEAPSNAP_TEST_CHILD_HANDSHAKE the program touches 192 MiB (128 MiB mapped
  before the fork, 64 MiB after) once the child has forked and before it reads; the client
  snapshot's parts hold none of it (they sum far below the VmRSS read after the touch), its record
  counts it as changed since the fork; the exit snapshot's parts hold all of it.
- fallbacks: the paths this kernel may never take give the same breakdown. memory_app's arenas and
  mmaps modes, each recorded three ways: as the kernel allows (PAGEMAP_SCAN of the child's image and
  of the program's pagemap, Linux 6.7+), with HEAPSNAP_TEST_NO_PAGEMAP_SCAN=1 (as before 6.7: both
  smaps read) and with HEAPSNAP_TEST_REFUSE_SCAN_GUARD=1 (PAGE_IS_GUARD refused, as 6.7-6.13 do:
  the scans ask again without it). HEAPSNAP_DEBUG=1's line says which path each took; every run's
  parts add up to its VmRSS within 1%, and each of the program's parts is the default run's within
  256 KiB + 2% (the file-backed ones move by some 64 KiB from run to run); heapsnap's own part is
  not compared: it moves by up to 4 MiB from run to run whatever the path (19.5 and 23.9 MB seen by
  the same path; not looked into).
- hugetlb: a private and a shared MAP_HUGETLB page, written: VmRSS leaves hugetlb pages out (as
  smaps' Rss does), PAGEMAP_SCAN reports them as present; the parts still add up to VmRSS within
  1%, by the default path and the smaps one, and the mappings are in the mapped size. Skipped where
  no huge page can be had (/proc/sys/vm/nr_hugepages 0: the test never changes it).
- missing: a snapshot without the record (synth_capture writes one, as a capture from before
  format 3.3 is) says so and exits 1, never a table of zeros; no snapshot, a wrong index too.

Bounds are from what the program wrote (pages it touched itself), never from THP or zero-page
behaviour: resident figures are checked from below by what was touched, from above by what was
mapped.

usage: memory_cases.py CASE --heapsnap BIN --programs DIR --workdir DIR
"""
import json
import os
import subprocess
import time

import casekit
from casekit import check, fail

MiB = 1 << 20


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


def record(a, mode, env=None):
    out = os.path.join(a.workdir, mode + ".hsnap")
    for f in os.listdir(a.workdir):
        if f.startswith(mode + ".hsnap"):
            os.unlink(os.path.join(a.workdir, f))
    r = run([a.heapsnap, "record", "-q", "--snapshot-at-exit", "-o", out, "--",
             os.path.join(a.programs, "memory_app"), mode], env=env)
    check(r.returncode == 0 and os.path.exists(out), "%s: recorded (%s)" % (mode, r.stderr[-300:]))
    truth = {}
    for line in r.stdout.splitlines():
        k, v = line.split()
        truth[k] = int(v)
    return out, truth


def memory(a, path, snapshot=None, vm_rss_check=True):
    which = ["--snapshot", str(snapshot)] if snapshot is not None else []
    r = run([a.heapsnap, "memory", "--json"] + which + [path])
    if r.returncode != 0:
        fail("heapsnap memory --json %s: exit %d: %s" % (path, r.returncode, r.stderr[-500:]))
    d = json.loads(r.stdout)
    parts = {p["kind"]: p for p in d["parts"]}
    total = sum(p["rss_bytes"] for p in d["parts"])
    check(total == d["rss_bytes"], "the parts add up to the RSS of the record: %d = %d" % (total, d["rss_bytes"]))
    vm = d["vm_rss_bytes"]
    if vm_rss_check:  # (the program stood still from the fork to the read: at exit, it waits for the child)
        check(vm > 0 and abs(total - vm) <= vm / 100,
              "... which is the kernel's VmRSS within 1%%: %d vs %d (%.2f%%)" % (total, vm, 100.0 * abs(total - vm) / vm))
    r = run([a.heapsnap, "memory"] + which + [path])
    check(r.returncode == 0 and "of RSS" in r.stdout and "\nsum " in r.stdout, "the table prints, with its sum")
    d["table"] = r.stdout
    d["by_kind"] = lambda k: parts.get(k, {"rss_bytes": 0, "size_bytes": 0})
    return d


def diagnosis(d, ident):
    for x in d["diagnoses"]:
        if x["id"] == ident:
            return x
    return None


def case_arenas(a):
    path, t = record(a, "arenas")
    d = memory(a, path)
    threads = t["threads"]
    thread_arenas = [x for x in d["arenas"] if not x["main"]]
    check(len(thread_arenas) >= threads, "one thread arena per thread at least: %d for %d threads" % (len(thread_arenas), threads))
    full = [x for x in thread_arenas if x["live_bytes"] >= t["live_per_thread"]]
    check(len(full) >= threads, "%d arenas hold a thread's %d live bytes (%s)" %
          (len(full), t["live_per_thread"], [x["live_bytes"] for x in thread_arenas]))
    for x in full:
        # Freed 4 KiB blocks between live ones coalesce in threes: free, in the bins (not trimmed:
        # glibc trims only a thread heap's top).
        if not (x["free_bytes"] >= t["freed_per_thread"] * 0.95 and x["free_rss"] >= t["freed_per_thread"] * 0.95):
            fail("a thread arena's free chunks hold what its thread freed (%d): %s" % (t["freed_per_thread"], x))
        if not x["complete"]:
            fail("a thread arena walked to its end: %s" % x)
    print("ok: each thread's arena holds its freed bytes as free chunks, resident")
    live = d["by_kind"]("heap_live")["rss_bytes"]
    check(live >= threads * t["live_per_thread"], "heap live part: %d >= %d" % (live, threads * t["live_per_thread"]))
    x = diagnosis(d, "arenas")
    check(x is not None and x["bytes"] >= (threads - 1) * t["freed_per_thread"] * 0.9,
          "too many arenas diagnosed, saving about the other arenas' slack: %s" % (x and x["text"]))
    check(diagnosis(d, "fragmentation") is not None, "fragmentation diagnosed")
    check("MALLOC_ARENA_MAX" in d["table"], "the table names MALLOC_ARENA_MAX")


def case_fragment(a):
    path, t = record(a, "fragment")
    d = memory(a, path)
    live = d["by_kind"]("heap_live")
    free = d["by_kind"]("heap_free")
    check(t["live_bytes"] <= live["size_bytes"] <= t["live_bytes"] + 1 * MiB,
          "heap live bytes: what the program keeps, %d (%d)" % (t["live_bytes"], live["size_bytes"]))
    check(live["rss_bytes"] >= t["live_bytes"] * 0.99, "... all resident (%d)" % live["rss_bytes"])
    # Each freed 256-byte block is a 272-byte chunk between two live ones (tcache keeps 7).
    check(free["rss_bytes"] >= t["freed_bytes"] * 0.99, "heap free part holds the freed blocks: %d >= %d" % (free["rss_bytes"], t["freed_bytes"]))
    main = [x for x in d["arenas"] if x["main"]]
    check(len(main) == 1 and main[0]["free_chunks"] >= 99000 and main[0]["complete"],
          "the main arena has the 100,000 holes as free chunks (%s)" % (main and main[0]["free_chunks"]))
    x = diagnosis(d, "fragmentation")
    check(x is not None and x["bytes"] >= t["freed_bytes"], "fragmentation diagnosed with the free bytes: %s" % (x and x["text"]))
    check(diagnosis(d, "not_returned") is None or diagnosis(d, "not_returned")["bytes"] < 2 * MiB,
          "holes smaller than a page: little for malloc_trim")


def case_trim(a):
    path, t = record(a, "trim")
    d = memory(a, path)
    top = d["by_kind"]("heap_top")
    check(top["rss_bytes"] >= t["freed_bytes"] * 0.99, "heap top part: the freed %d, resident (%d)" % (t["freed_bytes"], top["rss_bytes"]))
    main = [x for x in d["arenas"] if x["main"]][0]
    check(main["trimmable_bytes"] >= t["freed_bytes"] - 2 * MiB,
          "malloc_trim would return about what was freed: %d (%d)" % (main["trimmable_bytes"], t["freed_bytes"]))
    x = diagnosis(d, "not_returned")
    check(x is not None and x["bytes"] >= t["freed_bytes"] - 2 * MiB and "M_TRIM_THRESHOLD" in x["text"],
          "freed but not returned diagnosed, naming M_TRIM_THRESHOLD: %s" % (x and x["text"]))


def case_stacks(a):
    path, t = record(a, "stacks")
    d = memory(a, path)
    big = [s for s in d["stacks"] if s["size_bytes"] >= t["stack_size"]]
    check(len(big) == t["threads"], "%d stacks of %d bytes (%s)" % (t["threads"], t["stack_size"], d["stacks"]))
    for s in big:
        if not (s["rss_bytes"] >= t["stack_touched"] and s["used_bytes"] and s["used_bytes"] < t["stack_touched"] / 4):
            fail("a stack shows what was touched (%d) and little in use: %s" % (t["stack_touched"], s))
    print("ok: every big stack's touched part is at least the %d bytes touched, in use far less" % t["stack_touched"])
    part = d["by_kind"]("thread_stacks")["rss_bytes"]
    check(part >= t["threads"] * t["stack_touched"], "thread stacks part: %d >= %d" % (part, t["threads"] * t["stack_touched"]))
    x = diagnosis(d, "stacks")
    check(x is not None and x["bytes"] >= t["threads"] * t["stack_touched"] * 0.9, "stacks much bigger than used diagnosed: %s" % (x and x["text"]))


def case_mmaps(a):
    path, t = record(a, "mmaps")
    d = memory(a, path)
    anon = d["by_kind"]("program_anonymous")
    check(anon["rss_bytes"] >= t["touched_bytes"], "program anonymous part: the %d bytes touched (%d)" % (t["touched_bytes"], anon["rss_bytes"]))
    check(anon["size_bytes"] >= t["mapped_bytes"], "... of the %d mapped (%d)" % (t["mapped_bytes"], anon["size_bytes"]))
    check(anon["rss_bytes"] <= t["mapped_bytes"] + 8 * MiB, "... and not more than what it mapped, and a little")
    hs = d["by_kind"]("heapsnap")
    check(hs["rss_bytes"] > 0, "heapsnap's own memory shown apart: %d" % hs["rss_bytes"])


def case_caches(a):
    path, t = record(a, "caches")
    d = memory(a, path)
    main = [x for x in d["arenas"] if x["main"]]
    check(len(main) == 1, "one main arena")
    m = main[0]
    n, per = t["freed_per_size"], t["tcache_per_size"]
    tc_min = per * (t["small_chunk"] + t["mid_chunk"])
    check(m["tcache_chunks"] >= 2 * per + 1 and m["tcache_bytes"] >= tc_min + 576,
          "the main thread's tcache: 7 chunks of each size and its struct (%d chunks, %d bytes; want %d and %d)" %
          (m["tcache_chunks"], m["tcache_bytes"], 2 * per + 1, tc_min + 576))
    fb = (n - per) * t["small_chunk"]
    check(m["fastbin_chunks"] >= n - per and m["fastbin_bytes"] >= fb and m["fastbin_rss"] >= fb,
          "the fastbins: the other %d chunks of %d bytes, resident (%d chunks, %d bytes, %d resident)" %
          (n - per, t["small_chunk"], m["fastbin_chunks"], m["fastbin_bytes"], m["fastbin_rss"]))
    check(m["free_bytes"] >= (n - per) * t["mid_chunk"], "the 200-byte ones freed into the bins: %d" % m["free_bytes"])
    check(m["tcache_bytes"] + m["fastbin_bytes"] <= m["cached_bytes"] and
          m["tcache_chunks"] + m["fastbin_chunks"] <= m["cached_chunks"], "tcache and fastbins are within the cached chunks: %s" % m)
    check(" tcache " in d["table"] and " fastbins " in d["table"], "the arena table has tcache and fastbins columns")


def case_threads(a):
    few_path, few_t = record(a, "threads2")
    many_path, many_t = record(a, "threads16")
    few, many = memory(a, few_path), memory(a, many_path)
    extra = many_t["threads"] - few_t["threads"]
    anon_few = few["by_kind"]("program_anonymous")["rss_bytes"]
    anon_many = many["by_kind"]("program_anonymous")["rss_bytes"]
    # The program maps nothing per thread but its stack (thread stacks) and glibc's arenas (heap).
    check(anon_many <= anon_few + 16 * 1024,
          "the program's anonymous part does not grow with the threads the tracer serves: %d threads %d, %d threads %d "
          "(the tracer maps 8 KiB for each: %d more would be its)" % (few_t["threads"], anon_few, many_t["threads"], anon_many,
                                                                  extra * 8192))
    hs_few, hs_many = few["by_kind"]("heapsnap")["rss_bytes"], many["by_kind"]("heapsnap")["rss_bytes"]
    check(hs_many >= hs_few + extra * 4096, "heapsnap's own part does: %d -> %d" % (hs_few, hs_many))


def case_skew(a):
    hook = os.path.join(a.workdir, "skew-handshake")
    os.makedirs(hook, exist_ok=True)
    for f in os.listdir(hook):
        os.unlink(os.path.join(hook, f))
    path, t = record(a, "skew", env=dict(os.environ, HEAPSNAP_TEST_CHILD_HANDSHAKE=hook))
    touched = t["touched_after_fork"]
    d = memory(a, path, snapshot="client", vm_rss_check=False)
    # The hook orders it: the program touched all of it before the child read either smaps, so the
    # VmRSS read beside the program's smaps holds it; the fork's figures must not.
    check(d["vm_rss_bytes"] >= d["rss_bytes"] + touched * 0.9,
          "the client snapshot's parts leave out the %d bytes touched after the fork: RSS %d, VmRSS read after %d" %
          (touched, d["rss_bytes"], d["vm_rss_bytes"]))
    anon = d["by_kind"]("program_anonymous")
    check(anon["rss_bytes"] < touched / 8, "... its program anonymous part holds none of them (%d)" % anon["rss_bytes"])
    check(anon["size_bytes"] >= 128 * MiB, "... though the 128 MiB mapped before the fork is in its mapped size (%d)" % anon["size_bytes"])
    check(d["unmatched_bytes"] >= touched * 0.9, "the record counts them as changed since the fork: %d" % d["unmatched_bytes"])
    check("changed in the program" in d["table"], "the table says what changed since the fork")
    e = memory(a, path, snapshot="exit")
    anon = e["by_kind"]("program_anonymous")
    check(anon["rss_bytes"] >= touched, "the exit snapshot's program anonymous part holds them: %d >= %d" % (anon["rss_bytes"], touched))


def timeline_json(a, path):
    r = run([a.heapsnap, "timeline", "--json", path])
    try:
        return json.loads(r.stdout)
    except ValueError:
        return None  # (the capture's first frame not written yet)


def case_rss_over_time(a):
    out = os.path.join(a.workdir, "rss_over_time.hsnap")
    if os.path.exists(out):
        os.unlink(out)
    want = 4
    p = subprocess.Popen([a.heapsnap, "record", "-q", "-o", out, "--", os.path.join(a.programs, "memory_app"), "fragment", "wait"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Poll the capture as it grows (a cut-off file reads up to its last whole frame) until the
    # writer has made `want` points: however slow the machine, the run is as long as it needs.
    deadline = time.monotonic() + 240
    seen = 0
    while time.monotonic() < deadline and p.poll() is None:
        d = os.path.exists(out) and timeline_json(a, out)
        seen = len(d["rss_parts"]) if d else 0
        if seen >= want:
            break
        time.sleep(0.2)
    stdout, stderr = p.communicate(input="x", timeout=120)
    check(p.returncode == 0 and seen >= want, "recorded while %d RSS points were written (%d seen; %s)" % (want, seen, stderr[-300:]))
    truth = dict((k, int(v)) for k, v in (line.split() for line in stdout.splitlines()))
    d = timeline_json(a, out)
    pts = d["rss_parts"]
    check(len(pts) >= want, "the finished capture has them: %d points" % len(pts))
    for q in pts:
        total = q["heap_bytes"] + q["heapsnap_bytes"] + q["other_anonymous_bytes"] + q["file_bytes"]
        if total != q["rss_bytes"] or q["clamped"]:
            fail("a point's parts add up to its RSS, unclamped: %s (sum %d)" % (q, total))
        anon = q["rss_bytes"] - q["file_bytes"]
        if not (0 < anon <= q["rss_bytes"] and q["shmem_bytes"] <= q["file_bytes"] and q["file_bytes"] > 0):
            fail("anonymous <= rss, shmem within the file-backed part, code resident: %s" % q)
    print("ok: %d points, each heap + heapsnap + other anonymous + file-backed = rss" % len(pts))
    times = [q["time_s"] for q in pts]
    check(times == sorted(times) and len(set(times)) == len(times), "in time order, one per period")
    last = pts[-1]
    check(last["heap_bytes"] >= truth["live_bytes"], "the heap part holds the live bytes once made: %d >= %d" % (last["heap_bytes"], truth["live_bytes"]))
    check(last["heapsnap_bytes"] > 0, "heapsnap's own shown apart: %d" % last["heapsnap_bytes"])
    check(max(q["cost_ns"] for q in pts) < 1e9, "each read's cost is recorded (max %d ns)" % max(q["cost_ns"] for q in pts))
    r = run([a.heapsnap, "timeline", out])
    check(r.returncode == 0 and "rss parts over time" in r.stdout and "heapsnap" in r.stdout, "the text timeline shows the parts")


def case_fallbacks(a):
    ways = [("default", {}), ("no PAGEMAP_SCAN", {"HEAPSNAP_TEST_NO_PAGEMAP_SCAN": "1"}),
            ("PAGE_IS_GUARD refused", {"HEAPSNAP_TEST_REFUSE_SCAN_GUARD": "1"})]
    for mode in ("arenas", "mmaps"):
        parts = {}
        for name, hook in ways:
            env = dict(os.environ, HEAPSNAP_DEBUG="1", **hook)
            out = os.path.join(a.workdir, "fallbacks-%s.hsnap" % mode)
            for f in os.listdir(a.workdir):
                if f.startswith(os.path.basename(out)):
                    os.unlink(os.path.join(a.workdir, f))
            r = run([a.heapsnap, "record", "-q", "--snapshot-at-exit", "-o", out, "--",
                     os.path.join(a.programs, "memory_app"), mode], env=env)
            if r.returncode != 0 or not os.path.exists(out):
                fail("%s, %s: not recorded: %s" % (mode, name, r.stderr[-300:]))
            lines = [x for x in r.stderr.splitlines() if x.startswith("heapsnap: memory breakdown")]
            if len(lines) != 1:
                fail("%s, %s: no HEAPSNAP_DEBUG=1 line on how the breakdown was read: %r" % (mode, name, r.stderr[-500:]))
            how = lines[0].split("; ", 1)[1]
            if name == "default" and "own figures from smaps" in how:
                print("note: this kernel has no PAGEMAP_SCAN: the default is the smaps path already")
            if name == "no PAGEMAP_SCAN":
                check("own figures from smaps, the program's from smaps" in how, "%s, %s: both smaps read (%s)" % (mode, name, how))
            if name == "PAGE_IS_GUARD refused":
                check("own figures from pagemap, the program's from maps and pagemap" in how and "PAGE_IS_GUARD refused" in how,
                      "%s, %s: both pagemaps scanned, without PAGE_IS_GUARD after the refusal (%s)" % (mode, name, how))
            d = memory(a, out)  # (the parts add up to the record's RSS, and that is VmRSS within 1%)
            parts[name] = dict((p["kind"], p["rss_bytes"]) for p in d["parts"])
            print("ok: %s, %s: %s; RSS %d, VmRSS %d" % (mode, name, how, d["rss_bytes"], d["vm_rss_bytes"]))
        base = parts["default"]
        for name, _ in ways[1:]:
            for kind in (set(base) | set(parts[name])) - {"heapsnap"}:
                x, y = base.get(kind, 0), parts[name].get(kind, 0)
                check(abs(x - y) <= 256 * 1024 + 0.02 * max(x, y),
                      "%s, %s: part %s as by default: %d vs %d" % (mode, name, kind, y, x))
        print("ok: %s: the same parts by all three paths" % mode)


def case_hugetlb(a):
    for name, hook in (("default", {}), ("no PAGEMAP_SCAN", {"HEAPSNAP_TEST_NO_PAGEMAP_SCAN": "1"})):
        path, t = record(a, "hugetlb", env=dict(os.environ, **hook))
        if "hugetlb_unavailable" in t:
            with open("/proc/sys/vm/nr_hugepages") as f:
                have = f.read().strip()
            casekit.skip("no hugetlb page to be had (errno %d; /proc/sys/vm/nr_hugepages is %s: as root, "
                         "echo 2 > /proc/sys/vm/nr_hugepages to run this)" % (t["hugetlb_unavailable"], have))
        d = memory(a, path)  # (the parts add up to VmRSS within 1%: huge pages counted would be 4 MiB over)
        # ("/anon_hugepage (deleted)" in the maps: a file mapping's name)
        files = d["by_kind"]("mapped_files")
        check(files["size_bytes"] >= t["hugetlb_bytes"],
              "%s: the hugetlb mappings are mapped files' mapped size (%d)" % (name, files["size_bytes"]))
        check(files["rss_bytes"] < t["hugetlb_bytes"] / 2,
              "%s: ... and not their resident part (%d for %d hugetlb bytes)" % (name, files["rss_bytes"], t["hugetlb_bytes"]))


def case_missing(a):
    # A snapshot without the record: synth_capture writes one (as a capture from before format 3.3).
    synth = os.path.join(a.workdir, "synth.hsnap")
    if os.path.exists(synth):
        os.unlink(synth)
    r = run([os.path.join(a.programs, "synth_capture"), "100", "list", synth, "1"])
    check(r.returncode == 0, "synth_capture writes a capture with a snapshot and no memory record (%s)" % r.stderr)
    r = run([a.heapsnap, "memory", synth])
    check(r.returncode == 1 and "no memory breakdown" in r.stderr and not r.stdout,
          "exit 1 saying the snapshot has no breakdown, no table of zeros (%r)" % r.stderr)
    r = run([a.heapsnap, "memory", "--json", synth])
    check(r.returncode == 1 and not r.stdout, "--json too: exit 1, nothing on stdout")
    # No snapshot at all.
    out = os.path.join(a.workdir, "nosnap.hsnap")
    if os.path.exists(out):
        os.unlink(out)
    r = run([a.heapsnap, "record", "-q", "-o", out, "--", os.path.join(a.programs, "memory_app"), "fragment"])
    check(r.returncode == 0, "recorded without snapshots")
    r = run([a.heapsnap, "memory", out])
    check(r.returncode == 1 and "no complete snapshot" in r.stderr and not r.stdout,
          "no snapshot: exit 1 with a message (%r)" % r.stderr)
    r = run([a.heapsnap, "memory", "--snapshot", "7", synth])
    check(r.returncode == 1 and "no snapshot 7" in r.stderr, "a snapshot that is not there: exit 1 (%r)" % r.stderr)
    r = run([a.heapsnap, "memory", "--snapshot", "bogus", synth])
    check(r.returncode == 2, "a bad --snapshot is a usage error (exit 2)")
    # A damaged record: its parts do not add up. Made by flipping the RSS figure is not possible
    # without a writer; the analyzer's checks are unit-tested in tests/unit/memory_record_test.cc.


if __name__ == "__main__":
    casekit.main(globals(), ["--heapsnap", "--programs"])
