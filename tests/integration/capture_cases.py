#!/usr/bin/env python3
"""Integration tests of `heapsnap record` + `heapsnap summary` on programs with known allocations.

Each case runs a test program natively and under the shim for two sizes N1 < N2. The traced run
must print the same bytes and exit the same way as the native one, and the difference between
the two traced runs' exact totals must be exactly what the program's code does (the C runtime's
own allocations are the same in both runs and cancel out).

usage: capture_cases.py CASE --heapsnap BIN --c-prog PROG --cxx-prog PROG --workdir DIR
Exit status: 0 pass, 1 fail, 77 skipped (meson's convention).
"""
import json
import os
import shutil
import subprocess
import sys
import time

import casekit
from casekit import fail, check, flush_hash

N1, N2 = 1000, 3000


class Runner:
    def __init__(self, a):
        self.a = a
        self.work = a.workdir
        os.makedirs(self.work, exist_ok=True)

    def native(self, prog, *args):
        return subprocess.run([prog, *map(str, args)], capture_output=True, timeout=120)

    def record(self, name, prog, *args, sample="1", extra=(), env=None):
        out = os.path.join(self.work, name + ".hsnap")
        for f in os.listdir(self.work):
            if f.startswith(name + ".hsnap"):
                os.unlink(os.path.join(self.work, f))
        cmd = [self.a.heapsnap, "record", "-q", "-o", out, "--sample-bytes", sample, *extra, "--",
               prog, *map(str, args)]
        r = subprocess.run(cmd, capture_output=True, timeout=300, env=dict(os.environ, **env) if env else None)
        return r, out

    def summary(self, path):
        r = subprocess.run([self.a.heapsnap, "summary", "--json", path], capture_output=True,
                           timeout=120)
        if r.returncode != 0:
            fail("summary %s failed: %s" % (path, r.stderr.decode()))
        return json.loads(r.stdout)

    def same_behaviour(self, prog, *args, sample="1"):
        nat = self.native(prog, *args)
        tr, path = self.record("same-" + os.path.basename(prog) + "-" + "-".join(map(str, args)),
                               prog, *args, sample=sample)
        check(tr.stdout == nat.stdout, "%s %s: traced stdout equals native" % (os.path.basename(prog), args))
        check(tr.stderr == nat.stderr, "%s %s: traced stderr equals native" % (os.path.basename(prog), args))
        check(tr.returncode == nat.returncode,
              "%s %s: exit status %d equals native %d" % (os.path.basename(prog), args, tr.returncode, nat.returncode))
        return path

    def delta(self, prog, mode, sample="1"):
        s = []
        for n in (N1, N2):
            r, path = self.record("%s-%s-%d-%s" % (os.path.basename(prog), mode, n, sample), prog, mode, n,
                                  sample=sample)
            if r.returncode != 0:
                fail("%s %s %d exited %d: %s" % (prog, mode, n, r.returncode, r.stderr.decode()))
            j = self.summary(path)
            check(not j["truncated"], "%s %d: capture complete (not truncated)" % (mode, n))
            check(j["problems"] == [], "%s %d: no reader problems" % (mode, n))
            s.append(j)
        return s[0], {k: (s[1][k] - s[0][k]) for k in s[0] if isinstance(s[0][k], (int, float)) and not isinstance(s[0][k], bool)}, s[1]


def size_sum(f):
    return sum(f(i) for i in range(N1, N2))


def case_malloc(r, a):
    for sample in ("1", "65536"):
        _, d, _ = r.delta(a.c_prog, "malloc", sample)
        check(d["alloc_calls"] == N2 - N1, "malloc (sample %s): alloc_calls delta %d == %d" % (sample, d["alloc_calls"], N2 - N1))
        check(d["free_calls"] == N2 - N1, "malloc: free_calls delta %d" % d["free_calls"])
        want = size_sum(lambda i: i % 100 + 1)
        check(d["bytes_allocated"] == want, "malloc: bytes_allocated delta %d == %d" % (d["bytes_allocated"], want))
        check(d["leaked_blocks"] == 0 and d["leaked_bytes"] == 0, "malloc: nothing more leaked")
        if sample == "1":
            check(d["sampled_allocs"] == N2 - N1, "every-allocation mode samples each malloc (%d)" % d["sampled_allocs"])
            check(d["sampled_frees"] == N2 - N1, "every-allocation mode records each free (%d)" % d["sampled_frees"])
    r.same_behaviour(a.c_prog, "malloc", 100)


