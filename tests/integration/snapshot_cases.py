#!/usr/bin/env python3
"""Integration tests of heap snapshots: exact blocks, edges and roots of a program with a known
heap; memcheck's leak summary on the same program; snapshots requested by signal while threads
allocate hard; periodic snapshots and the cap on their number.

usage: snapshot_cases.py CASE --heapsnap BIN --programs DIR --workdir DIR   (exit 77 = skipped)
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print("ok:", msg)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)


def record(a, name, prog_args, extra):
    out = os.path.join(a.workdir, name + ".hsnap")
    for f in os.listdir(a.workdir):
        if f.startswith(name + ".hsnap"):
            os.unlink(os.path.join(a.workdir, f))
    r = run([a.heapsnap, "record", "-q", "-o", out, *extra, "--", *prog_args])
    return r, out


def hsnap_json(a, *args):
    r = run([a.heapsnap, *args])
    if r.returncode != 0:
        fail("heapsnap %s: %s" % (" ".join(args), r.stderr))
    return json.loads(r.stdout)


def case_exact_heap(a):
    prog = os.path.join(a.programs, "snapshot_patterns")
    r, path = record(a, "exact", [prog], ["--snapshot-at-exit"])
    check(r.returncode == 0, "program exits 0 under the shim")
    addr = {}
    for line in r.stdout.splitlines():
        parts = line.split()
        if parts[0] in ("list_head", "tree_root", "interior", "stack_only"):
            addr[parts[0]] = int(parts[1], 16)
        elif parts[0] == "cycle":
            addr["cycle_x"], addr["cycle_y"] = int(parts[1], 16), int(parts[2], 16)
        elif parts[0] == "parent":
            addr["parent"], addr["child"] = int(parts[1], 16), int(parts[3], 16)
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    check(len(snaps) == 1 and snaps[0]["complete"] and snaps[0]["trigger"] == "exit", "one complete exit snapshot")
    d = hsnap_json(a, "snapshots", "--dump", "0", path)
    blocks = {int(b["address"], 16): b for b in d["block_list"]}
    by_n = {b["n"]: b for b in d["block_list"]}
    for k, v in addr.items():
        check(v in blocks, "block %s (%#x) is in the snapshot" % (k, v))
    incoming = {}
    for b in d["block_list"]:
        for e in b["edges"]:
            incoming.setdefault(e["to"], []).append((b["n"], e))
    root_in = {}
    for r_ in d["root_list"]:
        for t in r_["targets"]:
            root_in.setdefault(t["to"], []).append((r_, t))
    # The list: 10 blocks of 32 bytes, head held by a global, each node -> next at offset 0.
    n = blocks[addr["list_head"]]
    seen = 0
    while n is not None:
        check(n["size"] == 32, "list node %d is 32 bytes" % seen)
        seen += 1
        nxt = [e for e in n["edges"] if e["offset"] == 0 and not e["interior"]]
        n = by_n[nxt[0]["to"]] if nxt else None
        if seen > 20:
            break
    check(seen == 10, "the list has exactly 10 nodes chained at offset 0 (%d)" % seen)
    head = blocks[addr["list_head"]]["n"]
    check(any(r_["kind"] == "global" and "snapshot_patterns" in r_["name"] and not t["interior"]
              for r_, t in root_in.get(head, [])), "the list head is held by a global of the program")
    # Stack only.
    so = blocks[addr["stack_only"]]["n"]
    check(so not in incoming, "the stack-only block has no heap pointer to it")
    kinds = {r_["kind"] for r_, t in root_in.get(so, [])}
    check(kinds == {"stack"}, "the stack-only block is held by a thread stack only (%s)" % kinds)
    # Leaked tree: root unreferenced, 7 nodes of 64 bytes reachable from it by edges.
    tr = blocks[addr["tree_root"]]["n"]
    check(tr not in incoming and tr not in root_in, "the leaked tree's root is pointed to by nothing")
    stack, tree = [tr], set()
    while stack:
        x = stack.pop()
        if x in tree:
            continue
        tree.add(x)
        stack += [e["to"] for e in by_n[x]["edges"]]
    check(len(tree) == 7 and all(by_n[x]["size"] == 64 for x in tree), "the tree has 7 nodes of 64 bytes")
    # Interior pointer only.
    ib = blocks[addr["interior"]]["n"]
    refs = root_in.get(ib, [])
    check(len(refs) == 1 and refs[0][1]["interior"] and refs[0][0]["kind"] == "global",
          "the 100-byte block is held only by an interior pointer from a global")
    check(ib not in incoming, "... and by no block")
    # Cycle.
    cx, cy = blocks[addr["cycle_x"]]["n"], blocks[addr["cycle_y"]]["n"]
    check([e["to"] for e in by_n[cx]["edges"]] == [cy] and [e["to"] for e in by_n[cy]["edges"]] == [cx],
          "the two cycle blocks point to each other")
    check(cx not in root_in and cy not in root_in, "no root holds the cycle")
    # Parent -> child at offset 24.
    p, c = blocks[addr["parent"]], blocks[addr["child"]]
    check(p["size"] == 200 and c["size"] == 300, "parent 200 B, child 300 B")
    check(any(e["to"] == c["n"] and e["offset"] == 24 and not e["interior"] for e in p["edges"]),
          "parent points to child at offset 24")
    # Reachability in memcheck's terms.
    u = hsnap_json(a, "unreachable", "--json", path)
    check(u["definitely_lost"] == {"blocks": 2, "bytes": 88}, "definitely lost: tree root + cycle leader (88 B)")
    check(u["indirectly_lost"] == {"blocks": 7, "bytes": 408}, "indirectly lost: 6 tree nodes + 1 cycle block (408 B)")
    check(u["reachable"]["bytes"] == 320 + 48 + 200 + 300, "reachable: list, stack-only block, parent, child (%d)" % u["reachable"]["bytes"])
    off = hsnap_json(a, "unreachable", "--json", "--interior", "off", path)
    check(off["definitely_lost"]["bytes"] >= 88 + 100, "--interior off: the interior-held block counts as lost")


def case_memcheck(a):
    if not shutil.which("valgrind"):
        print("SKIP: valgrind not installed")
        sys.exit(77)
    prog = os.path.join(a.programs, "snapshot_patterns")
    r, path = record(a, "memcheck", [prog], ["--snapshot-at-exit"])
    check(r.returncode == 0, "traced run exits 0")
    v = run(["valgrind", "--leak-check=full", "--show-leak-kinds=all", prog])
    summary = {}
    for kind in ("definitely lost", "indirectly lost", "possibly lost", "still reachable"):
        m = re.search(kind + r": ([\d,]+) bytes in ([\d,]+) blocks", v.stderr)
        check(m is not None, "memcheck reports %s" % kind)
        summary[kind] = (int(m.group(1).replace(",", "")), int(m.group(2).replace(",", "")))
    u = hsnap_json(a, "unreachable", "--json", path)
    ours_unreach = (u["unreachable_bytes"], u["unreachable_blocks"])
    theirs = (summary["definitely lost"][0] + summary["indirectly lost"][0],
              summary["definitely lost"][1] + summary["indirectly lost"][1])
    print("memcheck", summary, "heapsnap", {k: u[k] for k in ("definitely_lost", "indirectly_lost", "possibly_lost", "reachable")})
    check(ours_unreach == theirs, "unreachable (definitely + indirectly lost) equals memcheck's: %s" % (ours_unreach,))
    check((u["definitely_lost"]["bytes"], u["definitely_lost"]["blocks"]) == summary["definitely lost"], "definitely lost equal")
    check((u["reachable"]["bytes"], u["reachable"]["blocks"]) == summary["still reachable"], "still reachable equal")
    # Possibly lost: the program's interior-held block plus one block of the thread library's own,
    # whose size differs under valgrind (its TLS layout is not glibc's), so blocks are compared.
    check(u["possibly_lost"]["blocks"] == summary["possibly lost"][1], "possibly lost: same number of blocks")


def case_signal_stress(a):
    prog = os.path.join(a.programs, "stress_threads")
    r, path = record(a, "stress", [prog, "4", "2000000", "25"], ["--snapshot-on-signal=USR2", "--max-snapshots", "50"])
    check(r.returncode == 0, "4 threads allocating while signals request snapshots: exit 0 (%s)" % r.stderr)
    m = re.match(r"mallocs (\d+) reallocs (\d+) frees (\d+) signals (\d+)", r.stdout)
    check(m is not None, "program reports its counts")
    mallocs, reallocs, frees, signals = map(int, m.groups())
    s = hsnap_json(a, "summary", "--json", path)
    check(not s["truncated"] and s["problems"] == [], "capture complete, no reader problems")
    extra_a = s["alloc_calls"] - (mallocs + reallocs)
    extra_f = s["free_calls"] - (frees + reallocs)
    check(0 <= extra_a <= 50, "allocation calls = the program's mallocs + reallocs + a few of the runtime's (%d)" % extra_a)
    check(extra_a - extra_f == s["leaked_blocks"], "free calls exact: every free and realloc counted")
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    complete = [x for x in snaps if x["complete"]]
    print("signals sent %d, snapshots %d complete %d" % (signals, len(snaps), len(complete)))
    check(signals >= 3 and len(complete) >= 2, "snapshots were taken mid-flight (%d complete)" % len(complete))
    check(all(x["trigger"] == "signal" for x in snaps), "all were signal-triggered")


def case_periodic(a):
    r, path = record(a, "periodic", ["/bin/sh", "-c", "sleep 2.6"], ["--snapshot-every", "1"])
    check(r.returncode == 0, "sleep exits 0")
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    check(len(snaps) == 2 and all(x["trigger"] == "periodic" and x["complete"] for x in snaps),
          "two periodic snapshots in 2.6 s (%d)" % len(snaps))
    r, path = record(a, "capped", ["/bin/sh", "-c", "sleep 2.6"], ["--snapshot-every", "1", "--max-snapshots", "1", "--snapshot-at-exit"])
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    check(len(snaps) == 1, "--max-snapshots 1 keeps one (%d)" % len(snaps))


CASES = {k[5:]: v for k, v in globals().items() if k.startswith("case_")}

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--heapsnap", required=True)
    ap.add_argument("--programs", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    a.workdir = os.path.join(a.workdir, a.case)
    os.makedirs(a.workdir, exist_ok=True)
    CASES[a.case](a)
    print("PASS")
