#!/usr/bin/env python3
"""Integration tests: cut and damaged captures, end to end (issue 7, item 2).

A real program is recorded (tests/programs/stress_threads: 4 threads allocating, reallocating and
freeing across threads, heap snapshots requested by signal while they run and one at exit, frames
flushed every 40 ms: about 10 frames). The capture's frame boundaries are found from the zstd frame
format (the header is a skippable frame; every later frame is a standard zstd frame; checked
against libzstd's own reading where python can load it), and damaged copies are made:

  cuts     the file cut at every frame boundary, and at several offsets inside every frame
           (the header included)
  damage   one flipped byte in every frame (in its magic, its frame header, its compressed data,
           its checksum), a frame duplicated (three ways), two frames swapped (three ways), a
           header claiming a newer major version (and a newer minor one, which must read as
           usual), bytes of garbage between two frames

Each copy is read by the queries summary --json, top-allocators, leaks, timeline, snapshots,
unreachable, top-retainers, flamegraph and export --format pprof. For every query and copy:
  - no crash, signal or timeout: exit status 0 or 1 only;
  - a non-zero exit comes with a one-line message on stderr that names a file offset;
  - a zero exit on a damaged file says what was skipped (summary: "problems" non-empty or
    "truncated": true; a cut file must say "truncated": true);
and across copies what must hold does: a file cut later never reports less (alloc and free
calls, records, sampled events, complete snapshots) than one cut earlier, a cut inside a frame
reads exactly what the cut at that frame's start reads, a snapshot the cut file calls complete
is the snapshot of the whole file, byte for byte the same figures, a flipped byte loses only its
frame, and two swapped frames are either reported or mean the same (two frames may commute).

usage: damaged_cases.py CASE --heapsnap BIN --shim LIB --programs DIR --workdir DIR [--jobs N]
Exit status: 0 pass, 1 fail, 77 skipped (meson's convention).
"""
import concurrent.futures
import json
import os
import re
import struct
import subprocess
import sys
import time

import casekit
from casekit import fail, check

QUERY_TIMEOUT = 60      # one query on a capture of about a megabyte takes well under a second
RECORD_TIMEOUT = 120

ZSTD_MAGIC = 0xFD2FB528
SKIPPABLE_LO, SKIPPABLE_HI = 0x184D2A50, 0x184D2A5F
HEADER_SIZE = 24

# The queries every damaged copy goes through: (name, argv after the binary; FILE is the copy).
QUERIES = [
    ("summary", ["summary", "--json", "FILE"]),
    ("top-allocators", ["top-allocators", "--json", "FILE"]),
    ("leaks", ["leaks", "FILE"]),
    ("timeline", ["timeline", "--json", "FILE"]),
    ("snapshots", ["snapshots", "--json", "FILE"]),
    ("unreachable", ["unreachable", "--json", "FILE"]),
    ("top-retainers", ["top-retainers", "FILE"]),
    ("flamegraph", ["flamegraph", "FILE"]),
    ("export-pprof", ["export", "--format", "pprof", "-o", "OUT.pb.gz", "FILE"]),
]

# "offset 0x1a2b", "offset 123", "at 0x1a2b" (the reader's "frame at 0x..."): a file offset.
OFFSET_RE = re.compile(r"\boffset (0x[0-9a-fA-F]+|\d+)\b|\bat 0x[0-9a-fA-F]+\b")

failures = []


def soft_check(cond, msg):
    """Collects failures (so that one run lists every broken copy), printed at the end."""
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)
    return cond


# --- the zstd frame format ---------------------------------------------------------------------