def case_calloc(r, a):
    _, d, _ = r.delta(a.c_prog, "calloc")
    check(d["alloc_calls"] == N2 - N1, "calloc: alloc_calls delta")
    want = size_sum(lambda i: 3 * (i % 100 + 1))
    check(d["bytes_allocated"] == want, "calloc: bytes delta %d == %d" % (d["bytes_allocated"], want))


def case_realloc(r, a):
    _, d, last = r.delta(a.c_prog, "realloc")
    check(d["alloc_calls"] == N2 - N1, "realloc chain: alloc_calls delta %d" % d["alloc_calls"])
    check(d["free_calls"] == N2 - N1, "realloc chain: free_calls delta %d" % d["free_calls"])
    check(d["realloc_calls"] == N2 - N1, "realloc chain: realloc_calls delta %d" % d["realloc_calls"])
    want = size_sum(lambda i: 16 * (i + 1))
    check(d["bytes_allocated"] == want, "realloc chain: bytes delta %d == %d" % (d["bytes_allocated"], want))
    check(d["sampled_reallocs"] == N2 - N1, "realloc chain: sampled block keeps identity through %d reallocs" % d["sampled_reallocs"])
    check(d["leaked_blocks"] == 0, "realloc chain: nothing leaked")


def case_realloc_estimate(r, a):
    """Default sampling, buffers grown by realloc from small sizes: the sampled estimates of bytes
    allocated and leaked stay near the exact totals (a sampled block's weight follows its size;
    it kept its first small size's weight, ~4000 for 16 bytes, and estimates were 8-40x high)."""
    n = 64
    res, path = r.record("realloc-grow", a.c_prog, "realloc_grow", n, sample="65536")
    check(res.returncode == 0, "realloc_grow exits 0 (%s)" % res.stderr.decode())
    def query(cmd):
        q = subprocess.run([a.heapsnap, cmd, "--json", "-n", "1000", path], capture_output=True, timeout=120)
        if q.returncode != 0:
            fail("%s failed: %s" % (cmd, q.stderr.decode()))
        return json.loads(q.stdout)
    top = query("top-allocators")
    exact = top["exact"]
    est_bytes = sum(x["alloc_bytes"] for x in top["sites"])
    est_calls = sum(x["alloc_calls"] for x in top["sites"])
    print("bytes allocated: exact %d, estimated %.0f; calls: exact %d, estimated %.0f; leaked exact %d"
          % (exact["bytes_allocated"], est_bytes, exact["alloc_calls"], est_calls, exact["leaked_bytes"]))
    check(abs(est_bytes / exact["bytes_allocated"] - 1) < 0.25, "estimated bytes allocated within 25%% of exact (x%.2f)"
          % (est_bytes / exact["bytes_allocated"]))
    check(abs(est_calls / exact["alloc_calls"] - 1) < 0.5, "estimated allocation calls within 50%% of exact (x%.2f)"
          % (est_calls / exact["alloc_calls"]))
    leaked = sum(x["leaked_bytes"] for x in top["sites"])
    check(abs(leaked / exact["leaked_bytes"] - 1) < 0.25, "estimated leaked bytes within 25%% of exact (x%.2f)"
          % (leaked / exact["leaked_bytes"]))
    peak = sum(x["peak_bytes"] for x in top["sites"])
    check(peak <= 1.25 * exact["peak_heap_bytes"], "estimated bytes at the peak at most 25%% over the exact peak (x%.2f)"
          % (peak / exact["peak_heap_bytes"]))


