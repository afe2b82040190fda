#!/usr/bin/env python3
"""Integration tests of `heapsnap flamegraph` and `heapsnap export` on a traced program whose
allocation functions are known (tests/export/export_target.cc, recorded with --sample-bytes 1 so
every figure is exact):
  alloc_big:   100 blocks of 10000 bytes, never freed; allocated through make_block, inlined
  alloc_small: 1000 blocks of 10 bytes, all freed

usage: export_cases.py {collapsed|pprof} --heapsnap BIN --target PROG --workdir DIR
Exit status: 0 pass, 1 fail, 77 skipped (meson's convention; pprof needs `go`).
"""
import argparse
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile

BIG_BYTES, BIG_CALLS = 1000000, 100
SMALL_BYTES, SMALL_CALLS = 10000, 1000


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print("ok:", msg)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, timeout=300, **kw)


def record(a, name, *extra):
    os.makedirs(a.workdir, exist_ok=True)
    out = os.path.join(a.workdir, name + ".hsnap")
    for f in os.listdir(a.workdir):
        if f.startswith(name + ".hsnap"):
            os.unlink(os.path.join(a.workdir, f))
    r = run([a.heapsnap, "record", "-q", "-o", out, "--sample-bytes", "1", *extra, "--", a.target])
    if r.returncode != 0:
        fail("record exited %d: %s" % (r.returncode, r.stderr.decode()))
    return out


def heapsnap(a, *args, expect=0):
    r = run([a.heapsnap, *args])
    if r.returncode != expect:
        fail("heapsnap %s exited %d (expected %d): %s" % (" ".join(args), r.returncode, expect,
                                                          r.stderr.decode()))
    return r.stdout.decode()


# --- collapsed stacks ---------------------------------------------------------------------------

def parse_collapsed(text):
    """[(frames outermost first, value)]; checks the line format flamegraph.pl reads."""
    out = []
    for line in text.splitlines():
        m = re.fullmatch(r"(.+) (\d+)", line)
        if not m:
            fail("collapsed line not 'STACK VALUE': %r" % line)
        frames = m.group(1).split(";")
        if any(f == "" for f in frames):
            fail("empty frame in %r" % line)
        out.append((frames, int(m.group(2))))
    return out


def stack_value(stacks, func):
    """Sum of the values of stacks with a frame naming `func`."""
    return sum(v for frames, v in stacks if any(func in f for f in frames))