def walk_frame(data, off):
    """(length, [block ends], first block's start) of the frame at data[off:], from the zstd frame
    format (RFC 8878): offsets are absolute, the checksum follows the last block; None if the
    frame does not parse or runs past the end."""
    n = len(data)
    if off + 8 > n:
        return None
    magic = struct.unpack_from("<I", data, off)[0]
    if SKIPPABLE_LO <= magic <= SKIPPABLE_HI:
        size = 8 + struct.unpack_from("<I", data, off + 4)[0]
        return (size, [], off + size) if off + size <= n else None
    if magic != ZSTD_MAGIC:
        return None
    p = off + 4
    fhd = data[p]
    p += 1
    fcs_flag, single, reserved, checksum, did_flag = fhd >> 6, (fhd >> 5) & 1, (fhd >> 3) & 1, (fhd >> 2) & 1, fhd & 3
    if reserved:
        return None
    if not single:
        p += 1  # window descriptor
    p += (0, 1, 2, 4)[did_flag]
    p += (1 if single else 0, 2, 4, 8)[fcs_flag]
    blocks, header_end = [], p
    while True:
        if p + 3 > n:
            return None
        bh = data[p] | (data[p + 1] << 8) | (data[p + 2] << 16)
        p += 3
        last, btype, bsize = bh & 1, (bh >> 1) & 3, bh >> 3
        if btype == 3:
            return None
        p += 1 if btype == 1 else bsize
        if p > n:
            return None
        blocks.append(p)
        if last:
            break
    if checksum:
        p += 4
    return (p - off, blocks, header_end) if p <= n else None


def frame_size(data, off):
    """Length of the frame at data[off:], or None (see walk_frame)."""
    w = walk_frame(data, off)
    return w[0] if w else None


def frames_of(data):
    """[(offset, size)] of every frame, the header first. Fails the test if the file does not
    split into whole frames (the recorded capture must be intact)."""
    out, off = [], 0
    while off < len(data):
        size = frame_size(data, off)
        if size is None:
            fail("the recorded capture does not split into frames at offset %#x" % off)
        out.append((off, size))
        off += size
    return out


def crosscheck_with_libzstd(data, frames):
    """Where python can load libzstd, its ZSTD_findFrameCompressedSize must agree."""
    try:
        import ctypes
        import ctypes.util
        lib = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
    except OSError:
        print("(libzstd not loadable from python: frame sizes not cross-checked)")
        return
    lib.ZSTD_findFrameCompressedSize.restype = ctypes.c_size_t
    lib.ZSTD_findFrameCompressedSize.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.ZSTD_isError.restype = ctypes.c_uint
    lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
    for off, size in frames:
        chunk = bytes(data[off:])
        got = lib.ZSTD_findFrameCompressedSize(chunk, len(chunk))
        if lib.ZSTD_isError(got) or got != size:
            fail("frame at %#x: parsed %d bytes, libzstd says %d" % (off, size, got))
    print("ok: libzstd agrees on all %d frame sizes" % len(frames))


# --- running the analyzer ------------------------------------------------------------------------

def run_bounded(cmd, timeout, **kw):
    """(status, stdout, stderr); status None when the command outlived the timeout (killed)."""
    try:
        r = casekit.run_bounded(cmd, timeout, **kw)
    except subprocess.TimeoutExpired:
        return None, b"", b""
    return r.returncode, r.stdout, r.stderr


class Query:
    def __init__(self, variant, name, rc, out, err, secs):
        self.variant, self.name, self.rc, self.secs = variant, name, rc, secs
        self.out = out.decode(errors="replace")
        self.err = err.decode(errors="replace")

    def json(self):
        try:
            return json.loads(self.out)
        except ValueError:
            return None


def run_query(a, variant, path, qname, argv):
    out_file = path + "." + qname + ".out"
    cmd = [a.heapsnap] + [path if x == "FILE" else out_file if x == "OUT.pb.gz" else x for x in argv]
    t0 = time.time()
    rc, out, err = run_bounded(cmd, QUERY_TIMEOUT)
    q = Query(variant, qname, rc, out, err, time.time() - t0)
    if os.path.exists(out_file):
        q.out_size = os.path.getsize(out_file)
        os.unlink(out_file)
    return q


