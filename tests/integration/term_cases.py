#!/usr/bin/env python3
"""Integration tests of the terminal polish (issue 9, item 4): colour, exit codes, the manual.

  colour      every text command run with stdout on a pseudo-terminal writes colour; the same
              command piped writes none, and its piped text is the terminal's text without the
              escape codes; --json, flamegraph and export stay plain on a terminal
  no_colour   on a terminal: NO_COLOR=1, --color=never (before or after the command) and
              TERM=dumb turn colour off; an empty NO_COLOR does not; --color=always forces colour
              into a pipe, NO_COLOR or not
  stderr      error messages and notes are coloured when stderr is a terminal and plain when
              piped, for input errors and usage errors alike, whatever stdout is
  exit_codes  0 success, 1 bad or missing input, 2 usage error, 3 a program record cannot start,
              on every command that reads a capture
  man         the build made heapsnap.1 and heapsnap-COMMAND.1 for every command `heapsnap --help`
              lists; each renders with groff (all warnings on) without a word on stderr and with
              man -l; meson installs them to man1

usage: term_cases.py CASE --heapsnap BIN --programs DIR --workdir DIR [--builddir DIR]
Exit status: 0 pass, 1 fail, 77 skipped (meson's convention).
"""
import argparse
import errno
import json
import os
import pty
import re
import select
import shutil
import subprocess
import time

from casekit import fail, check, skip

ESC = b"\x1b["
ANSI = re.compile(rb"\x1b\[[0-9;]*m")


def base_env(**extra):
    """The environment of a person at a colour terminal, whatever the test runner's is."""
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    env["TERM"] = "xterm-256color"
    env.update(extra)
    return env


def run_on_tty(cmd, tty_stdout=True, tty_stderr=False, env=None, timeout=120):
    """Runs cmd with stdout and stderr each on a pseudo-terminal of its own or on a pipe.
    Returns (exit status, stdout bytes, stderr bytes), a terminal's \r\n made \n."""
    ends = []  # per stream: (fd the child gets, fd we read, is a terminal)
    for tty in (tty_stdout, tty_stderr):
        if tty:
            master, slave = pty.openpty()
            ends.append((slave, master, True))
        else:
            r, w = os.pipe()
            ends.append((w, r, False))
    try:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=ends[0][0], stderr=ends[1][0],
                             env=env if env is not None else base_env())
    finally:
        for child_end, _, _ in ends:
            os.close(child_end)
    got = {read_end: b"" for _, read_end, _ in ends}
    fds = list(got)
    deadline = time.time() + timeout
    # Read both as they come: a full terminal or pipe would stop the program.
    while fds:
        if time.time() > deadline:
            p.kill()
            fail("%s did not finish in %d s" % (" ".join(cmd), timeout))
        ready, _, _ = select.select(fds, [], [], 1.0)
        for fd in ready:
            try:
                data = os.read(fd, 65536)
            except OSError as e:  # Linux: EIO on a terminal's master once the program is gone
                if e.errno != errno.EIO:
                    raise
                data = b""
            if data:
                got[fd] += data
            else:
                fds.remove(fd)
    rc = p.wait(timeout=timeout)
    out = []
    for _, read_end, tty in ends:
        os.close(read_end)
        out.append(got[read_end].replace(b"\r\n", b"\n") if tty else got[read_end])
    return rc, out[0], out[1]


def run_piped(cmd, env=None):
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env if env is not None else base_env(), timeout=300)
    return p.returncode, p.stdout, p.stderr


# --- a capture with a snapshot ------------------------------------------------------------------

