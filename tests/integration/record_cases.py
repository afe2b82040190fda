#!/usr/bin/env python3
"""Integration tests of what `heapsnap record` says and how it exits when tracing cannot work or
has not finished (issue 28, item 7: messages that mislead).

  output_probe  an output the shim could not create (-o /proc/x, with or without %p, a missing
                directory) is refused before the program runs: exit 2, the path and the reason
                named, the program not run, no guess about static or setuid programs
  untraceable   a statically linked program (named by path or found through PATH, static-pie
                too) and, as root, a setgid or setuid one are refused without being run: exit 3
                and the reason; a #! script and a setuid program owned by the caller run traced
  no_capture    a run that leaves no capture at all (the loader refuses the shim; a script whose
                interpreter is statically linked) exits 3, names the program's own status, and
                does not guess "statically linked or setuid?"
  daemon        a program that forks and exits while its child runs on: the child's capture is
                reported as still being written by a running process, not as killed before its
                first flush; the child then completes a readable capture
  salvage_wait  after the program exits, record waits for its capture while another process holds
                its lock (a crash-salvage helper), and gives up with a note after 5 s

The lock these rely on is the shim's flock(LOCK_EX) on its capture; where the tests need it
regardless of the shim, the test program takes the same lock itself.

usage: record_cases.py CASE --heapsnap BIN --workdir DIR
Exit status: 0 pass, 1 fail, 77 skipped (meson's convention).
"""
import fcntl
import grp
import os
import pwd
import shutil
import subprocess
import sys
import textwrap
import time

import casekit
from casekit import fail, check, skip, run_bounded

TIMEOUT = 60
HEADER = 24  # bytes of a capture's file header


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEAPSNAP_") and k != "LD_PRELOAD"}
    env.update(extra)
    return env


def record(a, args, env=None, timeout=TIMEOUT):
    """Runs heapsnap record ARGS; returns (exit status, stderr text, seconds it took)."""
    t = time.monotonic()
    try:
        p = run_bounded([a.heapsnap, "record"] + args, timeout, env=env or clean_env(), cwd=a.workdir)
    except subprocess.TimeoutExpired:
        fail("heapsnap record %s did not end within %d s" % (" ".join(args), timeout))
    return p.returncode, p.stderr.decode(errors="replace"), time.monotonic() - t


def fresh(a, name):
    path = os.path.join(a.workdir, name)
    for f in os.listdir(a.workdir):
        if f == name or f.startswith(name + "."):
            os.unlink(os.path.join(a.workdir, f))
    return path