def judge(q, damaged, cut):
    """The rules every query on every copy must follow."""
    tag = "%s / %s" % (q.variant, q.name)
    if q.rc is None:
        return soft_check(False, "%s: did not end in %d s" % (tag, QUERY_TIMEOUT))
    if q.rc < 0:
        return soft_check(False, "%s: killed by signal %d; stderr: %s" % (tag, -q.rc, q.err.strip()[-400:]))
    if not soft_check(q.rc in (0, 1), "%s: exit status %d (expected 0 or 1); stderr: %s" % (tag, q.rc, q.err.strip()[-400:])):
        return False
    # (Under scripts/test's sanitized analyzer a report exits 1 too: name it for what it is.)
    sanitizer = next((w for w in ("AddressSanitizer", "LeakSanitizer", "runtime error:", "ThreadSanitizer")
                      if w in q.err), None)
    if not soft_check(sanitizer is None, "%s: %s report: %s" % (tag, sanitizer, q.err.strip()[:600])):
        return False
    if q.rc == 1:
        lines = [l for l in q.err.splitlines() if l.strip()]
        ok = soft_check(len(lines) == 1, "%s: exit 1 with a one-line message (got %d lines: %r)" % (tag, len(lines), q.err[-400:]))
        ok = soft_check(bool(lines) and OFFSET_RE.search(lines[-1]) is not None,
                        "%s: exit 1, the message names a file offset: %r" % (tag, q.err.strip()[-300:])) and ok
        return ok
    if q.name == "summary" and damaged:
        j = q.json()
        if not soft_check(j is not None, "%s: --json output parses" % tag):
            return False
        ok = soft_check(bool(j["problems"]) or j["truncated"],
                        "%s: exit 0 on a damaged file: it says so (problems %r, truncated %r)" % (tag, j["problems"], j["truncated"]))
        if cut:
            ok = soft_check(j["truncated"] is True, "%s: a cut file says it is truncated" % tag) and ok
        return ok
    return True


def summary_of(q):
    return q.json() if q.name == "summary" and q.rc == 0 else None


def snapshots_of(q):
    j = q.json() if q.name == "snapshots" and q.rc == 0 else None
    return j["snapshots"] if j else None


# --- the recorded capture -------------------------------------------------------------------------

def record(a):
    path = os.path.join(a.workdir, "recorded.hsnap")
    for f in os.listdir(a.workdir):
        os.unlink(os.path.join(a.workdir, f))
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEAPSNAP_")}
    env["HEAPSNAP_PRELOAD"] = a.shim
    env["HEAPSNAP_FLUSH_MS"] = "40"   # a frame every 40 ms: about 10 frames
    prog = os.path.join(a.programs, "stress_threads")
    cmd = [a.heapsnap, "record", "-q", "-o", path, "--sample-bytes", "2048", "--snapshot-on-signal=USR2",
           "--snapshot-at-exit", "--max-snapshots", "3", "--", prog, "4", "100000", "60"]
    rc, out, err = run_bounded(cmd, RECORD_TIMEOUT, env=env)
    check(rc == 0, "stress_threads 4 threads, snapshots by signal and at exit, recorded (exit %s): %s" % (rc, err.decode()[-300:]))
    return path


def write_variant(a, name, data):
    p = os.path.join(a.workdir, name + ".hsnap")
    with open(p, "wb") as f:
        f.write(data)
    return p


def run_all(a, variants):
    """variants: [(name, bytes, damaged, cut)]. Runs every query on every variant (a.jobs at a
    time); returns {name: {query: Query}}."""
    jobs = []
    for name, data, damaged, cut in variants:
        path = write_variant(a, name, data)
        for qname, argv in QUERIES:
            jobs.append((name, path, qname, argv, damaged, cut))
    results = {}
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        futs = [pool.submit(run_query, a, name, path, qname, argv) for name, path, qname, argv, _, _ in jobs]
        for (name, path, qname, argv, damaged, cut), fut in zip(jobs, futs):
            q = fut.result()
            judge(q, damaged, cut)
            results.setdefault(name, {})[qname] = q
    for name, _, _, _ in variants:
        os.unlink(os.path.join(a.workdir, name + ".hsnap"))
    slow = max((q for r in results.values() for q in r.values()), key=lambda q: q.secs)
    print("ran %d queries on %d copies in %.1f s (slowest: %s / %s, %.2f s)"
          % (len(jobs), len(variants), time.time() - t0, slow.variant, slow.name, slow.secs))
    return results