def make_capture(a):
    """Records tests/programs/snapshot_patterns (every allocation, a snapshot at exit); returns
    the capture and the address of a block the snapshot holds."""
    os.makedirs(a.workdir, exist_ok=True)
    path = os.path.join(a.workdir, "term.hsnap")
    if os.path.exists(path):
        os.unlink(path)
    prog = os.path.join(a.programs, "snapshot_patterns")
    p = subprocess.run([a.heapsnap, "record", "-q", "--sample-bytes", "1", "--snapshot-at-exit", "-o", path, "--", prog],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    if p.returncode != 0 or not os.path.exists(path):
        fail("record snapshot_patterns: exit %d: %s" % (p.returncode, p.stderr))
    addr = next((l.split()[1] for l in p.stdout.splitlines() if l.startswith("list_head ")), None)
    if not addr:
        fail("snapshot_patterns printed no list_head address: %r" % p.stdout)
    return path, addr


def text_commands(cap, addr):
    """Every command whose output is text for people, on a capture that has what it needs."""
    return [
        ["summary", cap],
        ["top-allocators", cap],
        ["top-allocators", "--by", "calls", cap],
        ["leaks", cap],
        ["peak", cap],
        ["timeline", cap],
        ["snapshots", cap],
        ["unreachable", cap],
        ["top-retainers", cap],
        ["top-retainers", "--by", "site", cap],
        ["dominators", cap],
        ["path", cap, addr],
        ["suspects", cap],
        ["diff", cap + ":0", cap + ":0"],
    ]


# --- cases -------------------------------------------------------------------------------------

def case_colour(a):
    cap, addr = make_capture(a)
    for args in text_commands(cap, addr):
        what = "heapsnap " + " ".join(args).replace(cap, "CAP")
        rc, out, err = run_on_tty([a.heapsnap] + args)
        check(rc == 0 and out.strip(), "%s on a terminal: exit 0 with output (%r)" % (what, err[-200:]))
        check(ESC in out, "%s on a terminal: coloured" % what)
        check(ANSI.sub(b"", out).count(ESC) == 0, "%s: every escape code is a colour (SGR) code" % what)
        prc, pout, perr = run_piped([a.heapsnap] + args)
        check(prc == 0 and ESC not in pout and ESC not in perr, "%s piped: no escape code" % what)
        check(ANSI.sub(b"", out) == pout,
              "%s: the terminal's text without its colours is the piped text" % what)
    # Data stays data, even on a terminal.
    for args in (["summary", "--json", cap], ["top-allocators", "--json", cap], ["top-retainers", "--json", cap],
                 ["flamegraph", cap], ["export", "--format", "collapsed", cap],
                 ["export", "--format", "graph-json", cap]):
        what = "heapsnap " + " ".join(args).replace(cap, "CAP")
        rc, out, err = run_on_tty([a.heapsnap] + args)
        check(rc == 0 and out and ESC not in out, "%s on a terminal: plain data" % what)
        if "--json" in args or "graph-json" in args:
            try:
                json.loads(out)
            except ValueError as e:
                fail("%s on a terminal: JSON does not parse: %s" % (what, e))


def case_no_colour(a):
    cap, _ = make_capture(a)
    hs = a.heapsnap
    tty = [
        ("NO_COLOR=1", [hs, "top-allocators", cap], base_env(NO_COLOR="1"), False),
        ("NO_COLOR=yes, summary", [hs, "summary", cap], base_env(NO_COLOR="yes"), False),
        ("an empty NO_COLOR (means unset)", [hs, "top-allocators", cap], base_env(NO_COLOR=""), True),
        ("--color=never after the command", [hs, "top-allocators", "--color=never", cap], base_env(), False),
        ("--color never before the command", [hs, "--color", "never", "top-allocators", cap], base_env(), False),
        ("--color=auto", [hs, "leaks", "--color=auto", cap], base_env(), True),
        ("TERM=dumb", [hs, "leaks", cap], base_env(TERM="dumb"), False),
        ("TERM=dumb --color=always", [hs, "leaks", "--color=always", cap], base_env(TERM="dumb"), True),
        ("NO_COLOR=1 --color=always", [hs, "summary", "--color=always", cap], base_env(NO_COLOR="1"), True),
    ]
    for what, cmd, env, want in tty:
        rc, out, err = run_on_tty(cmd, env=env)
        check(rc == 0 and (ESC in out) == want,
              "on a terminal with %s: %s (exit %d)" % (what, "coloured" if want else "no colour", rc))
    plain = run_piped([hs, "top-allocators", cap])[1]
    for what, cmd, env in [
        ("--color=always", [hs, "top-allocators", "--color=always", cap], base_env()),
        ("--color=always before the command", [hs, "--color=always", "top-allocators", cap], base_env()),
        ("--color=always and NO_COLOR=1", [hs, "top-allocators", "--color=always", cap], base_env(NO_COLOR="1")),
    ]:
        rc, out, err = run_piped(cmd, env=env)
        check(rc == 0 and ESC in out, "piped with %s: coloured" % what)
        check(ANSI.sub(b"", out) == plain, "piped with %s: the same text once the colours are removed" % what)
    rc, out, err = run_piped([hs, "top-allocators", "--color=never", cap])
    check(rc == 0 and out == plain, "piped with --color=never: as piped without it")
    rc, out, err = run_piped([hs, "summary", "--color=sometimes", cap])
    check(rc == 2 and b"--color" in err, "--color=sometimes: usage error, exit 2")


def case_stderr(a):
    cap, _ = make_capture(a)
    hs = a.heapsnap
    missing = os.path.join(a.workdir, "missing.hsnap")
    for what, cmd, code in [("a missing capture", [hs, "summary", missing], 1),
                            ("an unknown option", [hs, "leaks", "--bogus", cap], 2),
                            ("an unknown command", [hs, "bogus", cap], 2),
                            ("a snapshot index the capture does not have", [hs, "unreachable", "--snapshot", "7", cap], 1)]:
        for out_tty in (False, True):
            rc, out, err = run_on_tty(cmd, tty_stdout=out_tty, tty_stderr=True)
            check(rc == code and ESC in err and b"error:" in ANSI.sub(b"", err),
                  "%s, stderr a terminal%s: exit %d, coloured 'error:'" % (what, " (stdout too)" if out_tty else "", code))
        rc, out, err = run_on_tty(cmd, tty_stdout=True, tty_stderr=False)
        check(rc == code and ESC not in err and err.startswith(b"heapsnap: error: "),
              "%s, stderr piped (stdout a terminal): plain 'heapsnap: error: ...'" % what)
    rc, out, err = run_piped([hs, "summary", "--color=always", missing])
    check(rc == 1 and ESC in err, "a missing capture with --color=always, stderr piped: coloured")
    # Notes about the input (a cut capture) are coloured the same way; the data on stdout is not.
    cut = os.path.join(a.workdir, "cut.hsnap")
    with open(cap, "rb") as f, open(cut, "wb") as g:
        g.write(f.read()[:-10])
    rc, out, err = run_on_tty([hs, "flamegraph", cut], tty_stdout=False, tty_stderr=True)
    check(rc == 0 and out and ESC not in out and ESC in err and b"note: the capture is truncated" in ANSI.sub(b"", err),
          "flamegraph of a cut capture, stderr a terminal: a coloured note, plain data")
    rc, out, err = run_piped([hs, "flamegraph", cut])
    check(rc == 0 and ESC not in err and b"heapsnap: note: the capture is truncated" in err,
          "flamegraph of a cut capture, piped: a plain 'heapsnap: note: ...'")


def case_exit_codes(a):
    cap, addr = make_capture(a)
    hs = a.heapsnap
    junk = os.path.join(a.workdir, "junk.hsnap")
    with open(junk, "wb") as f:
        f.write(bytes(range(256)) * 16)
    missing = os.path.join(a.workdir, "missing.hsnap")
    nosnap = os.path.join(a.workdir, "nosnap.hsnap")
    if os.path.exists(nosnap):
        os.unlink(nosnap)
    subprocess.run([hs, "record", "-q", "-o", nosnap, "--", os.path.join(a.programs, "snapshot_patterns")],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    html = os.path.join(a.workdir, "term.html")
    ok = [
        ["--version"], ["--help"], ["summary", "--help"], ["summary", cap], ["report", "-q", "-o", html, cap],
        ["export", "--format", "pprof", "-o", os.path.join(a.workdir, "term.pb.gz"), cap],
    ]
    # Usage errors found while parsing the command line point to the command's --help; those a
    # command finds in a value it was given say what it expected instead.
    usage_parse = [
        [], ["bogus"], ["summary"], ["summary", "--bogus", cap], ["summary", cap, cap],
        ["top-allocators", "--by", "nothing", cap], ["top-allocators", "-n", "abc", cap],
        ["top-retainers", "--by", "nothing", cap], ["unreachable", "--interior", "maybe", cap], ["export", cap],
        ["timeline", "--rows", "0", cap], ["timeline", "-n", "5", cap], ["timeline", "--match", "x", cap],
        ["path", "-n", "5", cap, addr], ["suspects", "-n", "5", cap],
    ]
    usage_value = [
        ["dominators", "--min-bytes", "lots", cap], ["path", cap, "zzz"], ["diff", cap + ":x", cap],
        ["export", "--format", "nope", cap], ["flamegraph", "--metric", "nope", cap],
        ["report", "--max-flame-nodes", "1", cap], ["record"], ["record", "--fork", "sideways", "--", "true"],
        ["record", "--sample-bytes", "lots", "--", "true"], ["record", "--snapshot-registers", "USR1", "--", "true"],
        ["record", "--snapshot-registers", "RTMAX-99", "--", "true"],
        ["record", "-o", "/nonexistent/dir/x.hsnap", "--", "true"],
        # (as root, /proc passes access(W_OK): only creating the file tells, before the program runs)
        ["record", "-o", "/proc/x", "--", "true"],
    ]
    readers = [["summary"], ["top-allocators"], ["leaks"], ["peak"], ["timeline"], ["flamegraph"],
               ["export", "--format", "pprof", "-o", os.path.join(a.workdir, "x.pb.gz")],
               ["export", "--format", "graph-json"], ["snapshots"], ["unreachable"], ["top-retainers"],
               ["dominators"], ["suspects"], ["report", "-o", os.path.join(a.workdir, "x.html")]]
    bad_input = []
    for r in readers:
        bad_input += [r + [missing], r + [junk]]
    bad_input += [["path", missing, addr], ["path", cap, "0x10"], ["diff", missing, cap], ["diff", cap + ":9", cap],
                  ["unreachable", nosnap], ["report", "-o", "/nonexistent/dir/x.html", cap]]
    for args, code in [(x, 0) for x in ok] + [(x, 2) for x in usage_parse + usage_value] + [(x, 1) for x in bad_input]:
        rc, out, err = run_piped([hs] + args)
        what = "heapsnap " + " ".join(args).replace(cap, "CAP").replace(a.workdir + "/", "")
        check(rc == code, "%s: exit %d (got %d: %s)" % (what, code, rc, err.decode(errors="replace").strip()[:160]))
        if code:
            check(err.startswith(b"heapsnap: error: "), "%s: says 'heapsnap: error: ...' on stderr" % what)
        if args in usage_parse:
            check(b"--help" in err, "%s: points to --help" % what)
    rc, out, err = run_piped([hs, "record", "--", os.path.join(a.workdir, "no-such-program")])
    check(rc == 3, "record of a program that does not exist: exit 3 (got %d)" % rc)
    rc, out, err = run_piped([hs, "record", "-q", "-o", os.path.join(a.workdir, "untraced.hsnap"), "-f", "--", "sh", "-c", "exit 0"],
                             env=dict(base_env(), HEAPSNAP_PRELOAD="/dev/null"))
    check(rc == 3 and b"no capture was written" in err and b"exited with status 0" in err,
          "record of a run that leaves no capture: exit 3, the program's own status named (got %d)" % rc)
    rc, out, err = run_piped([hs, "record", "-q", "-o", os.path.join(a.workdir, "false.hsnap"), "-f", "--", "false"])
    check(rc == 1, "record passes the program's own status through (false: 1, got %d)" % rc)
    # The contract is in the help, where the manual takes it from.
    rc, out, err = run_piped([hs, "--help"])
    text = out.decode()
    check(all(re.search(r"^\s+%d\s+\S" % c, text, re.M) for c in (0, 1, 2, 3)) and "Exit status:" in text,
          "heapsnap --help documents exit statuses 0, 1, 2 and 3")


def case_man(a):
    if not a.builddir:
        fail("--builddir is needed")
    mandir = os.path.join(a.builddir, "analyzer")
    rc, out, err = run_piped([a.heapsnap, "--help"])
    commands = []
    in_list = False
    for l in out.decode().splitlines():
        if l == "Subcommands:":
            in_list = True
        elif in_list and l.startswith("  "):
            commands.append(l.split()[0])
        elif in_list:
            break
    check(len(commands) >= 16, "heapsnap --help lists its commands (%d)" % len(commands))
    main = os.path.join(mandir, "heapsnap.1")
    check(os.path.exists(main) and os.path.getsize(main) > 2000, "build/analyzer/heapsnap.1 exists and is not empty")
    src = open(main, encoding="ascii").read()
    check(src.startswith('.\\"') and "\n.TH HEAPSNAP 1 " in src, "heapsnap.1 is a man page (.TH)")
    for c in commands:
        check(re.search(r"^\.SS %s$" % re.escape(c.replace("-", "\\-")), src, re.M) is not None,
              "heapsnap.1 has a section on %s" % c)
    groff = shutil.which("groff")
    man = shutil.which("man")
    if not groff or not man:
        fail("groff and man are needed (apt-get install groff-base man-db: scripts/deps.sh lists them)")
    pages = ["heapsnap.1"] + ["heapsnap-%s.1" % c for c in commands]
    for page in pages:
        path = os.path.join(mandir, page)
        check(os.path.exists(path) and os.path.getsize(path) > 500, "%s exists and is not empty" % page)
        p = subprocess.run([groff, "-man", "-Tutf8", "-ww", "-z", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        check(p.returncode == 0 and not p.stderr, "%s: groff -man -ww finds nothing to warn about (%r)" % (page, p.stderr[:300]))
    env = dict(os.environ, MANPAGER="cat", PAGER="cat", MANWIDTH="80", LANG="C.UTF-8")
    env.pop("MANOPT", None)
    p = subprocess.run([man, "-l", main], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=120)
    shown = re.sub(r".\x08", "", p.stdout.decode(errors="replace"))
    check(p.returncode == 0 and not p.stderr.strip(), "man -l heapsnap.1: exit 0, nothing on stderr (%r)" % p.stderr[:300])
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS", "EXIT STATUS", "ENVIRONMENT", "SEE ALSO"):
        check(re.search(r"^%s$" % section, shown, re.M) is not None, "man -l heapsnap.1 shows %s" % section)
    for c in commands:
        check(re.search(r"^\s+heapsnap %s\b" % re.escape(c), shown, re.M) is not None, "man -l heapsnap.1 shows heapsnap %s" % c)
    check("NO_COLOR" in shown and "--color" in shown, "the manual explains NO_COLOR and --color")
    p = subprocess.run([man, "-l", os.path.join(mandir, "heapsnap-top-allocators.1")], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env, timeout=120)
    shown = re.sub(r".\x08", "", p.stdout.decode(errors="replace"))
    check(p.returncode == 0 and "--by" in shown and "EXAMPLES" in shown and "EXIT STATUS" in shown,
          "man -l heapsnap-top-allocators.1: its options, examples and exit status")
    # meson install puts every page in man1.
    intro = os.path.join(a.builddir, "meson-info", "intro-installed.json")
    installed = json.load(open(intro))
    dests = {os.path.basename(src): dst for src, dst in installed.items() if src.endswith(".1")}
    for page in pages:
        check(page in dests and os.path.basename(os.path.dirname(dests[page])) == "man1"
              and os.path.basename(dests[page]) == page, "meson install puts %s in man1 (%s)" % (page, dests.get(page)))


def case_install(a):
    """scripts/install PREFIX (issue 31): the command, its shim, the header and the manual land
    under PREFIX, and the installed command records with the installed shim, no variable set."""
    if not a.builddir:
        fail("--builddir is needed")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "install")
    prefix = os.path.join(a.workdir, "prefix")
    shutil.rmtree(prefix, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEAPSNAP_") or k == "HEAPSNAP_CACHE_DIR"}
    p = subprocess.run([script, "--no-build", "--build-dir", a.builddir, prefix], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(p.returncode == 0 and b"installed heapsnap in" in p.stdout, "scripts/install ran (%s)" % p.stderr.decode()[-300:])
    for f in ("bin/heapsnap", "lib/libheapsnap_preload.so", "include/heapsnap.h", "share/man/man1/heapsnap.1",
              "share/man/man1/heapsnap-record.1"):
        check(os.path.isfile(os.path.join(prefix, f)), "%s installed" % f)
    heapsnap = os.path.join(prefix, "bin", "heapsnap")
    cap = os.path.join(a.workdir, "installed.hsnap")
    if os.path.exists(cap):
        os.unlink(cap)
    p = subprocess.run([heapsnap, "record", "-q", "-o", cap, "--", "/bin/ls", "/"], env=env, cwd=a.workdir,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(p.returncode == 0, "the installed heapsnap records, finding its shim in PREFIX/lib (%s)" % p.stderr.decode()[-300:])
    p = subprocess.run([heapsnap, "summary", "--json", cap], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(p.returncode == 0 and json.loads(p.stdout)["alloc_calls"] > 0, "and the capture has ls's allocations")
    man = shutil.which("man")
    if man:
        p = subprocess.run([man, "-M", os.path.join(prefix, "share", "man"), "-w", "heapsnap-record"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        check(p.returncode == 0 and prefix in p.stdout.decode(), "man finds heapsnap-record under PREFIX (%s)" % p.stdout.decode())
    p = subprocess.run([script, "--no-build", "--bogus"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(p.returncode == 2 and b"unknown option --bogus" in p.stderr, "an unknown option is a usage error")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["colour", "no_colour", "stderr", "exit_codes", "man", "install"])
    ap.add_argument("--heapsnap", required=True)
    ap.add_argument("--programs", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--builddir")
    a = ap.parse_args()
    a.workdir = os.path.join(a.workdir, a.case)
    os.makedirs(a.workdir, exist_ok=True)
    globals()["case_" + a.case](a)
    print("PASS")


if __name__ == "__main__":
    main()
