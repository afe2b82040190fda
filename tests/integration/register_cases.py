#!/usr/bin/env python3
"""Integration tests of the other threads' registers as roots of a snapshot: threads that hold a
block only in a register, taken at any moment, sleeping in a system call, or interrupted.

usage: register_cases.py CASE --heapsnap BIN --programs DIR --workdir DIR   (exit 77 = skipped)
"""
import os

import casekit
from casekit import check
from snapshot_cases import record, hsnap_json


def register_roots(d, tid):
    return [r_ for r_ in d["root_list"] if r_["kind"] == "registers" and r_["detail"] == tid]


def held_only_by_registers(a, path, index, d, tid, addr, what):
    """The block at addr is in snapshot `index`, a target of thread tid's register root and of
    nothing else, and `heapsnap path` starts at that root."""
    blocks = {int(b["address"], 16): b for b in d["block_list"]}
    check(addr in blocks, "snapshot %d: the %s block (%#x) is in the snapshot" % (index, what, addr))
    n = blocks[addr]["n"]
    regs = register_roots(d, tid)
    check(len(regs) == 1 and regs[0]["length"] == 49 * 8 and "not captured" not in regs[0]["name"]
          and "blocked" not in regs[0]["name"],
          "snapshot %d: thread %d's registers were captured whole (%s)" % (index, tid, [r_["name"] for r_ in regs]))
    check(regs[0]["name"] == "of thread %d" % tid, "... named 'of thread %d'" % tid)
    # r12 is the fifth register of the root (r8, r9, r10, r11, r12, ...).
    check(any(t["to"] == n and t["offset"] == 32 and not t["interior"] for t in regs[0]["targets"]),
          "snapshot %d: register r12 of thread %d points to the %s block" % (index, tid, what))
    others = [r_["kind"] for r_ in d["root_list"] if r_ is not regs[0] and any(t["to"] == n for t in r_["targets"])]
    check(not others, "snapshot %d: no other root holds the %s block (%s)" % (index, what, others))
    check(not any(e["to"] == n for b in d["block_list"] for e in b["edges"]),
          "snapshot %d: no block points to the %s block" % (index, what))
    p = hsnap_json(a, "path", "--json", "--snapshot", str(index), path, hex(addr))
    check(p.get("root", {}).get("kind") == "registers" and p["root"]["detail"] == tid,
          "snapshot %d: heapsnap path shows the %s block reached from registers of thread %d (%s)"
          % (index, what, tid, p.get("root")))
    check(p["root"].get("register") == "r12", "... through its register r12 (%s)" % p["root"].get("register"))


def parse_regs_output(stdout):
    got = {}
    for line in stdout.splitlines():
        f = line.split()
        if f[0] in ("spinner", "waiter"):
            got[f[0]] = (int(f[1]), int(f[2], 16))
        elif f[0] in ("futex_wakeups", "program_handler_calls"):
            got[f[0]] = int(f[1])
    return got


def case_registers(a):
    """A block reachable only from a register of another running thread (a thread spinning in an
    asm loop) and one only from a register of a thread blocked in futex(FUTEX_WAIT) without a
    timeout: each mid-run snapshot shows it held by that thread's register root, and the futex wait
    is restarted transparently (it returns once, when the program wakes it)."""
    prog = os.path.join(a.programs, "snapshot_regs")
    # A generous answer timeout: on a loaded machine a signaled thread may wait long for a CPU (the
    # default, 50 ms, would then record its registers as missing, and the test would fail).
    r, path = record(a, "registers", [prog, "regs"], ["--snapshot-on-signal=USR2", "--max-snapshots", "3"],
                     env={"HEAPSNAP_SNAPSHOT_REGS_TIMEOUT_MS": "2000"})
    check(r.returncode == 0, "program exits 0 under the shim (%s)" % r.stderr)
    got = parse_regs_output(r.stdout)
    check("spinner" in got and "waiter" in got, "program reports its threads and blocks")
    check(got.get("futex_wakeups") == 1, "the futex wait returned only when woken: restarted after each register "
          "signal (%s)" % got.get("futex_wakeups"))
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    mid = [s for s in snaps if s["trigger"] == "signal" and s["complete"]]
    check(len(mid) >= 1, "mid-run snapshots were taken (%d)" % len(mid))
    held = 0
    for s in mid:
        d = hsnap_json(a, "snapshots", "--dump", str(s["index"]), path)
        if not register_roots(d, got["spinner"][0]):
            continue  # taken after the spinner stopped (a loaded machine)
        held_only_by_registers(a, path, s["index"], d, got["spinner"][0], got["spinner"][1], "spinner's")
        held_only_by_registers(a, path, s["index"], d, got["waiter"][0], got["waiter"][1], "waiter's")
        held += 1
    check(held >= 1, "at least one snapshot was taken while the threads held their blocks (%d)" % held)
    # Control: without the register handshake, the spinner's block looks unreachable.
    r, path = record(a, "registers-off", [prog, "regs"],
                     ["--snapshot-on-signal=USR2", "--max-snapshots", "1", "--snapshot-registers", "off"])
    check(r.returncode == 0, "with --snapshot-registers off: exit 0")
    got = parse_regs_output(r.stdout)
    d = hsnap_json(a, "snapshots", "--dump", "0", path)
    regs = register_roots(d, got["spinner"][0])
    check(len(regs) == 1 and regs[0]["length"] == 0 and "not captured: register capture off" in regs[0]["name"],
          "the snapshot says why thread %d's registers are missing (%s)" % (got["spinner"][0], [x["name"] for x in regs]))
    p = hsnap_json(a, "path", "--json", "--snapshot", "0", path, hex(got["spinner"][1]))
    check(p.get("reachable") is False, "... and the block only a register held is unreachable without them")


