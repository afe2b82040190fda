#!/usr/bin/env python3
"""The runtime and allocator matrix (issue 28): the same program with a known heap on glibc, and on
jemalloc, tcmalloc and mimalloc preloaded or linked, must give the program's own totals, leaks
and unreachable blocks; Rust programs (std's allocator, and a #[global_allocator] that wraps it
and counts) must run and match their own counts; programs heapsnap cannot trace are refused by
name, never traced with wrong figures.

usage: compat_cases.py CASE --heapsnap BIN --shim SO --source DIR --workdir DIR   (exit 77 = skipped)
"""
import json
import os
import re
import shutil
import signal
import subprocess
import time

import casekit
from casekit import check, fail, skip

ALLOCATORS = {
    "jemalloc": "libjemalloc.so.2",
    "tcmalloc": "libtcmalloc_minimal.so.4",
    "mimalloc": "libmimalloc.so.2",
}


def find_library(soname):
    for d in ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"):
        p = os.path.join(d, soname)
        if os.path.exists(p):
            return p
    return None


def build_c(a, source, out, *extra):
    """Compiles tests/programs/SOURCE into the work directory (once per run of the case)."""
    exe = os.path.join(a.workdir, out)
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        skip("no C compiler")
    r = subprocess.run([cc, "-O1", "-g", "-fno-builtin", os.path.join(a.source, source), "-o", exe,
                        "-lpthread", *extra], capture_output=True, text=True)
    if r.returncode != 0:
        fail("cannot build %s: %s" % (source, r.stderr))
    return exe


def record(a, name, cmd, extra=(), env=None, timeout=120):
    out = os.path.join(a.workdir, name + ".hsnap")
    for f in os.listdir(a.workdir):
        if f.startswith(name + ".hsnap"):
            os.unlink(os.path.join(a.workdir, f))
    r = casekit.run_bounded([a.heapsnap, "record", "-q", "--force", "-o", out, *extra, "--", *cmd], timeout,
                            env=dict(os.environ, **(env or {})), text=True)
    return r, out


