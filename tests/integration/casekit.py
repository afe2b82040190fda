"""What every integration case script shares: how a check passes or fails, how a case is skipped,
and how a command runs with a time bound.

Output convention (read by people in meson's test log): one "ok: ..." line per passed check, then
"FAIL: ..." and exit status 1 at the first failed one; exit status 77 is meson's "skipped".
"""
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