def case_registers_taken(a):
    """The program installs its own handler on the tracer's register signal: the tracer never
    sends it, and the snapshot says why the registers are missing."""
    prog = os.path.join(a.programs, "snapshot_regs")
    r, path = record(a, "taken", [prog, "taken"], ["--snapshot-on-signal=USR2", "--max-snapshots", "1"])
    check(r.returncode == 0, "program exits 0")
    got = parse_regs_output(r.stdout)
    check(got.get("program_handler_calls") == 0, "the program's handler on the signal was never called")
    d = hsnap_json(a, "snapshots", "--dump", "0", path)
    regs = register_roots(d, got["spinner"][0])
    check(len(regs) == 1 and "took over the register signal" in regs[0]["name"],
          "the snapshot records that the program took the signal (%s)" % [x["name"] for x in regs])


def case_sleepers(a):
    """Threads sleeping in nanosleep, poll, epoll_wait, sem_timedwait and select while snapshots
    are taken every writer tick: no sleep is cut short or ends in EINTR (the program checks), and
    the snapshots record those threads' stack pointer and pc from the kernel."""
    prog = os.path.join(a.programs, "snapshot_regs")
    r, path = record(a, "sleepers", [prog, "sleepers", "8"], ["--snapshot-on-signal=USR2", "--max-snapshots", "1000"])
    print(r.stdout)
    check(r.returncode == 0 and "failures 0" in r.stdout, "every sleep lasted its full time and timed out (%s)" % r.stderr)
    for kind in ("nanosleep", "poll", "epoll_wait", "sem_timedwait", "select"):
        check("sleeper %s ok 8" % kind in r.stdout, "%s: 8 sleeps undisturbed" % kind)
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    complete = [s for s in snaps if s["complete"]]
    check(len(complete) >= 5, "snapshots were taken meanwhile (%d)" % len(complete))
    d = hsnap_json(a, "snapshots", "--dump", str(complete[len(complete) // 2]["index"]), path)
    regs = [r_ for r_ in d["root_list"] if r_["kind"] == "registers"]
    blocked = [r_ for r_ in regs if "blocked in" in r_["name"]]
    check(len(blocked) >= 5, "the sleeping threads are recorded as blocked in a system call (%s)"
          % [x["name"] for x in regs])


def case_sleepers_interrupted(a):
    """The register signal sent to sleeping threads anyway (HEAPSNAP_SNAPSHOT_REGS_SIGNAL_ALL=1, for
    tests): the race the /proc check leaves (a thread woken from its sleep but still in the kernel,
    or entering one just then) made certain. The handler continues the nanosleep, poll,
    sem_timedwait (a futex wait with a timeout) and select it interrupted: each still lasts its
    full time and times out, and the snapshots say so."""
    prog = os.path.join(a.programs, "snapshot_regs")
    r, path = record(a, "interrupted", [prog, "sleepers", "6", "noepoll"],
                     ["--snapshot-on-signal=USR2", "--max-snapshots", "1000"],
                     env={"HEAPSNAP_SNAPSHOT_REGS_SIGNAL_ALL": "1", "HEAPSNAP_SNAPSHOT_REGS_TIMEOUT_MS": "2000"})
    print(r.stdout)
    check(r.returncode == 0 and "failures 0" in r.stdout, "every interrupted sleep was continued to its full time (%s)" % r.stderr)
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    complete = [s for s in snaps if s["complete"]]
    check(len(complete) >= 5, "snapshots were taken meanwhile (%d)" % len(complete))
    continued = 0
    for s in complete[:5]:
        d = hsnap_json(a, "snapshots", "--dump", str(s["index"]), path)
        continued += sum("which it then continued" in r_["name"] for r_ in d["root_list"] if r_["kind"] == "registers")
    check(continued >= 10, "the snapshots record the system calls continued (%d)" % continued)


if __name__ == "__main__":
    casekit.main(globals(), ["--heapsnap", "--programs"])