def case_aligned(r, a):
    _, d, _ = r.delta(a.c_prog, "aligned")
    check(d["alloc_calls"] == 4 * (N2 - N1), "aligned: 4 allocations per round (%d)" % d["alloc_calls"])
    check(d["free_calls"] == 4 * (N2 - N1), "aligned: 4 frees per round")
    want = size_sum(lambda i: 3 * (i % 100 + 1) + 256)
    check(d["bytes_allocated"] == want, "aligned: bytes delta %d == %d" % (d["bytes_allocated"], want))
    r.same_behaviour(a.c_prog, "aligned", 10)


def case_leak(r, a):
    _, d, _ = r.delta(a.c_prog, "leak")
    check(d["leaked_blocks"] == N2 - N1, "leak: leaked_blocks delta %d" % d["leaked_blocks"])
    check(d["leaked_bytes"] == 100 * (N2 - N1), "leak: leaked_bytes delta %d" % d["leaked_bytes"])
    leaks_sampled(r, a)


def query_json(a, *args):
    q = subprocess.run([a.heapsnap, *args], capture_output=True, timeout=120)
    if q.returncode != 0:
        fail("%s failed: %s" % (" ".join(args), q.stderr.decode()))
    return json.loads(q.stdout)


def leaks_sampled(r, a):
    """Sampled leaks beside the exact total (issue 28: "66 KiB in 17 blocks" estimated beside an
    exact "5.38 KiB in 5 blocks"): the stacks split the exact total, which no estimated total shown
    beside it exceeds; the unscaled estimate stays in the JSON. (The sampling interval makes ~70
    of the 3,000 leaked blocks sampled: the split always has samples to come from.)"""
    tr, path = r.record("leak-sampled", a.c_prog, "leak", N2, sample="4096")
    check(tr.returncode == 0, "leak (sampled): exits 0")
    exact = r.summary(path)
    lk = query_json(a, "leaks", "--json", "-n", "1000", path)
    check(abs(lk["bytes"] - exact["leaked_bytes"]) < 1e-6 * exact["leaked_bytes"] + 1e-6,
          "leaks --json: bytes are the exact total (%.1f vs %d)" % (lk["bytes"], exact["leaked_bytes"]))
    check(abs(lk["blocks"] - exact["leaked_blocks"]) < 1e-6 * exact["leaked_blocks"] + 1e-6,
          "leaks --json: blocks are the exact total (%.2f vs %d)" % (lk["blocks"], exact["leaked_blocks"]))
    print("leaks: exact %d blocks, %d bytes; raw estimate %.1f blocks, %.0f bytes from %d sampled blocks"
          % (exact["leaked_blocks"], exact["leaked_bytes"], lk["raw_blocks"], lk["raw_bytes"], lk["sampled_blocks"]))
    check(lk["sampled_blocks"] > 0 and lk["scaled_to_exact"], "leaks: the split by stack is scaled from sampled blocks")
    check(abs(sum(x["bytes"] for x in lk["leaks"]) - lk["bytes"]) < 1e-6 * lk["bytes"] + 1e-6,
          "leaks --json: the stacks add up to the total")
    check(all(x["raw_bytes"] > 0 and x["raw_blocks"] >= 1 for x in lk["leaks"]), "leaks --json: each stack keeps its raw estimate")
    # The text: the total line is the exact total and says what its split comes from.
    t = subprocess.run([a.heapsnap, "leaks", "--bytes", path], capture_output=True, text=True, timeout=120).stdout
    total = [l for l in t.splitlines() if l.startswith("total")]
    check(len(total) == 1 and ("%d sampled block" % lk["sampled_blocks"]) in total[0]
          and total[0].replace(",", "").endswith(": %d in %d blocks" % (exact["leaked_bytes"], exact["leaked_blocks"])),
          "leaks: the total line is the exact total, split from %d sampled blocks (%s)" % (lk["sampled_blocks"], total))
    # top-allocators: its columns sit beside the exact totals too.
    top = query_json(a, "top-allocators", "--json", "--by", "leaked", "-n", "1000", path)
    for col, key in (("leaked_bytes", "leaked_bytes"), ("leaked_blocks", "leaked_blocks"),
                     ("alloc_bytes", "bytes_allocated"), ("alloc_calls", "alloc_calls")):
        got = sum(x[col] for x in top["sites"])
        check(abs(got - exact[key]) < 1e-6 * exact[key] + 1e-6, "top-allocators: the sites' %s add up to the exact %s (%.1f vs %d)"
              % (col, key, got, exact[key]))
    check(all("raw_estimate" in x for x in top["sites"]) and top["sampled_estimate"]["scaled_to_exact"],
          "top-allocators --json: raw estimates kept per site")