def locked(path):
    """Whether another open file description holds a lock on path (the shim's protocol)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def static_program(a):
    """A statically linked program that creates the file $MARK names and exits 7; None if no C
    compiler can link one statically."""
    exe = os.path.join(a.workdir, "static_prog")
    if os.path.exists(exe):
        return exe
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return None
    src = os.path.join(a.workdir, "static_prog.c")
    with open(src, "w") as f:
        f.write(textwrap.dedent("""\
            #include <fcntl.h>
            #include <stdlib.h>
            #include <unistd.h>
            int main(void) {
              const char *m = getenv("MARK");
              if (m) close(open(m, O_WRONLY | O_CREAT, 0644));
              return 7;
            }
            """))
    p = subprocess.run([cc, "-static", "-O1", "-o", exe, src], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return exe if p.returncode == 0 else None


# --- cases -------------------------------------------------------------------------------------

def case_output_probe(a):
    mark = fresh(a, "ran.mark")
    prog = ["touch", mark]
    env = clean_env()
    for out in ("/proc/x", "/proc/x.%p.hsnap", os.path.join(a.workdir, "no-such-dir", "x.hsnap")):
        rc, err, _ = record(a, ["-o", out, "--"] + prog, env=env)
        what = "record -o %s" % out.replace(a.workdir + "/", "")
        check(rc == 2, "%s: exit 2 (got %d: %s)" % (what, rc, err.strip()[:300]))
        first = err.splitlines()[0] if err else ""
        check(first.startswith("heapsnap: error: ") and out.split("%p")[0] in first and "cannot create" in first,
              "%s: an error naming the path (%r)" % (what, first))
        check(any(s in first for s in ("No such file", "Permission denied", "Read-only", "Operation not permitted")),
              "%s: the error gives the reason (strerror)" % what)
        check(not os.path.exists(mark), "%s: the program did not run" % what)
        check("statically linked" not in err and "setuid" not in err, "%s: no guess about static or setuid programs" % what)
    # A directory that takes files is still fine, %p and all.
    out = fresh(a, "probe-ok")
    rc, err, _ = record(a, ["-o", out + ".%p.hsnap", "--"] + prog, env=env)
    caps = [f for f in os.listdir(a.workdir) if f.startswith("probe-ok.")]
    check(rc == 0 and os.path.exists(mark) and len(caps) == 1,
          "record -o DIR/probe-ok.%%p.hsnap: runs and leaves one capture, no probe file (%d, %s, %s)" % (rc, caps, err.strip()[:200]))


def case_untraceable(a):
    static = static_program(a)
    mark = fresh(a, "ran.mark")
    env = clean_env(MARK=mark)
    if static:
        out = fresh(a, "static.hsnap")
        rc, err, _ = record(a, ["-o", out, "--", static], env=env)
        check(rc == 3, "a statically linked program: exit 3 (got %d: %s)" % (rc, err.strip()[:300]))
        check("heapsnap: error: " in err and "static_prog is statically linked: LD_PRELOAD cannot trace it" in err
              and "heapsnap.h" in err, "a statically linked program: says so and points to the client API (%r)" % err)
        check(not os.path.exists(mark) and not os.path.exists(out), "a statically linked program is not run, no capture")
        # Found through PATH, as execvp finds it: the message names the file it found.
        rc, err, _ = record(a, ["-o", out, "--", "static_prog"], env=dict(env, PATH=a.workdir + ":" + os.environ.get("PATH", "")))
        check(rc == 3 and ("static_prog (%s) is statically linked" % static) in err and not os.path.exists(mark),
              "a statically linked program found through PATH: refused, its path named (%d, %r)" % (rc, err))
    else:
        print("note: no C compiler links statically here: the static program's checks are skipped")
    # A static-pie program (ET_DYN without PT_INTERP), where one is at hand; never run.
    ldconfig = "/sbin/ldconfig"
    is_static_pie = os.path.exists(ldconfig) and shutil.which("file") and \
        b"static-pie" in subprocess.run(["file", "-L", ldconfig], stdout=subprocess.PIPE).stdout
    if is_static_pie:
        rc, err, _ = record(a, ["-o", fresh(a, "ldconfig.hsnap"), "--", ldconfig, "-p"])
        check(rc == 3 and "statically linked" in err, "a static-pie program (%s): refused (%d, %r)" % (ldconfig, rc, err))
    # A script: its (dynamically linked) interpreter is what runs, and is traced.
    script = os.path.join(a.workdir, "script.sh")
    with open(script, "w") as f:
        f.write('#!/bin/sh\ntouch "$MARK"\n')
    os.chmod(script, 0o755)
    out = fresh(a, "script.hsnap")
    rc, err, _ = record(a, ["-o", out, "--", script], env=env)
    check(rc == 0 and os.path.exists(mark) and os.path.getsize(out) > HEADER,
          "a #! script runs traced (%d, %s)" % (rc, err.strip()[:200]))
    os.unlink(mark)

    if os.geteuid() != 0:
        skip("setuid/setgid copies need root (the static checks passed)")
    if os.statvfs(a.workdir).f_flag & os.ST_NOSUID:
        skip("the work directory is on a nosuid mount (the static checks passed)")
    touch = shutil.which("touch")
    nogroup = next((g.gr_gid for g in grp.getgrall() if g.gr_name == "nogroup"), 65534)
    try:
        nobody = pwd.getpwnam("nobody").pw_uid
    except KeyError:
        nobody = 65534
    for what, owner, group, mode in (("setgid", 0, nogroup, 0o2755), ("setuid", nobody, 0, 0o4755)):
        copy = os.path.join(a.workdir, "touch-" + what)
        shutil.copy(touch, copy)
        os.chown(copy, owner, group)
        os.chmod(copy, mode)
        out = fresh(a, what + ".hsnap")
        rc, err, _ = record(a, ["-o", out, "--", copy, mark], env=env)
        check(rc == 3 and ("is %s: the loader ignores LD_PRELOAD" % what) in err,
              "a %s program (another id than ours): refused, exit 3 (%d, %r)" % (what, rc, err.strip()[:300]))
        check(not os.path.exists(mark) and not os.path.exists(out), "a %s program is not run" % what)
    # Set-user-ID to ourselves changes nothing: it runs, traced.
    copy = os.path.join(a.workdir, "touch-setuid-self")
    shutil.copy(touch, copy)
    os.chmod(copy, 0o4755)
    out = fresh(a, "self.hsnap")
    rc, err, _ = record(a, ["-o", out, "--", copy, mark], env=env)
    check(rc == 0 and os.path.exists(mark) and os.path.exists(out),
          "a program setuid to the caller's own id runs traced (%d, %s)" % (rc, err.strip()[:200]))


def case_no_capture(a):
    # The loader refuses the shim (it prints why) and runs the program untraced.
    out = fresh(a, "refused.hsnap")
    rc, err, _ = record(a, ["-o", out, "--", "sh", "-c", "exit 5"], env=clean_env(HEAPSNAP_PRELOAD="/dev/null"))
    check(rc == 3, "no capture (shim not loaded): exit 3, not the program's 5 or 0 (got %d: %s)" % (rc, err.strip()[:300]))
    check("heapsnap: error: " in err and "no capture was written" in err and "exited with status 5" in err,
          "no capture: an error that gives the program's own status (%r)" % err)
    check("statically linked or setuid" not in err, "no capture: no guess about static or setuid programs")
    check("LD_PRELOAD" in err, "no capture: says what is known (the shim never loaded, LD_PRELOAD)")
    # Killed by a signal, still no capture: exit 3, the signal named.
    rc, err, _ = record(a, ["-o", out, "--", "sh", "-c", "kill -TERM $$"], env=clean_env(HEAPSNAP_PRELOAD="/dev/null"))
    check(rc == 3 and "killed by signal 15" in err, "no capture, killed by SIGTERM: exit 3, the signal named (%d, %r)" % (rc, err))
    # A script whose interpreter is statically linked: record lets the script run (it cannot
    # know), and nothing traces it.
    static = static_program(a)
    if not static:
        print("note: no C compiler links statically here: the static interpreter's check is skipped")
        return
    script = os.path.join(a.workdir, "static-script")
    with open(script, "w") as f:
        f.write("#!%s\n" % static)
    os.chmod(script, 0o755)
    mark = fresh(a, "ran.mark")
    out = fresh(a, "static-script.hsnap")
    rc, err, _ = record(a, ["-o", out, "--", script], env=clean_env(MARK=mark))
    check(os.path.exists(mark), "a script with a static interpreter runs")
    check(rc == 3 and "exited with status 7" in err and "statically linked or setuid" not in err,
          "a script with a static interpreter: exit 3, its status 7 named (%d, %r)" % (rc, err))


DAEMON = r"""
import fcntl, os, sys, time
out, self_lock, report = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
r, w = os.pipe()
if os.fork():
    os.close(w)
    os.read(r, 1)          # the child has looked at its capture
    os._exit(0)            # the parent exits at once: a daemon's start