def baseline(a, path):
    data = open(path, "rb").read()
    frames = frames_of(data)
    check(frames[0] == (0, HEADER_SIZE), "the capture starts with the 24-byte skippable header frame")
    crosscheck_with_libzstd(data, frames)
    res = run_all(a, [("orig", data, False, False)])["orig"]
    for qname, q in res.items():
        check(q.rc == 0, "intact capture: %s exits 0 (%s)" % (qname, q.err.strip()[-200:]))
    s = summary_of(res["summary"])
    check(not s["truncated"] and s["problems"] == [] and s["end_reason"] == "exit", "intact capture: complete, no problems")
    snaps = snapshots_of(res["snapshots"])
    complete = [x for x in snaps if x["complete"]]
    # --max-snapshots 3: on a loaded machine three signal snapshots can use the cap up before exit.
    check(len(complete) >= 1 and (complete[-1]["trigger"] == "exit" or len(complete) == 3),
          "intact capture: %d complete snapshots (%s)" % (len(complete), ", ".join(x["trigger"] for x in complete)))
    # Frames span the writer's flushes (each one ends a block), so cuts have blocks to fall between.
    nblocks = sum(len(walk_frame(data, off)[1]) for off, _ in frames)
    check(len(frames) >= 4 and nblocks >= 10,
          "the capture has %d frames (header included), %d blocks" % (len(frames), nblocks))
    print("capture: %d bytes, %d frames, %d blocks, %d snapshots, %d alloc calls"
          % (len(data), len(frames), nblocks, len(snaps), s["alloc_calls"]))
    return data, frames, s, snaps


def snapshot_key(x):
    return {k: v for k, v in x.items() if k not in ("pause_ms", "scan_ms", "total_ms")}


def check_snapshots_subset(tag, snaps, full_snaps):
    """A snapshot a damaged copy calls complete is the one of the intact file, figures equal."""
    by_index = {x["index"]: x for x in full_snaps}
    for x in snaps or []:
        if not x.get("complete"):
            continue
        ref = by_index.get(x["index"])
        soft_check(ref is not None and ref["complete"] and snapshot_key(ref) == snapshot_key(x),
                   "%s: complete snapshot %s is the intact file's (%s vs %s)" % (tag, x["index"], x, ref))


# --- cases ---------------------------------------------------------------------------------------