def case_collapsed(a):
    cap = record(a, "export-collapsed")
    alloc = parse_collapsed(heapsnap(a, "flamegraph", cap))
    check(alloc, "flamegraph prints stacks")
    check(stack_value(alloc, "alloc_big") == BIG_BYTES,
          "alloc-bytes: alloc_big %d == %d" % (stack_value(alloc, "alloc_big"), BIG_BYTES))
    check(stack_value(alloc, "alloc_small") == SMALL_BYTES,
          "alloc-bytes: alloc_small %d == %d" % (stack_value(alloc, "alloc_small"), SMALL_BYTES))

    big = [frames for frames, _ in alloc if any("alloc_big" in f for f in frames)]
    check(len(big) == 1, "one alloc_big stack")
    frames = big[0]
    i_main = next(i for i, f in enumerate(frames) if f == "main")
    i_big = next(i for i, f in enumerate(frames) if "alloc_big" in f)
    check(i_main < i_big, "outermost first: main before alloc_big (%s)" % ";".join(frames))
    check("make_block" in frames[-1] and i_big == len(frames) - 2,
          "the inlined make_block is a frame of its own, the leaf, under alloc_big (%s)" % ";".join(frames))

    leaked = parse_collapsed(heapsnap(a, "flamegraph", "--metric", "leaked", cap))
    check(stack_value(leaked, "alloc_big") == BIG_BYTES,
          "leaked: alloc_big %d == %d" % (stack_value(leaked, "alloc_big"), BIG_BYTES))
    check(stack_value(leaked, "alloc_small") == 0, "leaked: nothing from alloc_small")

    calls = parse_collapsed(heapsnap(a, "flamegraph", "--metric", "alloc-calls", cap))
    check(stack_value(calls, "alloc_big") == BIG_CALLS and stack_value(calls, "alloc_small") == SMALL_CALLS,
          "alloc-calls: alloc_big %d, alloc_small %d" % (stack_value(calls, "alloc_big"),
                                                        stack_value(calls, "alloc_small")))

    # The heap peaks when alloc_small's blocks are all live, on top of alloc_big's.
    peak = parse_collapsed(heapsnap(a, "flamegraph", "--metric", "peak", cap))
    check(stack_value(peak, "alloc_big") == BIG_BYTES and stack_value(peak, "alloc_small") == SMALL_BYTES,
          "peak: alloc_big %d, alloc_small %d" % (stack_value(peak, "alloc_big"), stack_value(peak, "alloc_small")))

    only = parse_collapsed(heapsnap(a, "flamegraph", "--match", "alloc_small", cap))
    check(len(only) == 1 and stack_value(only, "alloc_small") == SMALL_BYTES, "--match keeps alloc_small's stack only")

    text = heapsnap(a, "flamegraph", "--metric", "leaked", cap)
    check(heapsnap(a, "export", "--format", "collapsed", "--metric", "leaked", cap) == text,
          "export --format collapsed prints what flamegraph prints")
    out = os.path.join(a.workdir, "export-collapsed.folded")
    heapsnap(a, "flamegraph", "--metric", "leaked", "-o", out, cap)
    with open(out) as f:
        check(f.read() == text, "-o writes the same lines to a file")

    # --by type: every stack under a first frame naming its type (issue 29), from the frames.
    typed = parse_collapsed(heapsnap(a, "flamegraph", "--by", "type", "--metric", "leaked", cap))
    vec = [(frames, v) for frames, v in typed if frames[0] == "[std::vector<int> buffer]"]
    check(len(vec) == 1 and vec[0][1] == 50 * 1000 * 4 and any("alloc_typed" in f for f in vec[0][0]),
          "--by type: the vectors' buffers under [std::vector<int> buffer], 200000 bytes, from alloc_typed (%s)" % vec)
    big = [(frames, v) for frames, v in typed if any("alloc_big" in f for f in frames)]
    check(len(big) == 1 and big[0][0][0] == "[type unknown]" and big[0][1] == BIG_BYTES,
          "--by type: malloc's blocks under [type unknown] (%s)" % [f[:2] for f, _ in big])
    heapsnap(a, "export", "--format", "pprof", "--by", "type", "-o", os.path.join(a.workdir, "x.pb.gz"), cap, expect=2)
    print("ok: --by type with --format pprof is a usage error (pprof has a type label)")

    # Stacks cut at the recording's depth: the outermost frame is [truncated], and stderr says why
    # (issue 31).
    short = record(a, "export-collapsed-depth2", "--stack-depth", "2")
    r = run([a.heapsnap, "flamegraph", short])
    cut = parse_collapsed(r.stdout.decode())
    check(cut and all(frames[0] == "[truncated]" for frames, _ in cut),
          "--stack-depth 2: every stack starts with [truncated] (%s)" % [f[:2] for f, _ in cut][:3])
    check(b"were cut at the recording's depth" in r.stderr and b"--stack-depth" in r.stderr,
          "and a note on stderr says what [truncated] is (%s)" % r.stderr.decode().strip())

    heapsnap(a, "flamegraph", "--metric", "bytes", cap, expect=2)
    print("ok: an unknown --metric is a usage error")
    heapsnap(a, "export", "--format", "no-such-format", cap, expect=2)
    print("ok: an unknown --format is a usage error")


# --- pprof -------------------------------------------------------------------------------------

def parse_size(s):
    """pprof's -unit=B figures: "1000000B", "0"; counts print without a unit."""
    m = re.fullmatch(r"(-?[0-9.]+)(B?)", s)
    if not m:
        fail("cannot read pprof figure %r" % s)
    return float(m.group(1))


def pprof_top(a, env, path, index, unit=True):
    args = ["go", "tool", "pprof", "-top", "-sample_index=" + index]
    if unit:
        args.append("-unit=B")
    r = run(args + [path], env=env)
    if r.returncode != 0:
        fail("go tool pprof -top failed: %s" % r.stderr.decode())
    text = r.stdout.decode()
    print(text)
    rows = {}
    in_table = False
    for line in text.splitlines():
        if line.split()[:1] == ["flat"]:
            in_table = True
            continue
        if in_table and line.strip():
            flat, _, _, cum, _, name = line.split(None, 5)
            rows[name] = (parse_size(flat), parse_size(cum))
    return text, rows


def row(rows, func):
    hits = [v for k, v in rows.items() if func in k]
    return hits[0] if len(hits) == 1 else None