def case_peak(r, a):
    for sample in ("1", "65536"):
        _, d, _ = r.delta(a.c_prog, "peak", sample)
        want = 1008 * (N2 - N1)
        check(d["peak_heap_bytes"] == want, "peak (sample %s): peak delta %d == %d" % (sample, d["peak_heap_bytes"], want))


def case_excursion(r, a):
    for sample in ("1", "65536"):
        _, d, _ = r.delta(a.c_prog, "excursion", sample)
        check(d["peak_heap_bytes"] == 10 * (N2 - N1),
              "a small rise and fall still moves the exact peak (sample %s): %d" % (sample, d["peak_heap_bytes"]))


def case_threads(r, a):
    _, d, last = r.delta(a.c_prog, "threads")
    check(d["alloc_calls"] == 4 * (N2 - N1), "threads: alloc_calls delta %d" % d["alloc_calls"])
    check(d["free_calls"] == 4 * (N2 - N1), "threads: cross-thread frees counted (%d)" % d["free_calls"])
    check(d["leaked_blocks"] == 0, "threads: nothing leaked")
    check(last["threads"] == 5, "threads: main + 4 workers seen (%d)" % last["threads"])
    r.same_behaviour(a.c_prog, "threads", 100)
    threads_peak(r, a)


def threads_peak(r, a):
    """Eight threads each hold K*S bytes at the same moment, each under the shim's 256 KiB fold
    (tests/integration/threads_peak.c). Issue 28: one thread's share (K*S) was the peak, which
    `peak` called exact. The peak is 8*K*S above what main holds: two sizes, the difference is
    exact; summary and peak give the same figure and bounds, and neither calls it exact."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "threads_peak.c")
    exe = os.path.join(r.work, "threads_peak")
    c = subprocess.run(["cc", "-O1", "-fno-builtin", "-pthread", "-o", exe, src], capture_output=True, text=True)
    check(c.returncode == 0, "threads_peak.c builds (%s)" % c.stderr.strip())
    k, s1, s2, rounds = 10, 10000, 20000, 50  # 200,000 bytes a thread at most: no thread folds
    for sample in ("1", "65536"):
        peaks = []
        for size in (s1, s2):
            tr, path = r.record("threads-peak-%s-%d" % (sample, size), exe, k, size, rounds, sample=sample)
            check(tr.returncode == 0, "threads_peak %d (sample %s) exits 0 (%s)" % (size, sample, tr.stderr.decode()))
            j = r.summary(path)
            check(not j["truncated"] and j["problems"] == [], "threads_peak %d: capture complete" % size)
            peaks.append((j, path))
        (j1, _), (j2, path) = peaks
        d = j2["peak_heap_bytes"] - j1["peak_heap_bytes"]
        check(d == 8 * k * (s2 - s1), "threads_peak (sample %s): the peak grows by 8 threads' blocks: %d == %d"
              % (sample, d, 8 * k * (s2 - s1)))
        j = j2
        check(j["peak_heap_bytes"] >= 8 * k * s2, "the peak holds the 8 threads' blocks (%d)" % j["peak_heap_bytes"])
        check(not j.get("peak_exact", True), "several threads: the peak is not called exact")
        check(j["peak_heap_min_bytes"] <= j["peak_heap_bytes"] <= j["peak_heap_max_bytes"]
              and j["peak_heap_max_bytes"] >= 8 * k * s2, "the bounds hold the figure and the known maximum (%d..%d)"
              % (j["peak_heap_min_bytes"], j["peak_heap_max_bytes"]))
        p = query_json(a, "peak", "--json", path)["exact"]
        check(all(p[key] == j[key] for key in ("peak_heap_bytes", "peak_exact", "peak_heap_min_bytes", "peak_heap_max_bytes")),
              "peak --json and summary --json give the same peak and bounds (%s)" % p)
        text = subprocess.run([a.heapsnap, "summary", path], capture_output=True, text=True, timeout=120).stdout
        line = [l for l in text.splitlines() if l.strip().startswith("peak heap")]
        check(len(line) == 1, "summary has a peak line (%s)" % line)
        figure = line[0].strip()[len("peak heap"):].strip()
        top = subprocess.run([a.heapsnap, "peak", path], capture_output=True, text=True, timeout=120).stdout.splitlines()[1]
        check(top.startswith("peak " + figure) and "exact" not in top,
              "summary and peak print the same peak, not called exact (%r / %r)" % (figure, top))


def case_fork(r, a):
    counts = []
    for n in (N1, N2):
        tr, path = r.record("fork-%d" % n, a.c_prog, "fork", n)
        check(tr.returncode == 0, "fork: traced program exits 0")
        kids = [f for f in os.listdir(r.work) if f.startswith("fork-%d.hsnap." % n)]
        check(len(kids) == 1, "fork %d: the child wrote its own capture (%s)" % (n, kids))
        child = r.summary(os.path.join(r.work, kids[0]))
        parent = r.summary(path)
        check(child["fork_child"] and not parent["fork_child"], "fork: child capture is marked as such")
        check(child["pid"] != parent["pid"], "fork: child capture has the child's pid")
        counts.append((parent["alloc_calls"], child["alloc_calls"]))
    # Without -q, record names the child's capture after the program's (and no capture of an
    # earlier run: the N1 run's child capture is still in the directory, under another name).
    out = os.path.join(r.work, "fork-named.hsnap")
    for f in os.listdir(r.work):
        if f.startswith("fork-named.hsnap"):
            os.unlink(os.path.join(r.work, f))
    old_kid = out + ".1"
    with open(old_kid, "wb") as f:
        f.write(b"an older run's")
    os.utime(old_kid, (time.time() - 3600, time.time() - 3600))
    rec = subprocess.run([a.heapsnap, "record", "-f", "-o", out, "--", a.c_prog, "fork", str(N1)],
                         capture_output=True, timeout=300)
    err = rec.stderr.decode()
    kids = [f for f in os.listdir(r.work) if f.startswith("fork-named.hsnap.") and f != "fork-named.hsnap.1"]
    check(len(kids) == 1 and ("and 1 capture of processes it started: %s " % kids[0]) in err,
          "record names the child's capture %s on stderr: %r" % (kids, err))
    check("fork-named.hsnap.1 " not in err, "record does not name an older run's file: %r" % err)
    dp = counts[1][0] - counts[0][0]
    dc = counts[1][1] - counts[0][1]
    check(dp == N2 - N1, "fork: parent alloc_calls delta %d == %d" % (dp, N2 - N1))
    check(dc == 3 * (N2 - N1), "fork: child continues the parent's totals plus its own (%d)" % dc)


def case_fork_live(r, a):
    # The child frees blocks the parent allocated (and named, every allocation being sampled)
    # before the fork: its own capture must not name them, so its replay finds no free of a block
    # it never saw allocated, and the parent's replay sees all of its blocks freed.
    for sample in ("1", "64", "65536"):  # direct words (dense sampling) and the table
        name = "fork-live-" + sample
        tr, path = r.record(name, a.c_prog, "fork_live", N2, sample=sample)
        check(tr.returncode == 0, "fork_live %s: traced program exits 0" % sample)
        kids = [f for f in os.listdir(r.work) if f.startswith(name + ".hsnap.")]
        check(len(kids) == 1, "fork_live %s: the child wrote its own capture (%s)" % (sample, kids))
        for p in [path] + [os.path.join(r.work, k) for k in kids]:
            q = subprocess.run([a.heapsnap, "leaks", "--json", p], capture_output=True, timeout=120)
            check(q.returncode == 0, "fork_live %s: leaks %s: %s" % (sample, p, q.stderr.decode()))
            j = json.loads(q.stdout)
            check(j["problems"] == [], "fork_live %s: %s replays without problems: %s" % (sample, p, j["problems"]))


def case_mmap_threshold(r, a):
    # The shim's start-up probes of glibc's block layout include mmapped blocks: freeing them
    # must not raise glibc's dynamic mmap threshold (it did: python ran 1.24x slower traced).
    nat = r.native(a.c_prog, "mmap_threshold", 1)
    check(b"200000 mmap" in nat.stdout, "mmap_threshold: natively a 200 KB block is mmapped (%r)" % nat.stdout)
    for sample in ("1", "65536"):
        r.same_behaviour(a.c_prog, "mmap_threshold", 1, sample=sample)


def case_arenas(r, a):
    # The tracer's writer thread must not make glibc create a malloc arena for it.
    nat = r.native(a.c_prog, "arenas", 1)
    check(b"arenas 1\n" in nat.stdout, "arenas: natively one arena (%r)" % nat.stdout)
    for sample in ("1", "65536"):
        r.same_behaviour(a.c_prog, "arenas", 1, sample=sample)


def flush_ends(frame_bytes):
    """(FlushEnd records, how many match) in one frame's decompressed records (format 3.1)."""
    p, start, seen, good = 0, 0, 0, 0
    while p < len(frame_bytes):
        n, shift, q = 0, 0, p
        while q < len(frame_bytes):
            n |= (frame_bytes[q] & 0x7F) << shift
            shift += 7
            q += 1
            if not frame_bytes[q - 1] & 0x80:
                break
        body = frame_bytes[q:q + n]
        if len(body) < n:
            break
        if body[:2] == b"\x92\x01":
            seen += 1
            want = int.from_bytes(body[4:12], "little") if n == 12 else 0
            good += flush_hash(frame_bytes[start:p]) == want
            start = q + n
        p = q + n
    return seen, good