os.close(r)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
os.setsid()
cap = "%s.%d" % (out, os.getpid())
fd = os.open(cap, os.O_RDONLY)
try:
    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    state = "unlocked"
    fcntl.flock(fd, fcntl.LOCK_UN)
except BlockingIOError:
    state = "shim-locked"
if self_lock and state == "unlocked":
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # what the shim does, where it does not yet
with open(report, "w") as f:
    f.write(state)
os.write(w, b"x")
blocks = [bytearray(1000) for _ in range(2000)]
time.sleep(2.5)
"""


def case_daemon(a):
    prog = os.path.join(a.workdir, "daemon.py")
    with open(prog, "w") as f:
        f.write(DAEMON)
    report = os.path.join(a.workdir, "daemon.state")
    for self_lock in (True, False):
        if os.path.exists(report):
            os.unlink(report)
        out = fresh(a, "daemon%d.hsnap" % self_lock)
        rc, err, took = record(a, ["-o", out, "--", sys.executable, prog, out, "1" if self_lock else "0", report])
        state = open(report).read() if os.path.exists(report) else "?"
        children = [f for f in os.listdir(a.workdir) if f.startswith(os.path.basename(out) + ".")]
        check(rc == 0 and os.path.exists(out) and len(children) == 1,
              "daemon: the parent's capture and one child's (%d, %s, %s)" % (rc, children, err.strip()[-300:]))
        child = os.path.join(a.workdir, children[0])
        pid = children[0].rsplit(".", 1)[1]
        if self_lock or state == "shim-locked":
            check(("process %s is still running; its capture %s is still being written" % (pid, child)) in err,
                  "daemon (lock held by %s): the child is reported as still running (%r)"
                  % ("the shim" if state == "shim-locked" else "the program", err))
            check("killed before the first flush" not in err, "daemon: the running child is not called killed")
            check(took < 2.0, "daemon: record did not wait for the daemon (%.1f s; if it waited for the parent's "
                  "capture, the forked child kept the parent's locked descriptor open)" % took)
        else:
            print("note: this shim takes no lock on its capture: its daemon check is left to the run above")
        deadline = time.time() + 20
        while time.time() < deadline and locked(child):
            time.sleep(0.1)
        time.sleep(0.3)  # (a lock the program took goes before the shim's last flush)
        check(not locked(child) and os.path.getsize(child) > HEADER, "daemon: the child finished its capture")
        p = subprocess.run([a.heapsnap, "summary", child], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
        check(p.returncode == 0, "daemon: heapsnap summary reads the child's capture (%r)" % p.stderr[-200:])


SALVAGE = r"""
import fcntl, os, sys, time
out, hold = sys.argv[1], float(sys.argv[2])
# A crash-salvage helper holds a copy of the shim's descriptor of the capture, and with it the
# shim's lock, after the program is gone. Where the shim takes no lock, the copy takes it.
fd = None
for n in os.listdir("/proc/self/fd"):
    try:
        if os.readlink("/proc/self/fd/" + n) == out:
            fd = os.dup(int(n))
    except OSError:
        pass