def case_cuts(a):
    path = record(a)
    data, frames, full, full_snaps = baseline(a, path)
    variants = []
    # Inside the header frame, then at every cut point (every frame's start, and every block's end
    # inside a frame: a frame spans the writer's flushes, each of which ends a block), then inside
    # frames: just past a frame's start, inside its frame header, in the middle of blocks, inside
    # its checksum.
    for cut in (0, 4, 8, 16, 23):
        variants.append(("header-%d" % cut, data[:cut], True, True))
    points = []  # (offset, frame index)
    blocks = {}  # frame index -> its blocks' (start, end)
    for i, (off, size) in enumerate(frames[1:], 1):
        points.append((off, i))
        _, ends, header_end = walk_frame(data, off)
        starts = [header_end] + ends[:-1]
        blocks[i] = list(zip(starts, ends))
        points += [(e, i) for e in ends]
    # Inside cuts: each must read exactly what the cut point before it reads.
    spots = []  # (name, offset, frame index)
    for i, (off, size) in enumerate(frames[1:], 1):
        at_spots = {off + 1, off + 5, off + size - 2}
        bl = blocks[i]  # (none in a skippable frame: a frame hint before a snapshot's frame)
        for j in (sorted({0, len(bl) // 2, len(bl) - 1}) if len(frames) <= 14 else [len(bl) // 2]) if bl else []:
            b0, b1 = bl[j]
            at_spots.add((b0 + b1) // 2)
        for k, at in enumerate(sorted(at_spots)):
            if off < at < off + size and all(at != p for p, _ in points):
                spots.append(("inside-%02d-%d" % (i, k), at, i))
    # A long run (a slow machine flushes more often than the 40 ms asked for) keeps every frame
    # start, every cut point an inside cut is compared with, and an even spread of the others.
    def before(at):
        return max(p for p in points if p[0] <= at)
    if len(points) > 40:
        keep = {p for p in points if p[0] == frames[p[1]][0]} | {before(at) for _, at, _ in spots}
        others = [p for p in points if p not in keep]
        room = max(0, 40 - len(keep))
        keep |= {others[int(k * len(others) / room)] for k in range(min(room, len(others)))}
        points = sorted(keep)
    for k, (at, i) in enumerate(points):
        variants.append(("cut-%03d" % k, data[:at], True, True))
    inside = {}  # name -> (index of the cut point it must read the same as, frame index)
    for name, at, i in spots:
        inside[name] = (points.index(before(at)), i)
        variants.append((name, data[:at], True, True))
    print("%d copies: 5 header cuts, %d cuts at frame starts and block ends, %d cuts inside frames and blocks"
          % (len(variants), len(points), len(inside)))
    res = run_all(a, variants)

    # Monotonicity over the cut points, and inside cuts equal to the cut point before them.
    def figures(name):
        s = summary_of(res[name]["summary"])
        if s is None:
            return None
        snaps = snapshots_of(res[name]["snapshots"]) or []
        return {"alloc_calls": s["alloc_calls"], "free_calls": s["free_calls"], "bytes_allocated": s["bytes_allocated"],
                "sampled_allocs": s["sampled_allocs"], "sampled_frees": s["sampled_frees"], "stacks": s["stacks"],
                "snapshots": s["snapshots"], "complete": sum(1 for x in snaps if x["complete"])}
    prev, prev_name = None, None
    for k in range(len(points)):
        name = "cut-%03d" % k
        f = figures(name)
        if k == 0:
            # Only the header: no process record. An exit 1 is right (judged above).
            prev, prev_name = f, name
            continue
        if not soft_check(f is not None, "%s: summary reads the frames before the cut" % name):
            continue
        if prev is not None:
            worse = [x for x in f if f[x] < prev[x]]
            soft_check(not worse, "%s reports no less than %s (%s)" % (name, prev_name, ", ".join(
                "%s %d < %d" % (x, f[x], prev[x]) for x in worse)))
        for x in ("alloc_calls", "free_calls", "sampled_allocs", "snapshots"):
            soft_check(f[x] <= full[x], "%s: %s %d <= the whole file's %d" % (name, x, f[x], full[x]))
        check_snapshots_subset(name, snapshots_of(res[name]["snapshots"]), full_snaps)
        prev, prev_name = f, name
    soft_check(figures("cut-%03d" % (len(points) - 1))["alloc_calls"] > figures("cut-001")["alloc_calls"],
               "later cuts see more allocation calls than the first one")
    for name, (ref, i) in inside.items():
        f, rf = figures(name), figures("cut-%03d" % ref)
        soft_check(f == rf, "%s reads exactly what the cut at %#x before it reads (%s vs %s)" % (name, points[ref][0], f, rf))
        check_snapshots_subset(name, snapshots_of(res[name]["snapshots"]), full_snaps)
        s = summary_of(res[name]["summary"])
        if s is not None:
            soft_check(any(p["offset"] == frames[i][0] for p in s["problems"]),
                       "%s: a problem names the offset of the cut frame (%#x): %s" % (name, frames[i][0], s["problems"]))
    finish()


def case_damage(a):
    path = record(a)
    data, frames, full, full_snaps = baseline(a, path)
    variants = []
    # A flipped byte in every frame: its magic, its frame header descriptor, its middle, its last
    # byte (the content checksum). The header frame: its magic, "HEAPSNAP", its flags.
    for at, what in ((0, "magic"), (10, "name"), (21, "flags")):
        d = bytearray(data)
        d[at] ^= 0xFF
        variants.append(("flip-header-%s" % what, bytes(d), True, False))
    spots = ("magic", "fhd", "mid", "last") if len(frames) <= 14 else ("fhd", "mid")
    for i, (off, size) in enumerate(frames[1:], 1):
        for at, what in ((off, "magic"), (off + 4, "fhd"), (off + size // 2, "mid"), (off + size - 1, "last")):
            if what not in spots:
                continue
            d = bytearray(data)
            d[at] ^= 0x5A
            variants.append(("flip-%02d-%s" % (i, what), bytes(d), True, False))
    # A frame duplicated (the first, with the process record; one in the middle; the last), two
    # frames swapped (neighbours, and the first with the last).
    def frame(i):
        off, size = frames[i]
        return data[off:off + size]
    n = len(frames)
    mid = n // 2
    for i in (1, mid, n - 1):
        off, size = frames[i]
        variants.append(("dup-%02d" % i, data[:off + size] + frame(i) + data[off + size:], True, False))
    # (Two swapped frames may commute, e.g. a frame of events and one with a snapshot's start:
    # the file means the same. So a swap is judged below, not by the damaged-file rule.)
    for i, j in ((mid, mid + 1), (1, n - 1), (2, n - 2)):
        parts = [frame(k) for k in range(n)]
        parts[i], parts[j] = parts[j], parts[i]
        variants.append(("swap-%02d-%02d" % (i, j), b"".join(parts), False, False))
    # Garbage between two frames (zeros, and bytes that look like a zstd magic).
    off = frames[mid][0]
    variants.append(("garbage-zeros", data[:off] + b"\0" * 37 + data[off:], True, False))
    variants.append(("garbage-magic", data[:off] + struct.pack("<I", ZSTD_MAGIC) + b"\x41" * 20 + data[off:], True, False))
    # Versions: a newer major is refused, a newer minor reads as usual.
    major, minor = struct.unpack_from("<HH", data, 16)
    newer_major = bytearray(data)
    struct.pack_into("<H", newer_major, 16, major + 1)
    newer_minor = bytearray(data)
    struct.pack_into("<H", newer_minor, 18, minor + 7)
    variants.append(("newer-major", bytes(newer_major), True, False))
    variants.append(("newer-minor", bytes(newer_minor), False, False))
    print("%d copies: %d flipped bytes, 3 duplicated frames, 3 swaps, 2 garbage, 2 versions"
          % (len(variants), 3 + len(spots) * (n - 1)))
    res = run_all(a, variants)

    # A newer major version: every query refuses it, naming the version.
    for qname, q in res["newer-major"].items():
        soft_check(q.rc == 1 and "newer" in q.err, "newer-major / %s: refused as a newer format (%s)" % (qname, q.err.strip()))
    for qname, q in res["newer-minor"].items():
        soft_check(q.rc == 0, "newer-minor / %s: read as usual (exit %s, %s)" % (qname, q.rc, q.err.strip()[-200:]))
    s = summary_of(res["newer-minor"]["summary"])
    soft_check(s is not None and s["alloc_calls"] == full["alloc_calls"] and not s["truncated"],
               "newer-minor: the same totals as the intact file")
    # A flip in a frame loses that frame only: what comes before it is read; the capture's last
    # totals are no less than those of the cut at that frame; a flip in the last frame loses the
    # end record (truncated); the problem names the damaged frame's offset.
    for i, (off, size) in enumerate(frames[1:], 1):
        for what in spots:
            name = "flip-%02d-%s" % (i, what)
            s = summary_of(res[name]["summary"])
            if s is None:
                continue
            soft_check(s["alloc_calls"] <= full["alloc_calls"], "%s: alloc calls %d <= intact %d" % (name, s["alloc_calls"], full["alloc_calls"]))
            soft_check(any(p["offset"] >= off and p["offset"] < off + size for p in s["problems"]) or
                       any(p["offset"] == off for p in s["problems"]),
                       "%s: a problem points into the damaged frame %#x+%d: %s" % (name, off, size, s["problems"][:3]))
            if i < n - 1:
                soft_check(s["end_reason"] == "exit", "%s: frames after the damaged one are still read (end record)" % name)
            check_snapshots_subset(name, snapshots_of(res[name]["snapshots"]), full_snaps)
    for name in [v[0] for v in variants if v[0].startswith(("garbage", "dup", "swap"))]:
        check_snapshots_subset(name, snapshots_of(res[name]["snapshots"]), full_snaps)
    # A swap is reported, or changes nothing: the same summary and snapshots as the intact file.
    full_snap_json = [snapshot_key(x) for x in full_snaps]
    for name in [v[0] for v in variants if v[0].startswith("swap")]:
        s = summary_of(res[name]["summary"])
        if not soft_check(s is not None, "%s: summary reads it" % name):
            continue
        if s["problems"] or s["truncated"]:
            print("ok: %s: reported: %s" % (name, s["problems"][0]["what"] if s["problems"] else "truncated"))
            continue
        same = {k: v for k, v in s.items() if k not in ("file",)} == {k: v for k, v in full.items() if k not in ("file",)}
        snaps = [snapshot_key(x) for x in snapshots_of(res[name]["snapshots"]) or []]
        soft_check(same and snaps == full_snap_json,
                   "%s: not reported, so it must mean the same as the intact file (summary %s, snapshots %s)"
                   % (name, "equal" if same else "differs", "equal" if snaps == full_snap_json else "differ"))
    for name in ("garbage-zeros", "garbage-magic"):
        s = summary_of(res[name]["summary"])
        soft_check(s is not None and s["alloc_calls"] == full["alloc_calls"] and s["end_reason"] == "exit",
                   "%s: every frame is still read" % name)
    finish()


def finish():
    if failures:
        print("\n%d failed checks; first ones:" % len(failures))
        for f in failures[:40]:
            print("  " + f)
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    casekit.main(globals(), ["--heapsnap", "--shim", "--programs"], options=[("--jobs", {"type": int, "default": 2})])