def case_killed(r, a):
    # With the tail guard (the default): the guard writes what the killed process had pending and
    # an end record that says how it ended. Exact: every allocation, every sampled event.
    tr, path = r.record("killed-guarded", a.c_prog, "killed", N2)
    check(tr.returncode == 128 + 9, "killed: record exits 128+9 (%d)" % tr.returncode)
    j = r.summary(path)
    check(not j["truncated"] and j["problems"] == [], "killed, guarded: the capture is complete (%s)" % j["problems"])
    check(j["end_reason"] == "salvaged: killed by signal 9 (SIGKILL)", "killed, guarded: the end says how (%r)" % j["end_reason"])
    check(j["leaked_blocks"] >= N2 and j["sampled_allocs"] >= N2, "killed, guarded: every allocation is there")
    # Without it (HEAPSNAP_TAIL_GUARD=0), the file a killed process leaves: cut in its open frame.
    tr, path = r.record("killed", a.c_prog, "killed", N2, env={"HEAPSNAP_TAIL_GUARD": "0"})
    check(tr.returncode == 128 + 9, "killed: record exits 128+9 (%d)" % tr.returncode)
    j = r.summary(path)
    check(j["truncated"], "killed: summary says truncated")
    check(j["alloc_calls"] >= N2, "killed: the flushed frames hold all %d allocations (%d)" % (N2, j["alloc_calls"]))
    check(j["sampled_allocs"] >= N2, "killed: sampled events before the kill are readable (%d)" % j["sampled_allocs"])
    # The last frame is open (the program slept through several flushes, then was killed): each
    # flush in it ends with a FlushEnd whose hash matches the flush's records (zstd -dc decodes
    # the open frame's blocks, then says the input ended).
    import damaged_cases as dc
    data = open(path, "rb").read()
    off, seen, good = dc.HEADER_SIZE, 0, 0
    while off < len(data):
        w = dc.walk_frame(data, off)
        size = w[0] if w else len(data) - off
        out = subprocess.run(["zstd", "-dc"], input=data[off:off + size], capture_output=True).stdout
        s_, g_ = flush_ends(out)
        seen, good = seen + s_, good + g_
        off += size
    check(seen >= 2 and good == seen, "killed: the open frame's flushes end with FlushEnd records whose hashes match (%d of %d)" % (good, seen))


