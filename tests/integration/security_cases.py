#!/usr/bin/env python3
"""Integration tests: the shim is safe to leave in an environment (issue 7.6).

- Capture files are created 0600 with O_EXCL|O_NOFOLLOW: a symlink planted at the output path is
  neither followed nor replaced, an existing file is never overwritten.
- In secure-execution mode (setuid/setgid programs: AT_SECURE) the shim ignores its variables.
- No value of HEAPSNAP_OUTPUT (or of the other HEAPSNAP_* variables) makes it write anywhere but
  the named file (or its documented FILE.<pid> fallback) or run a command, and the program runs
  exactly as it does natively.

usage: security_cases.py CASE --heapsnap BIN --shim LIB --programs DIR --workdir DIR
Exit status: 0 pass, 1 fail, 77 skipped (meson's convention).
"""
import grp
import os
import pwd
import re
import shutil
import stat
import subprocess

import casekit
from casekit import fail, check, skip, run_bounded

TIMEOUT = 60


def tree(root):
    """Every path under root (files, dirs, symlinks), relative, with symlink targets."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            out[os.path.relpath(p, root)] = os.readlink(p) if os.path.islink(p) else None
    return out


class Runner:
    def __init__(self, a):
        self.a = a
        self.work = a.workdir
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self.prog = os.path.join(a.programs, "misbehave")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("HEAPSNAP_") and k != "LD_PRELOAD"}

    def run(self, args, env=None, cwd=None, what="run", timeout=TIMEOUT):
        try:
            return run_bounded(args, timeout, env=env or self.env, cwd=cwd)
        except subprocess.TimeoutExpired:
            fail("%s: %s did not end within %d s" % (what, " ".join(args), timeout))

    def traced(self, args, output, cwd=None, extra=None, timeout=TIMEOUT):
        env = dict(self.env, LD_PRELOAD=self.a.shim)
        if output is not None:
            env["HEAPSNAP_OUTPUT"] = output
        env.update(extra or {})
        return self.run(args, env=env, cwd=cwd, what="traced run", timeout=timeout)

    def same(self, nat, tr, what, stderr_note=None):
        check(tr.stdout == nat.stdout, "%s: stdout as native" % what)
        err = tr.stderr
        if stderr_note and err.startswith(stderr_note):
            err = err[len(stderr_note):]
        # When it cannot trace, the shim may say so in one line (HEAPSNAP_DEBUG, or a file it
        # cannot create): short, printable, and nothing else.
        if err.startswith(b"heapsnap: "):
            line, _, rest = err.partition(b"\n")
            check(len(line) < 512 and b"\0" not in line,
                  "%s: the shim's diagnostic is one short line (%d bytes, %d NULs: memory not meant "
                  "for stderr)" % (what, len(line), line.count(b"\0")))
            err = rest
        check(err == nat.stderr, "%s: stderr as native (%r)" % (what, tr.stderr[:300]))
        check(tr.returncode == nat.returncode, "%s: exit status %d as native %d" % (what, tr.returncode, nat.returncode))

    def readable(self, path, what):
        r = subprocess.run([self.a.heapsnap, "summary", "--json", path], capture_output=True, timeout=120)
        check(r.returncode == 0, "%s: %s reads back" % (what, os.path.basename(path)))

    def mode_is_0600(self, path, what):
        st = os.lstat(path)
        check(stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600,
              "%s: %s is a regular file with mode 0600 (%o)" % (what, os.path.basename(path), stat.S_IMODE(st.st_mode)))


def case_file_mode(r, a):
    # 0600 whatever the umask, for the capture and for a forked child's capture.
    old = os.umask(0)
    try:
        out = os.path.join(r.work, "mode.hsnap")
        tr = r.run([a.heapsnap, "record", "-q", "-o", out, "--", r.prog, "child", "3"], env=r.env)
        check(tr.returncode == 3, "record under umask 0 runs the program")
        r.mode_is_0600(out, "record, umask 0")
        direct = os.path.join(r.work, "direct.hsnap")
        tr = r.traced([r.prog, "vfork", "5"], direct)
        check(tr.returncode == 0, "vfork program runs traced")
        files = [f for f in os.listdir(r.work) if f.startswith("direct.hsnap")]
        check(len(files) >= 3, "the exec'd children wrote captures of their own (%s)" % files)
        for f in files:
            r.mode_is_0600(os.path.join(r.work, f), "LD_PRELOAD, umask 0")
        snap = os.path.join(r.work, "snap.hsnap")
        tr = r.run([a.heapsnap, "record", "-q", "--snapshot-at-exit", "-o", snap, "--", r.prog, "child", "3"], env=r.env)
        r.mode_is_0600(snap, "with a snapshot")
        check(not [f for f in os.listdir(r.work) if f.endswith(".tmp")], "no snapshot temporary file left behind")
    finally:
        os.umask(old)


def case_symlink(r, a):
    # A symlink planted at the output path (as in a shared /tmp): the shim must not write through
    # it, whether its target exists or not, nor remove it.
    nat = r.run([r.prog, "child", "4"])
    victim = os.path.join(r.work, "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    os.chmod(victim, 0o644)
    link = os.path.join(r.work, "out.hsnap")
    os.symlink(victim, link)
    tr = r.traced([r.prog, "child", "4"], link)
    r.same(nat, tr, "symlink to an existing file")
    check(open(victim).read() == "precious\n" and stat.S_IMODE(os.stat(victim).st_mode) == 0o644,
          "the symlink's target is untouched")
    check(os.path.islink(link) and os.readlink(link) == victim, "the symlink is still there, unchanged")
    others = [f for f in os.listdir(r.work) if f.startswith("out.hsnap.")]
    check(len(others) == 1, "the capture went to a fresh name beside it (%s)" % others)
    r.mode_is_0600(os.path.join(r.work, others[0]), "fallback capture")
    r.readable(os.path.join(r.work, others[0]), "fallback capture")

    # A dangling symlink: O_CREAT alone would create its target.
    target = os.path.join(r.work, "created-through-link")
    dangling = os.path.join(r.work, "dangling.hsnap")
    os.symlink(target, dangling)
    tr = r.traced([r.prog, "child", "4"], dangling)
    r.same(nat, tr, "dangling symlink")
    check(not os.path.lexists(target), "a dangling symlink's target is not created")

    # A symlink to a directory outside, with the output named inside the link's directory.
    outside = os.path.join(r.work, "outside")
    os.mkdir(outside)
    os.symlink(os.path.join(outside, "x.hsnap"), os.path.join(r.work, "dirlink.hsnap"))
    tr = r.traced([r.prog, "child", "4"], os.path.join(r.work, "dirlink.hsnap"))
    check(os.listdir(outside) == [], "nothing written through a symlink into another directory")

    # record: refuses an existing path without --force; with --force it replaces the link itself.
    tr = r.run([a.heapsnap, "record", "-q", "-o", link, "--", r.prog, "child", "4"])
    check(tr.returncode != 4 and open(victim).read() == "precious\n", "record refuses a path that exists (%d)" % tr.returncode)
    tr = r.run([a.heapsnap, "record", "-q", "--force", "-o", link, "--", r.prog, "child", "4"])
    check(tr.returncode == 4, "record --force runs the program")
    check(open(victim).read() == "precious\n", "record --force leaves the symlink's target alone")
    check(not os.path.islink(link), "record --force replaced the symlink by a capture")
    r.mode_is_0600(link, "record --force")


def case_existing(r, a):
    nat = r.run([r.prog, "child", "4"])
    existing = os.path.join(r.work, "existing.hsnap")
    with open(existing, "w") as f:
        f.write("someone else's file\n")
    os.chmod(existing, 0o640)
    tr = r.traced([r.prog, "child", "4"], existing)
    r.same(nat, tr, "existing output file")
    check(open(existing).read() == "someone else's file\n", "an existing file is not overwritten")
    check(stat.S_IMODE(os.stat(existing).st_mode) == 0o640, "nor has its mode changed")
    tr = r.run([a.heapsnap, "record", "-q", "-o", existing, "--", r.prog, "child", "4"])
    check(open(existing).read() == "someone else's file\n", "record does not overwrite it without --force")
    # A directory named as the output.
    d = os.path.join(r.work, "adir.hsnap")
    os.mkdir(d)
    tr = r.traced([r.prog, "child", "4"], d)
    r.same(nat, tr, "output names a directory")
    check(os.listdir(d) == [], "nothing written into a directory named as the output")


def case_setuid(r, a):
    # Secure-execution mode. The loader ignores LD_PRELOAD paths there, so the probe is linked
    # against the shim itself (absolute run path); its setgid/setuid copies must run untraced.
    if os.geteuid() != 0:
        skip("needs root to make setuid/setgid copies")
    probe = os.path.join(a.programs, "secure_probe")
    plain = os.path.join(r.work, "probe-plain")
    shutil.copy(probe, plain)
    out = os.path.join(r.work, "plain.hsnap")
    p = r.run([plain], env=dict(r.env, HEAPSNAP_OUTPUT=out))
    check(p.stdout == b"AT_SECURE=0\n" and os.path.exists(out), "the plain probe is traced (the shim is linked in)")

    # setgid to another group, run by root: egid != rgid, so AT_SECURE=1.
    sgid = os.path.join(r.work, "probe-setgid")
    shutil.copy(probe, sgid)
    nogroup = grp.getgrnam("nogroup").gr_gid if "nogroup" in [g.gr_name for g in grp.getgrall()] else 65534
    os.chown(sgid, 0, nogroup)
    os.chmod(sgid, 0o2755)
    out = os.path.join(r.work, "setgid.hsnap")
    p = r.run([sgid], env=dict(r.env, HEAPSNAP_OUTPUT=out, HEAPSNAP_SAMPLE_BYTES="1"))
    if p.stdout == b"AT_SECURE=0\n":
        skip("the file system ignores the setgid bit (nosuid?)")
    check(p.returncode == 0 and p.stdout == b"AT_SECURE=1\n", "the setgid probe runs in secure mode (%r %r)" % (p.stdout, p.stderr))
    check(not [f for f in os.listdir(r.work) if f.startswith("setgid.hsnap")], "the setgid probe wrote no capture")

    # setuid root, run by an unprivileged user who names a file in a directory they can write:
    # the real attack (a root-owned file where the caller says).
    if not shutil.which("setpriv"):
        skip("setpriv missing")
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        skip("no user nobody")
    suid = os.path.join(r.work, "probe-setuid")
    shutil.copy(probe, suid)
    os.chown(suid, 0, 0)
    os.chmod(suid, 0o4755)
    drop = os.path.join(r.work, "drop")
    os.mkdir(drop)
    os.chmod(drop, 0o1777)
    os.chmod(r.work, 0o755)
    out = os.path.join(drop, "setuid.hsnap")
    cmd = ["setpriv", "--reuid=%d" % nobody.pw_uid, "--regid=%d" % nobody.pw_gid, "--clear-groups", suid]
    p = r.run(cmd, env=dict(r.env, HEAPSNAP_OUTPUT=out))
    if p.returncode != 0 and b"Permission denied" in p.stderr:
        skip("nobody cannot reach the build tree (%s)" % p.stderr.decode().strip())
    check(p.returncode == 0 and p.stdout == b"AT_SECURE=1\n", "the setuid probe run by nobody is in secure mode (%r %r)" % (p.stdout, p.stderr))
    check(os.listdir(drop) == [], "the setuid probe wrote nothing where its caller said (%s)" % os.listdir(drop))
    # And the same unprivileged caller with the non-setuid copy is traced (so the check is real).
    os.chmod(plain, 0o755)
    out2 = os.path.join(drop, "plain-nobody.hsnap")
    cmd = ["setpriv", "--reuid=%d" % nobody.pw_uid, "--regid=%d" % nobody.pw_gid, "--clear-groups", plain]
    p = r.run(cmd, env=dict(r.env, HEAPSNAP_OUTPUT=out2))
    check(p.returncode == 0 and os.path.exists(out2), "the plain probe run by nobody is traced")


def case_odd_output(r, a):
    # Odd HEAPSNAP_OUTPUT values: the program runs exactly as natively, and at most the one
    # named file (taken literally: only %p is expanded) appears; no command runs.
    sandbox = os.path.join(r.work, "sandbox")
    cwd = os.path.join(sandbox, "cwd")
    nat = r.run([r.prog, "child", "6"])
    pid_digits = None
    values = [
        ("empty", "", set()),
        ("huge", "x" * 100000, set()),
        ("just under the limit", "y" * 4000, set()),  # one component past NAME_MAX
        ("long %p expansion", "z" + "%p" * 300, set()),
        ("printf directives", "cap-%n%s%x%d%%-%.9999s.hsnap", {"cwd/cap-%n%s%x%d%%-%.9999s.hsnap"}),
        ("shell $()", "$(touch PWNED)", {"cwd/$(touch PWNED)"}),
        ("shell backquotes", "`touch PWNED`", {"cwd/`touch PWNED`"}),
        ("shell pipe", "|touch PWNED", {"cwd/|touch PWNED"}),
        ("shell ;", ";touch PWNED;", {"cwd/;touch PWNED;"}),
        ("dash", "-", {"cwd/-"}),
        ("newline", "cap\nname", {"cwd/cap\nname"}),
        ("relative", "rel.hsnap", {"cwd/rel.hsnap"}),
        ("relative, parent", "../up.hsnap", {"up.hsnap"}),
        ("relative, missing dir", "nodir/x.hsnap", set()),
        ("absolute, missing dirs", "/nonexistent-heapsnap-dir/a/b.hsnap", set()),
        ("trailing slash", "trail/", set()),
        # A name that exists gets the documented FILE.<pid> fallback: here "." + "." + pid.
        ("the current directory", ".", r"cwd/\.\.\d+"),
        ("pid", "cap.%p", r"cwd/cap\.\d+"),
    ]
    for what, value, expect in values:
        shutil.rmtree(sandbox, ignore_errors=True)
        os.makedirs(cwd)
        before = tree(sandbox)
        tr = r.traced([r.prog, "child", "6"], value, cwd=cwd)
        r.same(nat, tr, "HEAPSNAP_OUTPUT %s" % what)
        new = set(tree(sandbox)) - set(before)
        if isinstance(expect, str):
            check(len(new) == 1 and re.fullmatch(expect, next(iter(new))),
                  "HEAPSNAP_OUTPUT %s: only %s was created (%s)" % (what, expect, new))
        else:
            check(new == expect, "HEAPSNAP_OUTPUT %s: created exactly %s (%s)" % (what, expect or "nothing", new))
        for f in new:
            r.mode_is_0600(os.path.join(sandbox, f), "HEAPSNAP_OUTPUT %s" % what)
            r.readable(os.path.join(sandbox, f), "HEAPSNAP_OUTPUT %s" % what)
        check(not os.path.exists("/nonexistent-heapsnap-dir"), "no directory is ever created")
        check(not os.path.exists(os.path.join(cwd, "PWNED")) and not os.path.exists("PWNED"), "no command ran")


def case_relative_fork(r, a):
    # A relative HEAPSNAP_OUTPUT names a file relative to where the program started: a child
    # forked after the program moved elsewhere (chdir) writes beside that file, not into the new
    # current directory.
    cwd = os.path.join(r.work, "start")
    elsewhere = os.path.join(r.work, "elsewhere")
    os.makedirs(cwd)
    os.makedirs(elsewhere)
    nat = r.run([r.prog, "chdir_fork", elsewhere], cwd=cwd)
    tr = r.traced([r.prog, "chdir_fork", elsewhere], "rel.hsnap", cwd=cwd)
    r.same(nat, tr, "relative output, chdir, fork")
    check(os.path.exists(os.path.join(cwd, "rel.hsnap")), "the parent's capture is where it started")
    check(os.listdir(elsewhere) == [], "nothing written into the directory the program moved to (%s)" % os.listdir(elsewhere))
    kids = [f for f in os.listdir(cwd) if f.startswith("rel.hsnap.")]
    check(len(kids) == 1, "the forked child's capture is beside the parent's (%s)" % kids)


def case_odd_settings(r, a):
    # The other variables, set to nonsense: the program still runs as natively. An invalid
    # HEAPSNAP_SNAPSHOT is reported on stderr by design (a typo must not silently record nothing).
    note = b"heapsnap: HEAPSNAP_SNAPSHOT is not understood; tracing without snapshots\n"
    nat = r.run([r.prog, "child", "6"])
    settings = [
        {"HEAPSNAP_SAMPLE_BYTES": "-1"}, {"HEAPSNAP_SAMPLE_BYTES": "abc"},
        {"HEAPSNAP_SAMPLE_BYTES": "99999999999999999999999999"}, {"HEAPSNAP_SAMPLE_BYTES": "0"},
        {"HEAPSNAP_STACK_DEPTH": "100000"}, {"HEAPSNAP_STACK_DEPTH": "-5"},
        {"HEAPSNAP_FLUSH_MS": "0"}, {"HEAPSNAP_FLUSH_MS": "%n"}, {"HEAPSNAP_ZSTD_LEVEL": "999"},
        {"HEAPSNAP_FORK": "%s%s%s"}, {"HEAPSNAP_NO_FOLLOW": "$(touch PWNED)"},
        {"HEAPSNAP_SNAPSHOT": "%n%s%s"}, {"HEAPSNAP_SNAPSHOT": "x" * 10000},
        {"HEAPSNAP_SNAPSHOT": "every:0,max:99999999999"}, {"HEAPSNAP_SNAPSHOT": "signal:SIGKILL"},
        {"HEAPSNAP_SNAPSHOT": "signal:9"}, {"HEAPSNAP_DEBUG": "%n"},
    ]
    work = os.path.join(r.work, "settings")
    os.makedirs(work)
    for i, extra in enumerate(settings):
        out = os.path.join(work, "s%d.hsnap" % i)
        tr = r.traced([r.prog, "child", "6"], out, cwd=work, extra=extra)
        r.same(nat, tr, "%s" % extra, stderr_note=note)
        check(os.path.exists(out), "%s: the capture is written" % list(extra)[0])
        r.readable(out, "%s" % list(extra)[0])
    check(not os.path.exists(os.path.join(work, "PWNED")), "no command ran")
    # A snapshot signal that is a fault signal must not turn a crash into an endless loop of
    # faults (the shim's flag-setting handler returns to the faulting instruction).
    nat = r.run([r.prog, "crash", "10"])
    for sig in ("11",):
        out = os.path.join(work, "crash-%s.hsnap" % sig)
        tr = r.traced([r.prog, "crash", "10"], out, cwd=work, extra={"HEAPSNAP_SNAPSHOT": "signal:" + sig}, timeout=15)
        r.same(nat, tr, "HEAPSNAP_SNAPSHOT=signal:%s on a crashing program" % sig, stderr_note=note)


if __name__ == "__main__":
    casekit.main(globals(), ["--heapsnap", "--shim", "--programs"], runner=Runner)