def case_pprof(a):
    if not shutil.which("go"):
        print("SKIP: go not installed (Debian: golang-go)")
        sys.exit(77)
    cap = record(a, "export-pprof")
    out = os.path.join(a.workdir, "export-pprof.pb.gz")
    if os.path.exists(out):
        os.unlink(out)
    heapsnap(a, "export", "--format", "pprof", "-o", out, cap)
    with open(out, "rb") as f:
        data = f.read()
    check(data[:2] == b"\x1f\x8b", "the profile is gzipped")
    check(len(gzip.decompress(data)) > 0, "and inflates")

    tmp = tempfile.mkdtemp(prefix="export-pprof-home-", dir=a.workdir)
    env = dict(os.environ, HOME=tmp, GOCACHE=os.path.join(tmp, "gocache"), PPROF_TMPDIR=tmp,
               GOTOOLCHAIN="local", GOFLAGS="")
    text, rows = pprof_top(a, env, out, "alloc_space")
    check("Type: alloc_space" in text, "pprof reads it (alloc_space)")
    big, small = row(rows, "alloc_big"), row(rows, "alloc_small")
    check(big is not None and big[1] == BIG_BYTES, "alloc_space: alloc_big cum %s == %d" % (big, BIG_BYTES))
    check(small is not None and small == (SMALL_BYTES, SMALL_BYTES),
          "alloc_space: alloc_small flat and cum %s == %d" % (small, SMALL_BYTES))
    inl = row(rows, "make_block")
    check(inl is not None and inl[0] == BIG_BYTES and any("make_block (inline)" in k for k in rows),
          "the inlined make_block is its own (inline) frame with alloc_big's bytes")

    text, rows = pprof_top(a, env, out, "inuse_space")
    big = row(rows, "alloc_big")
    check(big is not None and big[1] == BIG_BYTES, "inuse_space: alloc_big cum %s == %d" % (big, BIG_BYTES))
    small = row(rows, "alloc_small")
    check(small is None or small[1] == 0, "inuse_space: nothing from alloc_small")

    _, rows = pprof_top(a, env, out, "alloc_objects", unit=False)
    big, small = row(rows, "alloc_big"), row(rows, "alloc_small")
    check(big is not None and big[1] == BIG_CALLS and small is not None and small[1] == SMALL_CALLS,
          "alloc_objects: alloc_big %s, alloc_small %s" % (big, small))

    r = run(["go", "tool", "pprof", "-top", out], env=env)
    check(r.returncode == 0 and "Type: alloc_space" in r.stdout.decode(), "alloc_space is the default sample type")

    # Each sample whose frames name a type carries the label type=... (issue 29).
    r = run(["go", "tool", "pprof", "-tags", "-sample_index=inuse_space", "-unit=B", out], env=env)
    tags = r.stdout.decode()
    print(tags)
    m = re.search(r"([\d.]+)B \(\s*[\d.]+%\): std::vector<int> buffer", tags)
    check(r.returncode == 0 and m is not None and float(m.group(1)) == 50 * 1000 * 4,
          "-tags: type std::vector<int> buffer holds 200000 bytes in use (%s)" % (m.group(0) if m else tags[:300]))

    r = run(["go", "tool", "pprof", "-raw", out], env=env)
    raw = r.stdout.decode()
    check(r.returncode == 0 and "alloc_objects/count alloc_space/bytes[dflt] inuse_objects/count inuse_space/bytes" in raw,
          "-raw: four sample types, alloc_space the default")
    lines = raw.splitlines()
    i = next((i for i, l in enumerate(lines) if "M=" in l and "make_block" in l), None)
    check(i is not None and i + 1 < len(lines) and "alloc_big" in lines[i + 1] and "M=" not in lines[i + 1],
          "-raw: make_block and alloc_big are two lines of one location, the inlined callee first")
    check(re.search(r"^\d+: 0x[0-9a-f]+/0x[0-9a-f]+/0x[0-9a-f]+ \S*export_target [0-9a-f]{40} \[FN\]\[FL\]\[LN\]\[IN\]",
                    raw, re.M) is not None,
          "-raw: the program's mapping has its file, build id and symbol flags")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["collapsed", "pprof"])
    ap.add_argument("--heapsnap", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    {"collapsed": case_collapsed, "pprof": case_pprof}[a.case](a)
    print("PASS")


if __name__ == "__main__":
    main()