def case_frames(r, a):
    # Records that reach the file in one flush (at exit: the periodic flush is pushed out of reach)
    # are cut into frames of at most 8 MiB of records (format 3's frame size), each a whole zstd
    # frame; the capture reads back whole.
    import damaged_cases as dc
    n = 2000000  # about 21 MB of records
    out = os.path.join(r.work, "frames.hsnap")
    for f in os.listdir(r.work):
        if f.startswith("frames.hsnap"):
            os.unlink(os.path.join(r.work, f))
    env = dict(os.environ, HEAPSNAP_FLUSH_MS="600000")
    tr = subprocess.run([a.heapsnap, "record", "-q", "-o", out, "--sample-bytes", "1", "--", a.c_prog, "malloc", str(n)],
                        capture_output=True, timeout=300, env=env)
    check(tr.returncode == 0, "frames: recorded (%s)" % tr.stderr.decode()[-300:])
    data = open(out, "rb").read()
    sizes = []
    for off, size in dc.frames_of(data)[1:]:
        raw = subprocess.run(["zstd", "-dc"], input=data[off:off + size], capture_output=True)
        check(raw.returncode == 0, "frames: the frame at %#x decompresses (zstd -dc)" % off)
        sizes.append(len(raw.stdout))
    big = [x for x in sizes if x > (4 << 20)]
    check(len(big) >= 2, "frames: the records were cut into frames (%s bytes each)" % sizes)
    check(max(sizes) <= 8 << 20, "frames: no frame holds more than 8 MiB of records (%d)" % max(sizes))
    j = r.summary(out)
    check(j["problems"] == [] and not j["truncated"], "frames: read back whole (%s)" % j["problems"])
    check(j["alloc_calls"] >= n and j["sampled_allocs"] >= n,
          "frames: every allocation read back (%d calls, %d sampled)" % (j["alloc_calls"], j["sampled_allocs"]))