if fd is None:
    sys.exit("salvage.py: the shim's descriptor of %s is not open" % out)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # (the shim's own lock: this description holds it already)
r, w = os.pipe()
if os.fork() == 0:
    os.close(r)
    null = os.open(os.devnull, os.O_RDWR)
    for n in (0, 1, 2):
        os.dup2(null, n)
    os.write(w, b"x")
    time.sleep(hold)
    os._exit(0)
os.close(w)
os.read(r, 1)
"""


def case_salvage_wait(a):
    prog = os.path.join(a.workdir, "salvage.py")
    with open(prog, "w") as f:
        f.write(SALVAGE)
    out = fresh(a, "salvage.hsnap")
    rc, err, took = record(a, ["-o", out, "--", sys.executable, prog, out, "1.5"])
    check(rc == 0 and "heapsnap: wrote %s" % out in err, "salvage: recorded (%d, %r)" % (rc, err[-300:]))
    check(took >= 1.3, "salvage: record waited for the helper to release the capture (%.1f s)" % took)
    check("still being written 5 s after" not in err, "salvage: no note about giving up")
    out = fresh(a, "salvage-stuck.hsnap")
    rc, err, took = record(a, ["-o", out, "--", sys.executable, prog, out, "8"], timeout=TIMEOUT)
    check(rc == 0 and "heapsnap: wrote %s" % out in err, "salvage, stuck helper: recorded (%d, %r)" % (rc, err[-300:]))
    check(4.5 <= took < 7.5, "salvage, stuck helper: record gave up after about 5 s (%.1f s)" % took)
    check(("heapsnap: note: %s is still being written 5 s after" % out) in err, "salvage, stuck helper: a note says so (%r)" % err)
    time.sleep(max(0.0, 8.5 - took))


if __name__ == "__main__":
    casekit.main(globals(), ["--heapsnap"])
