"""What every integration case script shares: how a check passes or fails, how a case is skipped,
and how a command runs with a time bound.

Output convention (read by people in meson's test log): one "ok: ..." line per passed check, then
"FAIL: ..." and exit status 1 at the first failed one; exit status 77 is meson's "skipped".
"""
import argparse
import os
import signal
import subprocess
import sys


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print("ok:", msg)


def skip(msg):
    print("SKIP:", msg)
    sys.exit(77)


def run_bounded(cmd, timeout, input=None, **kw):
    """subprocess.run in a session of its own: on timeout the whole process group is killed (and
    TimeoutExpired raised), so a traced program that hangs (its parent, `record`, killed) never
    outlives the test."""
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, **kw)
    try:
        out, err = p.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def main(scope, paths, runner=None, options=()):
    """A case script's command line: CASE, --workdir DIR, the path options `paths` (required, made
    absolute) and `options` ((flag, argparse keywords) pairs). Runs scope's case_CASE in DIR/CASE
    (made absolute, created) as case(a), or case(runner(a), a) when `runner` is given, then prints
    PASS. scope: the script's globals()."""
    cases = {k[5:]: v for k, v in scope.items() if k.startswith("case_")}
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(cases))
    for p in paths:
        ap.add_argument(p, required=True)
    ap.add_argument("--workdir", required=True)
    for flag, kw in options:
        ap.add_argument(flag, **kw)
    a = ap.parse_args()
    for p in paths:
        dest = p.lstrip("-").replace("-", "_")
        setattr(a, dest, os.path.abspath(getattr(a, dest)))
    a.workdir = os.path.join(os.path.abspath(a.workdir), a.case)
    os.makedirs(a.workdir, exist_ok=True)
    if runner:
        cases[a.case](runner(a), a)
    else:
        cases[a.case](a)
    print("PASS")


def flush_hash(b):
    """proto/flush_hash.h, written again: a second implementation checks the shim's."""
    m, k1, k2 = (1 << 64) - 1, 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F
    n = len(b)
    h = k2 ^ ((n * k1) & m)
    rot = lambda x: ((x << 31) | (x >> 33)) & m
    i = 0
    while n - i >= 8:
        h ^= (int.from_bytes(b[i:i + 8], "little") * k1) & m
        h = (rot(h) * k2) & m
        i += 8
    if i < n:
        h ^= ((int.from_bytes(b[i:] + bytes(8 - (n - i)), "little") * k1) & m) ^ (n - i)
        h = (rot(h) * k2) & m
    h ^= h >> 33
    h = (h * k1) & m
    return h ^ (h >> 29)