def case_errno(r, a):
    r.same_behaviour(a.c_prog, "errno", 1)
    r.same_behaviour(a.c_prog, "errno", 1, sample="65536")


def case_cxx(r, a):
    per = {"new": (1, 1, lambda i: 16), "array": (1, 1, lambda i: 4 * (i % 50 + 1)),
           "aligned": (2, 2, lambda i: 128 + 384), "nothrow": (1, 1, lambda i: 16)}
    for mode, (na, nf, sz) in per.items():
        _, d, _ = r.delta(a.cxx_prog, mode)
        check(d["alloc_calls"] == na * (N2 - N1), "c++ %s: alloc_calls delta %d" % (mode, d["alloc_calls"]))
        check(d["free_calls"] == nf * (N2 - N1), "c++ %s: free_calls delta %d" % (mode, d["free_calls"]))
        want = size_sum(sz)
        check(d["bytes_allocated"] == want, "c++ %s: bytes delta %d == %d" % (mode, d["bytes_allocated"], want))
    _, d, _ = r.delta(a.cxx_prog, "list_leak")
    check(d["leaked_blocks"] == N2 - N1 and d["leaked_bytes"] == 16 * (N2 - N1), "c++ leaked list counted exactly")
    r.same_behaviour(a.cxx_prog, "badalloc", 1)
    # operator new's failure path: the shim links no libstdc++ and finds its pieces at run time.
    path = r.same_behaviour(a.cxx_prog, "newhandler", 1)
    out = r.native(a.cxx_prog, "newhandler", 1).stdout.decode()
    check(out.count("bad_alloc after 3 handler calls") == 4 and out.count("nullptr after 1 handler calls") == 4
          and out.count("nullptr after 0 handler calls") == 4, "c++ newhandler: native behaviour as expected:\n" + out)
    r.same_behaviour(a.cxx_prog, "aligned", 10)