def hsnap_json(a, *args):
    r = subprocess.run([a.heapsnap, *args], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        fail("heapsnap %s: %s" % (" ".join(args), r.stderr))
    return json.loads(r.stdout)


def program_counts(stdout):
    m = re.search(r"allocs (\d+) frees (\d+) live_blocks (\d+) live_bytes (\d+) definite (\d+) indirect (\d+) "
                  r"reachable (\d+)", stdout)
    if not m:
        fail("the program did not report its counts: %r" % stdout)
    keys = ("allocs", "frees", "live_blocks", "live_bytes", "definite", "indirect", "reachable")
    return dict(zip(keys, map(int, m.groups())))


def check_known_heap(a, label, cmd, env=None):
    """alloc_compat's figures, exact: totals, leaks at exit, and memcheck's leak kinds."""
    r, path = record(a, label, cmd, ["--snapshot-at-exit"], env=env)
    check(r.returncode == 0, "%s: traced run exits 0 (%s)" % (label, r.stderr.strip()))
    want = program_counts(r.stdout)
    s = hsnap_json(a, "summary", "--json", path)
    got = {k: s[k] for k in ("alloc_calls", "free_calls", "leaked_blocks", "leaked_bytes", "foreign_frees")}
    print(label, "program:", want, "heapsnap:", got)
    check(s["end_reason"] == "exit" and not s["truncated"], "%s: a complete capture" % label)
    check(s["alloc_calls"] == want["allocs"], "%s: allocation calls exact (%d)" % (label, want["allocs"]))
    check(s["free_calls"] == want["frees"], "%s: free calls exact (%d)" % (label, want["frees"]))
    check(s["foreign_frees"] == 0, "%s: no free of a block never seen allocated" % label)
    check((s["leaked_blocks"], s["leaked_bytes"]) == (want["live_blocks"], want["live_bytes"]),
          "%s: not freed at end: %d blocks, %d bytes" % (label, want["live_blocks"], want["live_bytes"]))
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    check(len(snaps) == 1 and snaps[0]["complete"], "%s: the exit snapshot is complete" % label)
    u = hsnap_json(a, "unreachable", "--json", path)
    kinds = {k: u[k]["blocks"] for k in ("definitely_lost", "indirectly_lost", "possibly_lost", "reachable")}
    print(label, "unreachable:", kinds)
    check(kinds == {"definitely_lost": want["definite"], "indirectly_lost": want["indirect"], "possibly_lost": 0,
                    "reachable": want["reachable"]},
          "%s: definitely/indirectly/possibly lost and reachable as memcheck counts them" % label)
    return path


def record_takes_preload(a):
    """Whether `record` itself may run with another allocator preloaded: not a sanitizer build of
    heapsnap (scripts/test's ASan step), whose runtime must come first in the process."""
    ldd = subprocess.run(["ldd", a.heapsnap], capture_output=True, text=True).stdout
    return "libasan" not in ldd and "libtsan" not in ldd


def allocator_case(a, name, how):
    lib = find_library(ALLOCATORS[name])
    if not lib:
        skip("%s is not installed" % ALLOCATORS[name])
    if how == "preload" and not record_takes_preload(a):
        skip("heapsnap is a sanitizer build: record cannot run with %s preloaded (the release step runs this)" % name)
    if how == "preload":
        exe = build_c(a, "alloc_compat.c", "alloc_compat")
        check_known_heap(a, name + "-preload", [exe], env={"LD_PRELOAD": lib})
    else:
        exe = build_c(a, "alloc_compat.c", "alloc_compat_" + name, lib)
        ldd = subprocess.run(["ldd", exe], capture_output=True, text=True).stdout
        check(ALLOCATORS[name].split(".so")[0] in ldd, "the program is linked with %s" % name)
        check_known_heap(a, name + "-linked", [exe])


def case_alloc_glibc(a):
    check_known_heap(a, "glibc", [build_c(a, "alloc_compat.c", "alloc_compat")])


def case_alloc_jemalloc_preload(a):
    allocator_case(a, "jemalloc", "preload")


def case_alloc_jemalloc_linked(a):
    allocator_case(a, "jemalloc", "linked")


def case_alloc_tcmalloc_preload(a):
    allocator_case(a, "tcmalloc", "preload")


def case_alloc_tcmalloc_linked(a):
    allocator_case(a, "tcmalloc", "linked")


def case_alloc_mimalloc_preload(a):
    allocator_case(a, "mimalloc", "preload")


def case_alloc_mimalloc_linked(a):
    allocator_case(a, "mimalloc", "linked")


def case_memcheck(a):
    """The program's stated leak kinds are memcheck's (the oracle the other cases rely on)."""
    if not shutil.which("valgrind"):
        skip("valgrind is not installed")
    exe = build_c(a, "alloc_compat.c", "alloc_compat")
    v = subprocess.run(["valgrind", "--leak-check=full", exe, "2000"], capture_output=True, text=True, timeout=300)
    want = program_counts(v.stdout)
    got = {}
    for kind in ("definitely lost", "indirectly lost", "possibly lost", "still reachable"):
        m = re.search(kind + r": ([\d,]+) bytes in ([\d,]+) blocks", v.stderr)
        check(m is not None, "memcheck reports %s" % kind)
        got[kind] = int(m.group(2).replace(",", ""))
    check(got == {"definitely lost": want["definite"], "indirectly lost": want["indirect"], "possibly lost": 0,
                  "still reachable": want["reachable"]}, "memcheck agrees with the program's figures: %s" % got)


def case_preload_order(a):
    """Another allocator ahead of the shim in LD_PRELOAD: refused by name (never 0 calls reported
    as normal); `record` puts the shim first and traces the same run."""
    lib = find_library(ALLOCATORS["jemalloc"])
    if not lib:
        skip("libjemalloc2 is not installed")
    exe = build_c(a, "alloc_compat.c", "alloc_compat")
    out = os.path.join(a.workdir, "raw.hsnap")
    if os.path.exists(out):
        os.unlink(out)
    r = casekit.run_bounded([exe], 120, text=True,
                            env=dict(os.environ, LD_PRELOAD=lib + ":" + a.shim, HEAPSNAP_OUTPUT=out))
    check(r.returncode == 0, "the program still runs (%s)" % r.stderr.strip())
    check("malloc is defined by " in r.stderr and "libjemalloc" in r.stderr and "ahead of heapsnap" in r.stderr,
          "stderr names the allocator that takes malloc first: %r" % r.stderr.strip())
    s = hsnap_json(a, "summary", "--json", out)
    check(s["end_reason"].startswith("error: malloc is defined by") and "libjemalloc" in s["end_reason"],
          "the capture says why it holds nothing: %r" % s["end_reason"])
    text = subprocess.run([a.heapsnap, "summary", out], capture_output=True, text=True).stdout
    check("malloc is defined by" in text, "summary shows the reason")
    if record_takes_preload(a):  # (a sanitizer build of heapsnap cannot run with jemalloc preloaded)
        check_known_heap(a, "record-jemalloc-env", [exe], env={"LD_PRELOAD": lib})


def case_getattr(a):
    """pthread_getattr_np as the first allocating call of a thread (Rust's runtime): no hang."""
    exe = build_c(a, "getattr_first.c", "getattr_first")
    try:
        r, path = record(a, "getattr", [exe], ["--sample-bytes", "1"], timeout=60)
    except subprocess.TimeoutExpired:
        fail("the traced program hangs")
    check(r.returncode == 0 and r.stdout == "ok\n", "the program runs to its end (%s)" % r.stderr.strip())
    s = hsnap_json(a, "summary", "--json", path)
    check(s["end_reason"] == "exit" and s["threads"] == 2, "both threads traced, capture complete")


def build_rust(a, name, *cfg):
    rustc = shutil.which("rustc")
    if not rustc:
        skip("rustc is not installed")
    exe = os.path.join(a.workdir, name)
    r = subprocess.run([rustc, "-O", "-g", *cfg, os.path.join(a.source, "rust_alloc.rs"), "-o", exe],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        fail("rustc: %s" % r.stderr)
    return exe


def check_rust_leaks(a, path):
    u = hsnap_json(a, "unreachable", "--json", path)
    check(u["definitely_lost"]["blocks"] == 50 and u["definitely_lost"]["bytes"] == 50 * 64,
          "the 50 boxes leaked whole are definitely lost (%s)" % u["definitely_lost"])
    check(u["indirectly_lost"]["blocks"] == 0 and u["possibly_lost"]["blocks"] == 0,
          "nothing else lost, nothing possibly lost (%s, %s)" % (u["indirectly_lost"], u["possibly_lost"]))


def case_rust_std(a):
    exe = build_rust(a, "rust_std")
    try:
        r, path = record(a, "rust_std", [exe], ["--snapshot-at-exit"], timeout=120)
    except subprocess.TimeoutExpired:
        fail("the traced Rust program hangs")
    check(r.returncode == 0 and r.stdout.startswith("total 83988"), "the Rust program runs to its end (%s)" % r.stderr)
    s = hsnap_json(a, "summary", "--json", path)
    check(s["end_reason"] == "exit" and s["threads"] == 5, "main and 4 workers traced, capture complete")
    check(s["alloc_calls"] > 160000, "its allocations are seen (%d)" % s["alloc_calls"])
    check_rust_leaks(a, path)


def case_rust_counting(a):
    """A #[global_allocator] that wraps System and counts: heapsnap's totals against its counts."""
    exe = build_rust(a, "rust_counting", "--cfg", "counting")
    r, path = record(a, "rust_counting", [exe], ["--snapshot-at-exit"], timeout=120)
    m = re.match(r"total 83988 allocs (\d+) frees (\d+) reallocs (\d+)", r.stdout)
    check(r.returncode == 0 and m is not None, "the Rust program runs and reports its counts (%s)" % r.stderr)
    allocs, frees, reallocs = map(int, m.groups())
    s = hsnap_json(a, "summary", "--json", path)
    # The Rust counts stop before println; glibc's own calls (thread start, stdout) come on top.
    extra_a = s["alloc_calls"] - (allocs + reallocs)
    extra_f = s["free_calls"] - (frees + reallocs)
    print("rust: allocs %d frees %d reallocs %d; heapsnap %d %d %d" % (allocs, frees, reallocs, s["alloc_calls"],
                                                                       s["free_calls"], s["realloc_calls"]))
    check(0 <= extra_a <= 64 and 0 <= extra_f <= 64, "totals = Rust's counts + a few of glibc's (%d, %d)" % (extra_a, extra_f))
    check(reallocs <= s["realloc_calls"] <= reallocs + 8, "reallocs as Rust counts them")
    check_rust_leaks(a, path)


def build_go(a, source, name):
    go = shutil.which("go")
    if not go:
        skip("go is not installed (apt-get install golang-go)")
    exe = os.path.join(a.workdir, name)
    env = dict(os.environ, HOME=a.workdir, GOCACHE=os.path.join(a.workdir, "gocache"),
               GOPATH=os.path.join(a.workdir, "gopath"), CGO_ENABLED="1", GOFLAGS="")
    r = subprocess.run([go, "build", "-o", exe, os.path.join(a.source, source)], capture_output=True, text=True,
                       timeout=600, env=env)
    if r.returncode != 0:
        fail("go build: %s" % r.stderr)
    return exe


def case_cgo(a):
    """A cgo program: Go exits with exit_group (no exit handler runs); the tail guard keeps every
    event, the end, and the exit snapshot."""
    exe = build_go(a, "cgo_alloc.go", "cgo_alloc")
    r, path = record(a, "cgo", [exe, "100000", "1", "0"], ["--snapshot-at-exit"])
    m = re.search(r"mallocs (\d+) kept (\d+)", r.stdout)
    check(r.returncode == 0 and m is not None, "the Go program runs to its end (%s)" % r.stderr.strip())
    mallocs, kept = map(int, m.groups())
    s = hsnap_json(a, "summary", "--json", path)
    print("cgo: %d mallocs, %d kept; heapsnap %d allocations, %d frees, %d not freed, end %r"
          % (mallocs, kept, s["alloc_calls"], s["free_calls"], s["leaked_blocks"], s["end_reason"]))
    check(not s["truncated"] and s["problems"] == [], "the capture is complete")
    check(s["end_reason"].startswith("salvaged: exit status 0"), "the end record says how Go ended (%r)" % s["end_reason"])
    check(mallocs <= s["alloc_calls"] <= mallocs + 64, "every C allocation is counted, and a few of the runtime's")
    check(s["free_calls"] - (s["alloc_calls"] - mallocs) <= mallocs - kept <= s["free_calls"],
          "every C free is counted (%d)" % (mallocs - kept))
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    check(len(snaps) == 1 and snaps[0]["complete"] and snaps[0]["trigger"] == "exit",
          "the exit snapshot is taken of the memory the process left (%s)" % snaps)
    u = hsnap_json(a, "unreachable", "--json", path)
    lost = u["definitely_lost"]["blocks"] + u["indirectly_lost"]["blocks"]
    # The last block stays held by the C global `sink`; with no thread's registers known any more,
    # the thread stacks are scanned whole, dead frames included, whose stale words keep a few.
    check(kept - 32 <= lost <= kept, "the blocks the C code dropped are lost (%d of %d)" % (lost, kept))


def case_go_signal(a):
    """The Go runtime takes every signal: --snapshot-on-signal works through `heapsnap record`
    (kill the recorder), and a signal sent to the program itself is said to take no snapshot."""
    exe = build_go(a, "cgo_alloc.go", "cgo_alloc")
    out = os.path.join(a.workdir, "sig.hsnap")
    for f in os.listdir(a.workdir):
        if f.startswith("sig.hsnap") or f.startswith("direct.hsnap"):
            os.unlink(os.path.join(a.workdir, f))
    p = subprocess.Popen([a.heapsnap, "record", "-q", "--snapshot-on-signal=USR2", "-o", out, "--", exe, "20000", "20", "50"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    p.send_signal(signal.SIGUSR2)
    so, se = p.communicate(timeout=120)
    check(p.returncode == 0 and "mallocs 400000" in so, "the Go program runs to its end (%s)" % se.strip())
    snaps = hsnap_json(a, "snapshots", "--json", out)["snapshots"]
    check(len(snaps) == 1 and snaps[0]["complete"] and snaps[0]["trigger"] == "signal",
          "SIGUSR2 sent to record took a snapshot of the Go program (%s)" % snaps)
    direct = os.path.join(a.workdir, "direct.hsnap")
    p = subprocess.Popen([exe, "20000", "20", "50"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, LD_PRELOAD=a.shim, HEAPSNAP_OUTPUT=direct, HEAPSNAP_SNAPSHOT="signal:USR2"))
    time.sleep(0.5)
    p.send_signal(signal.SIGUSR2)
    so, se = p.communicate(timeout=120)
    check("replaced heapsnap's SIGUSR2 handler" in se, "a signal the program took is said to take no snapshot (%r)" % se)
    s = hsnap_json(a, "summary", "--json", direct)
    check(s["snapshots"] == 0, "... and none is taken")


def case_quick_exit(a):
    exe = build_c(a, "quick_exit.c", "quick_exit")
    r, path = record(a, "quick_exit", [exe, "5000"], ["--snapshot-at-exit"])
    check(r.returncode == 3 and r.stdout == "mallocs 5000 kept 2500\n", "the program quick_exits with 3 (%s)" % r.stderr)
    s = hsnap_json(a, "summary", "--json", path)
    check(s["end_reason"] == "quick_exit" and not s["truncated"], "the shim finished the capture at quick_exit (%r)" % s["end_reason"])
    check(s["alloc_calls"] == 5000 and s["free_calls"] == 2500 and s["leaked_blocks"] == 2500,
          "every call counted (%d, %d)" % (s["alloc_calls"], s["free_calls"]))
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    check(len(snaps) == 1 and snaps[0]["complete"] and snaps[0]["trigger"] == "exit", "the exit snapshot was taken")


def case_allocator_api(a):
    """Allocations through jemalloc's own API (mallocx) bypass malloc: said, not silently missed."""
    lib = find_library(ALLOCATORS["jemalloc"])
    if not lib:
        skip("libjemalloc2 is not installed")
    exe = build_c(a, "allocator_api.c", "allocator_api", lib)
    r, path = record(a, "allocator_api", [exe])
    check(r.returncode == 0, "the program runs (%s)" % r.stderr.strip())
    check("calls its allocator's own API, sdallocx" in r.stderr or "calls its allocator's own API, mallocx" in r.stderr,
          "stderr says the program bypasses malloc (%r)" % r.stderr.strip())
    s = hsnap_json(a, "summary", "--json", path)
    check(s["alloc_calls"] == 100 and s["free_calls"] == 100, "the malloc/free calls are counted, exactly")
    t = subprocess.run([a.heapsnap, "timeline", path], capture_output=True, text=True).stdout
    check("bypasses malloc and free" in t, "the capture says it too (a timeline marker)")


def case_own_malloc(a):
    """An executable that defines malloc itself (rustup's rustc links jemalloc so): refused by name."""
    exe = build_c(a, "own_malloc.c", "own_malloc")
    r, path = record(a, "own_malloc", [exe])
    check(r.returncode == 0 and r.stdout == "ok\n", "the program runs as it would (%s)" % r.stderr.strip())
    check("malloc is defined by the program itself ahead of heapsnap" in r.stderr, "stderr says why it is not traced (%r)" % r.stderr)
    s = hsnap_json(a, "summary", "--json", path)
    check(s["end_reason"].startswith("error: malloc is defined by the program itself"), "so does the capture (%r)" % s["end_reason"])
    check(s["alloc_calls"] == 0, "and it claims no allocation")


if __name__ == "__main__":
    casekit.main(globals(), ["--heapsnap", "--shim", "--source"])