def case_python_vs_heaptrack(r, a):
    if not shutil.which("heaptrack") or not shutil.which("heaptrack_print"):
        print("SKIP: heaptrack not installed")
        sys.exit(77)
    script = os.path.join(r.work, "dicts.py")
    with open(script, "w") as f:
        f.write("d = {}\nfor i in range(100000):\n    d['k%d' % i] = [i, str(i)]\n"
                "for i in range(0, 100000, 3):\n    del d['k%d' % i]\nprint(len(d))\n")
    env = dict(os.environ, PYTHONMALLOC="malloc", PYTHONHASHSEED="0")
    out = os.path.join(r.work, "py.hsnap")
    if os.path.exists(out):
        os.unlink(out)
    rr = subprocess.run([a.heapsnap, "record", "-q", "-o", out, "--", "/usr/bin/python3", script],
                        env=env, capture_output=True, timeout=300)
    check(rr.returncode == 0, "python under heapsnap exits 0")
    j = r.summary(out)
    ht = os.path.join(r.work, "py.heaptrack")
    for f in os.listdir(r.work):
        if f.startswith("py.heaptrack"):
            os.unlink(os.path.join(r.work, f))
    subprocess.run(["heaptrack", "-o", ht, "/usr/bin/python3", script], env=env, capture_output=True, timeout=600)
    files = [f for f in os.listdir(r.work) if f.startswith("py.heaptrack")]
    check(len(files) == 1, "heaptrack wrote its file")
    p = subprocess.run(["heaptrack_print", "-p", "0", "-a", "0", "-T", "0", "-l", "0", "-n", "0",
                        os.path.join(r.work, files[0])], capture_output=True, text=True, timeout=600)
    calls = peak = None
    for line in p.stdout.splitlines():
        if line.startswith("total runtime"):
            continue
        if "calls to allocation functions" in line:
            calls = int(line.split(":")[1].split()[0])
        if line.startswith("peak heap memory consumption"):
            peak = parse_size(line.split(":")[1].strip())
    check(calls is not None and peak is not None, "heaptrack_print reported calls (%s) and peak (%s)" % (calls, peak))
    print("heapsnap alloc_calls %d vs heaptrack %d; peak %d vs %d" % (j["alloc_calls"], calls, j["peak_heap_bytes"], peak))
    check(abs(j["alloc_calls"] - calls) <= 0.005 * calls, "allocation calls within 0.5% of heaptrack's")
    check(abs(j["peak_heap_bytes"] - peak) <= 0.02 * peak, "peak heap within 2% of heaptrack's")


def parse_size(s):
    num, unit = s.split()[0], s.split()[1] if len(s.split()) > 1 else "B"
    # heaptrack prints e.g. "12.34M" or "12.34MB"
    for suffix, mult in (("K", 1e3), ("M", 1e6), ("G", 1e9)):
        if num.endswith(suffix):
            return float(num[:-1]) * mult
    mult = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "K": 1e3, "M": 1e6, "G": 1e9}.get(unit, 1)
    return float(num) * mult


if __name__ == "__main__":
    casekit.main(globals(), ["--heapsnap", "--c-prog", "--cxx-prog"], runner=Runner)
