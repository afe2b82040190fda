#!/usr/bin/env python3
"""Integration tests of heap snapshots: exact blocks, edges and roots of a program with a known
heap; memcheck's leak summary on the same program; snapshots requested by signal while threads
allocate hard; periodic snapshots and the cap on their number.

usage: snapshot_cases.py CASE --heapsnap BIN --programs DIR --workdir DIR   (exit 77 = skipped)
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import casekit
from casekit import fail, check, flush_hash


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)


def record(a, name, prog_args, extra, env=None):
    out = os.path.join(a.workdir, name + ".hsnap")
    for f in os.listdir(a.workdir):
        if f.startswith(name + ".hsnap"):
            os.unlink(os.path.join(a.workdir, f))
    r = run([a.heapsnap, "record", "-q", "-o", out, *extra, "--", *prog_args],
            env=dict(os.environ, **env) if env else None)
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
    # Reachable: the program's list, stack-only block, parent and child, and one block of ld.so's
    # own: the second thread's DTV, which its control block points 16 bytes into (memcheck calls
    # it "possibly lost"; heapsnap knows the thread control block's dtv field).
    mine = 320 + 48 + 200 + 300
    check(u["reachable"]["blocks"] == 10 + 3 + 1, "reachable: list, stack-only block, parent, child, the DTV (%d blocks)" % u["reachable"]["blocks"])
    dtv = u["reachable"]["bytes"] - mine
    dtvs = [b for b in d["block_list"] if b["size"] == dtv and b["n"] in root_in and b["n"] not in incoming]
    check(len(dtvs) == 1 and all(not t["interior"] for r_, t in root_in[dtvs[0]["n"]]),
          "the one block past the program's is held by a root at its start (a thread's DTV, %d B)" % dtv)
    check(u["possibly_lost"] == {"blocks": 1, "bytes": 100}, "possibly lost: the interior-held block alone (%s)" % u["possibly_lost"])
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
    # Memcheck's possibly lost holds the program's interior-held block (100 B) and the second
    # thread's DTV, a block of ld.so's that the thread's control block points 16 bytes into (its size
    # differs under valgrind). heapsnap reads that pointer as the thread control block's dtv field:
    # the DTV is reachable, one block more than memcheck's still reachable.
    check(u["possibly_lost"] == {"blocks": 1, "bytes": 100} and summary["possibly lost"][1] == 2,
          "possibly lost: the interior-held block, the DTV aside (%s, memcheck %s)" % (u["possibly_lost"], summary["possibly lost"]))
    dtv = summary["possibly lost"][0] - 100
    check(u["reachable"]["blocks"] == summary["still reachable"][1] + 1, "still reachable: memcheck's blocks and the DTV")
    print("DTV: %d B under valgrind, %d B here" % (dtv, u["reachable"]["bytes"] - summary["still reachable"][0]))


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


def case_diff_runs(a):
    """diff between the exit snapshots of two runs of one program (its modules loaded at other
    addresses each time): sites match by module and offset, so the same heap diffs to nothing;
    and a diff within one capture still names the site that grew."""
    prog = os.path.join(a.programs, "snapshot_patterns")
    _, one = record(a, "diff_one", [prog], ["--snapshot-at-exit"])
    _, two = record(a, "diff_two", [prog], ["--snapshot-at-exit"])
    d = hsnap_json(a, "diff", "--json", one + ":0", two + ":0")
    check(d["bytes_change"] == 0 and d["count_change"] == 0 and d["sites"] == [],
          "the same heap in two runs: no change, no site (%s)" % d)
    _, path = record(a, "diff_grow", [os.path.join(a.programs, "snapshot_edges"), "grow"], ["--snapshot-on-signal=USR2"])
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    check(len(snaps) == 2 and all(x["complete"] for x in snaps), "two snapshots on request (%d)" % len(snaps))
    d = hsnap_json(a, "diff", "--json", path + ":0", path + ":1")
    print("sites:", [(x["site"], x["count_change"], x["bytes_change"]) for x in d["sites"]])
    keys = [x["site_key"] for x in d["sites"]]
    check(len(keys) == len(set(keys)), "one row per site (%s)" % keys)
    top = d["sites"][0] if d["sites"] else {}
    check(top.get("site", "").startswith("grow_second") and top["count_change"] == 50 and top["bytes_change"] == 10000,
          "the site that grew leads: grow_second, +50 blocks, +10000 bytes (%s)" % top)
    check(not any(x["site"].startswith("grow_first") for x in d["sites"]), "grow_first did not change")
    check(all("+0x" in k for k in keys), "sites are keyed by module and offset (%s)" % keys)


# --- the edges of the snapshot and peak machinery (tests/programs/snapshot_edges.c) ------------

def edges(a):
    return os.path.join(a.programs, "snapshot_edges")


def case_merged_mapping(a):
    """The kernel merged the program's own mapping with one of glibc's mmapped chunks: the rest of
    the merged mapping is a root (it held the only pointers to both blocks), the chunk is not."""
    r, path = record(a, "merged", [edges(a), "merged"], ["--snapshot-at-exit"])
    check(r.returncode == 0, "program exits 0 (%s)" % r.stderr)
    if "merged 1" not in r.stdout:
        print("SKIP: the kernel did not merge the two mappings: %s" % r.stdout)
        sys.exit(77)
    addr = {l.split()[0]: int(l.split()[1], 16) for l in r.stdout.splitlines() if l.split()[0] in ("small", "big")}
    u = hsnap_json(a, "unreachable", "--json", path)
    check(u["definitely_lost"]["blocks"] == 0 and u["possibly_lost"]["blocks"] == 0,
          "nothing lost: both blocks are held by the program's mapping (%s)" % u)
    for k, v in addr.items():
        p = hsnap_json(a, "path", "--json", path, hex(v))
        check(p["reachable"] and len(p["hops"]) == 1 and p["root"]["kind"] == "anonymous",
              "the %s block is one hop from the program's anonymous mapping (%s)" % (k, p.get("root")))


def case_exit_threads(a):
    """Threads still replacing blocks when main returns: the exit snapshot is taken while the shim
    still follows them, so every block of the global ring is in it and nothing is lost."""
    r, path = record(a, "exit_threads", [edges(a), "exit_threads"], ["--snapshot-at-exit"])
    check(r.returncode == 0, "program exits 0 (%s)" % r.stderr)
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    check(len(snaps) == 1 and snaps[0]["complete"], "one complete exit snapshot")
    check(snaps[0]["blocks"] >= 8 * 2000, "at least the ring's 16,000 blocks (%d)" % snaps[0]["blocks"])
    u = hsnap_json(a, "unreachable", "--json", path)
    print("unreachable:", {k: u[k] for k in ("definitely_lost", "indirectly_lost", "possibly_lost", "reachable")})
    check(u["definitely_lost"]["blocks"] == 0 and u["indirectly_lost"]["blocks"] == 0, "nothing definitely or indirectly lost")
    # (Possibly lost: the threads' own blocks of the thread library, held by interior pointers.)
    check(u["possibly_lost"]["blocks"] <= 16, "possibly lost: at most the threads' own few (%d)" % u["possibly_lost"]["blocks"])
    check(u["reachable"]["blocks"] >= 8 * 2000, "the ring's blocks are reachable (%d)" % u["reachable"]["blocks"])


def case_fork_heap(a):
    """A forked child's brk heap grows in a mapping next to the one fork copied: the block across
    the two is in the child's exit snapshot like the others (150 blocks, none skipped)."""
    r, path = record(a, "fork_heap", [edges(a), "fork"], ["--snapshot-at-exit"])
    check(r.returncode == 0, "program exits 0 (%s)" % r.stderr)
    pid = [l.split()[1] for l in r.stdout.splitlines() if l.startswith("child_pid")]
    want = {int(l.split()[1], 16) for l in r.stdout.splitlines() if l.startswith("child_block")}
    check(len(pid) == 1 and len(want) == 50, "the child reports its pid and 50 blocks")
    child = [os.path.join(a.workdir, f) for f in os.listdir(a.workdir) if f.startswith("fork_heap.hsnap.")]
    check(len(child) == 1, "the child's capture is beside the parent's (%s)" % child)
    snaps = hsnap_json(a, "snapshots", "--json", child[0])["snapshots"]
    check(len(snaps) == 1 and snaps[0]["complete"], "the child has one complete exit snapshot")
    check(snaps[0].get("skipped_blocks", 0) == 0, "no block skipped (%s)" % snaps[0].get("skipped_blocks"))
    d = hsnap_json(a, "snapshots", "--dump", "0", child[0])
    have = {int(b["address"], 16) for b in d["block_list"]}
    missing = sorted(hex(x) for x in want - have)
    check(not missing, "every block the child allocated is in its snapshot (missing %s)" % missing)
    check(len(have) >= 150, "the parent's 100 blocks and the child's 50 (%d)" % len(have))


def case_frame_hints(a):
    """The snapshot child's frames each come after a frame hint (proto/frame_hint.h) that names the
    frame's size and the hash of its bytes, so that a reader wanting none of its records (the
    snapshot list, a replay) steps over it undecompressed; what it lists is unchanged."""
    prog = os.path.join(a.programs, "snapshot_patterns")
    r, path = record(a, "frame_hints", [prog], ["--snapshot-at-exit"])
    check(r.returncode == 0, "program exits 0 under the shim")
    data = open(path, "rb").read()
    # Hints are found by their first 8 bytes (magic 0x184D2A5D, payload length 32), each followed
    # by its frame: the next hint, if any, comes right after it.
    tag = bytes.fromhex("5d2a4d18") + (32).to_bytes(4, "little")
    snapshot_fields = {13, 14}  # Record.snapshot_blocks, snapshot_edges (heapsnap.proto)
    hints = good = body_only = 0
    off = data.find(tag)
    while off >= 0:
        fields, size, h = (int.from_bytes(data[off + 8 + 8 * k:off + 16 + 8 * k], "little") for k in range(3))
        own = int.from_bytes(data[off + 32:off + 40], "little")
        frame = data[off + 40:off + 40 + size]
        hints += 1
        good += (len(frame) == size and frame[:4] == bytes.fromhex("28b52ffd") and flush_hash(frame) == h and
                 flush_hash(data[off + 8:off + 32]) == own)
        body_only += fields != 0 and all((fields >> f) & 1 == 0 or f in snapshot_fields for f in range(64))
        off = data.find(tag, off + 40 + size)
    check(hints >= 1 and good == hints, "the snapshot's frames have hints, each naming its frame's size and hash: "
          "%d of %d" % (good, hints))
    check(body_only >= 1, "a frame holds only the snapshot's blocks and edges, and its hint says so (%d)" % body_only)
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    check(len(snaps) == 1 and snaps[0]["complete"] and snaps[0]["blocks"] > 0, "the list reads it whole: %s" % snaps)


def case_incomplete_chosen(a):
    """A snapshot asked for by index that its child never finished: an error, not an empty heap."""
    path = os.path.join(a.workdir, "incomplete.hsnap")
    if os.path.exists(path):
        os.unlink(path)
    r = run([os.path.join(a.programs, "synth_capture"), "100", "list", path, "1", "incomplete"])
    check(r.returncode == 0, "synth_capture writes the capture (%s)" % r.stderr)
    for cmd in (["top-retainers", "--snapshot", "0", path], ["unreachable", "--snapshot", "0", path],
                ["dominators", "--snapshot", "0", path], ["diff", path + ":0", path + ":0"]):
        q = run([a.heapsnap] + cmd)
        check(q.returncode != 0 and "snapshot 0 is incomplete" in q.stderr and "killed by signal 9" in q.stderr,
              "%s: refused, with the reason (rc %d, %s)" % (cmd[0], q.returncode, q.stderr.strip()))
    q = run([a.heapsnap, "top-retainers", path])
    check(q.returncode != 0 and "no complete snapshot" in q.stderr, "no index: no complete snapshot to choose (%s)" % q.stderr.strip())


def case_child_error(a):
    """A snapshot child that ends with an error of its own (its end record says which, exit 4):
    the snapshot is listed once, incomplete, with the child's reason; the parent used to add a
    second end record of its own ("failed (status 4)")."""
    r, path = record(a, "child_error", [edges(a), "big_array"], ["--snapshot-at-exit"],
                     env={"HEAPSNAP_TEST_CHILD_ERROR": "1"})
    check(r.returncode == 0, "the program exits 0 (%s)" % r.stderr)
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    check(len(snaps) == 1 and not snaps[0]["complete"], "one snapshot, incomplete (%s)" % snaps)
    t = run([a.heapsnap, "snapshots", path])
    check(t.stdout.count("the child's own error") == 1 and "status 4" not in t.stdout,
          "its reason is the child's, said once (%s)" % t.stdout.strip())


def case_big_array(a):
    """A block holding 100,000 pointers: every one is an edge (a cap of 4096 edges per block made
    95,904 reachable blocks 'definitely lost')."""
    r, path = record(a, "big_array", [edges(a), "big_array"], ["--snapshot-at-exit"])
    check(r.returncode == 0, "program exits 0")
    u = hsnap_json(a, "unreachable", "--json", path)
    check(u["definitely_lost"]["blocks"] == 0 and u["possibly_lost"]["blocks"] == 0, "nothing lost (%s)" % u["definitely_lost"])
    check(u["reachable"]["blocks"] >= 100001, "the array and its 100,000 blocks are reachable (%d)" % u["reachable"]["blocks"])
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    check(snaps[0]["edges"] >= 100000, "at least 100,000 edges (%d)" % snaps[0]["edges"])



def case_realloc_moves(a):
    """A block that realloc moved keeps its first allocation's site and time in a snapshot (the
    live-block entry moves with it), in both of the shim's realloc paths: snapshot mode once took
    realloc's fast path, which moved no entry (the moved blocks had none, or a dead block's)."""
    r, path = record(a, "realloc_moves", [edges(a), "realloc_moves"], ["--snapshot-at-exit"])
    check(r.returncode == 0, "program exits 0 (%s)" % r.stderr)
    moved = int(r.stdout.split()[1])
    check(moved >= 50, "most of the 100 reallocs moved their block (%d)" % moved)
    d = hsnap_json(a, "snapshots", "--dump", "0", path)
    small = [b for b in d["block_list"] if b["size"] == 24]
    grown = [b for b in d["block_list"] if b["size"] == 5000]
    check(len(small) == 100 and len(grown) == 100, "100 blocks of 24 bytes and 100 of 5,000 (%d, %d)" % (len(small), len(grown)))
    sites = {b["call_site"] for b in small}
    check(len(sites) == 1, "the 24-byte blocks share realloc_first's malloc call site (%s)" % sites)
    bad = [b for b in grown if b["call_site"] not in sites]
    check(not bad, "every grown block keeps that site: %d do not (%s)" % (len(bad), [b["call_site"] for b in bad[:5]]))
    late = max(b["time_ms"] for b in small) + 50
    bad = [b for b in grown if b["time_ms"] > late]
    check(not bad, "and its allocation time, before the 100 ms pause: %d do not (%s)" % (len(bad), [b["time_ms"] for b in bad[:5]]))


def case_cursor_start(a):
    """A block pointed to by a cursor inside it and, in the next word, by its start (git's mem pools):
    one edge for the two words must be a start edge, else the block is "possibly lost" where memcheck
    sees it reachable (the snapshot child kept the first word's interior flag)."""
    r, path = record(a, "cursor_start", [edges(a), "cursor_start"], ["--snapshot-at-exit"])
    check(r.returncode == 0, "program exits 0 (%s)" % r.stderr)
    u = hsnap_json(a, "unreachable", "--json", path)
    check(u["possibly_lost"]["blocks"] == 0 and u["definitely_lost"]["blocks"] == 0,
          "nothing possibly or definitely lost (%s, %s)" % (u["possibly_lost"], u["definitely_lost"]))
    block = int(r.stdout.split()[1], 16)
    d = hsnap_json(a, "snapshots", "--dump", "0", path)
    n = [b["n"] for b in d["block_list"] if int(b["address"], 16) == block]
    check(len(n) == 1, "the 4,096-byte block is in the snapshot")
    ins = [e for b in d["block_list"] for e in b["edges"] if e["to"] == n[0]]
    check(any(not e["interior"] for e in ins), "a start edge points to it (%s)" % ins)


def case_mmap_pool(a):
    """A pool whose arena is the program's own mmap (a GC heap): the arena is heap, not a root, so
    what only its free room or a dead object's stale bytes point to is lost."""
    r, path = record(a, "mmap_pool", [edges(a), "mmap_pool"], ["--snapshot-at-exit"])
    check(r.returncode == 0, "program exits 0 (%s)" % r.stderr)
    lost = [int(x, 16) for l in r.stdout.splitlines() if l.startswith("lost") for x in l.split()[1:]]
    u = hsnap_json(a, "unreachable", "--json", path)
    check(u["definitely_lost"]["blocks"] == 2 and u["definitely_lost"]["bytes"] == 256 + 5000,
          "the dead object's target and the block held from the free room are lost (%s)" % u["definitely_lost"])
    for x in lost:
        q = run([a.heapsnap, "path", "--json", path, hex(x)])
        check(q.returncode == 0 and not json.loads(q.stdout)["reachable"], "%#x: no root reaches it" % x)
    t = hsnap_json(a, "top-retainers", "--json", path)
    check(t["reachable_blocks"] == u["reachable"]["blocks"] < t["blocks"],
          "top-retainers counts the reachable blocks, as unreachable does, not all (%d, %d of %d)"
          % (t["reachable_blocks"], u["reachable"]["blocks"], t["blocks"]))
    head = run([a.heapsnap, "top-retainers", path]).stdout.splitlines()[0]
    check(head.endswith("in %d blocks" % t["blocks"]) and " reachable + " in head and " unreachable" in head,
          "and its heading splits reachable from unreachable (%s)" % head)


def case_static_pool(a):
    """A client-API pool whose arena is a static array: the program's other globals in the same
    mapping stay roots (they were all dropped, and 2,500 held blocks were 'definitely lost')."""
    r, path = record(a, "static_pool", [edges(a), "static_pool"], ["--snapshot-at-exit"])
    check(r.returncode == 0, "program exits 0 (%s)" % r.stderr)
    u = hsnap_json(a, "unreachable", "--json", path)
    check(u["definitely_lost"]["blocks"] == 0, "nothing definitely lost (%s)" % u["definitely_lost"])
    check(u["reachable"]["blocks"] >= 2510, "the 2,500 blocks and the 10 pool objects are reachable (%d)" % u["reachable"]["blocks"])


def case_record_signals(a):
    """Signals sent to `record` itself (what `record ... &` leaves in $!) reach the program: the
    snapshot signal takes a snapshot, SIGTERM ends the program and record reports it (143); the
    program is not left running on its own."""
    path = os.path.join(a.workdir, "record_signals.hsnap")
    if os.path.exists(path):
        os.unlink(path)
    p = subprocess.Popen([a.heapsnap, "record", "-q", "-o", path, "--snapshot-on-signal=USR2", "--", "sleep", "5"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.5)
    p.send_signal(signal.SIGUSR2)
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=4)
    except subprocess.TimeoutExpired:
        p.kill()
        fail("record did not end within 4 s of SIGTERM: the program kept running")
    check(p.returncode == 128 + signal.SIGTERM, "record reports the program ended by SIGTERM (%d)" % p.returncode)
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    check(len(snaps) == 1 and snaps[0]["trigger"] == "signal" and snaps[0]["complete"],
          "SIGUSR2 to record: one complete signal snapshot (%s)" % snaps)


def case_client_requests(a):
    """heapsnap_snapshot() called back to back: each request gets its snapshot, in order (they were
    merged into the last one); past the 16 that can wait, the dropped ones are counted."""
    _, path = record(a, "requests3", [edges(a), "requests", "3"], ["--snapshot-on-request"])
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    check([x["label"] for x in snaps] == ["r1", "r2", "r3"] and all(x["complete"] for x in snaps),
          "three requests, three snapshots in order (%s)" % [x["label"] for x in snaps])
    _, path = record(a, "requests20", [edges(a), "requests", "20"], ["--snapshot-on-request", "--max-snapshots", "30"])
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    check([x["label"] for x in snaps] == ["r%d" % k for k in range(1, 17)],
          "twenty at once: the first 16 served in order (%s)" % [x["label"] for x in snaps])
    t = run([a.heapsnap, "timeline", path])
    check("4 snapshot request(s) dropped" in t.stdout, "the 4 dropped are counted in a marker (%s)" % t.stdout[-300:])


def case_main_tls(a):
    """A block held only by the main thread's static TLS, which shares a mapping with the last
    library's .bss (the shim's, when it was loaded last): it was skipped with the shim's .bss and
    the block reported unreachable. Only the library's own .bss (its program headers say how far)
    is left out or named after it."""
    r, path = record(a, "main_tls", [edges(a), "tls"], ["--snapshot-at-exit"])
    check(r.returncode == 0, "program exits 0")
    addr = [l.split()[1] for l in r.stdout.splitlines() if l.startswith("tls_block")]
    check(len(addr) == 1, "the program prints its block")
    p = hsnap_json(a, "path", "--json", path, addr[0])
    check(p["reachable"] and len(p["hops"]) == 1, "the TLS-held block is one hop from a root (%s)" % p.get("root"))
    check(p["root"]["kind"] == "anonymous",
          "its root is anonymous memory, not a library's .bss it lies past (%s)" % p["root"])


def case_types(a):
    """Classes from vtable pointers (issue 29): every polymorphic object the program made, by its
    most-derived class (a factory's Shape* is its Circle or Square), at -O0 and -O2 (no symbols)."""
    for build in ("types_app_o0", "types_app_o2"):
        prog = os.path.join(a.programs, build)
        r, path = record(a, build, [prog], ["--snapshot-at-exit"])
        check(r.returncode == 0, "%s runs (%s)" % (build, r.stderr))
        want = {}
        for line in r.stdout.splitlines():
            name, count, size = line.split()
            want[name] = (int(count), int(size))
        t = hsnap_json(a, "types", "--json", "-n", "100", path)
        # Types the vtables name (types the allocation frames give are the sites tests' business).
        got = {c["type"]: c for c in t["types"] if "vtable" in c["how"]}
        print(build, "typed", t["typed_blocks"], "of", t["blocks"], {k: (v["count"], v["shallow_bytes"]) for k, v in got.items()})
        for name, (count, size) in want.items():
            check(name in got, "%s: class %s is found" % (build, name))
            check(got[name]["count"] == count and got[name]["shallow_bytes"] == count * size,
                  "%s: %s: %d objects of %d bytes (%d, %d)" % (build, name, count, size, got[name]["count"], got[name]["shallow_bytes"]))
        check(set(got) == set(want), "%s: no other class (a pointer to a string literal is no vtable): %s" % (build, sorted(got)))
        # Each Session holds its name (a heap string) and a payload of 100 ints.
        check(got["Session"]["retained_bytes"] >= 2000 * (want["Session"][1] + 400),
              "%s: the sessions retain their payloads (%d)" % (build, got["Session"]["retained_bytes"]))
        check(sum(c["count"] for c in got.values()) == sum(c for c, _ in want.values()) <= t["typed_blocks"],
              "%s: the vtable-typed blocks are exactly those (%d typed in all)" % (build, t["typed_blocks"]))


def case_threads_same_graph(a):
    """The snapshot child's block scan on 2 and 3 threads (HEAPSNAP_SNAPSHOT_THREADS) gives the
    graph of the scan on one: the same blocks, edges (offsets, interior or not), roots, types,
    dominators and retained sizes, for a heap of many scan chunks (mesh, 40 MB), polymorphic
    objects (types_app) and the exact heap (snapshot_patterns). Each program runs without address
    randomisation (setarch -R) so that its runs lay out the same heap; the environment differs
    only by the digit of the thread count, and every allocation is sampled. The enumeration of the
    blocks on several threads cuts the address space into pieces: with pieces of 16 bytes (a
    test setting) on the small heaps, blocks cross pieces everywhere, and an mmapped chunk's size
    bytes in the shadow (snapshot_edges merged: a 1 MiB chunk) lie in a piece after its own, which
    thread 0 then enumerates again; the graph is still the one of one thread."""
    if shutil.which("setarch") is None or run(["setarch", "-R", "true"]).returncode != 0:
        print("SKIP: setarch -R (a run without address randomisation) is not available here")
        sys.exit(77)
    programs = [("mesh", [edges(a), "mesh"]), ("types", [os.path.join(a.programs, "types_app_o2")]),
                ("patterns", [os.path.join(a.programs, "snapshot_patterns")]), ("merged", [edges(a), "merged"])]
    tiny_pieces = {"patterns", "merged"}

    def without(d, keys):
        return {k: v for k, v in d.items() if k not in keys}

    for name, argv in programs:
        views = {}
        # (The pieces' setting is in every run's environment, with a value of the same length:
        # "00" leaves the pieces to the child; the stack's roots move with the environment.)
        variants = [(t, t, {"HEAPSNAP_TEST_SNAPSHOT_PIECE_BYTES": "00"}) for t in ("1", "2", "3")]
        if name in tiny_pieces:
            variants.append(("2, pieces of 16 bytes", "2", {"HEAPSNAP_TEST_SNAPSHOT_PIECE_BYTES": "16"}))
        for key, threads, extra in variants:
            # (names of one length: the program's arguments are on its stack too)
            out = os.path.join(a.workdir, "threads-%s-%s-%s.hsnap" % (name, threads, extra["HEAPSNAP_TEST_SNAPSHOT_PIECE_BYTES"]))
            if os.path.exists(out):
                os.unlink(out)
            # (Every allocation sampled: which blocks carry a stack is then no chance either.)
            r = run(["setarch", "-R", a.heapsnap, "record", "-q", "-o", out, "--sample-bytes", "1", "--snapshot-at-exit",
                     "--", *argv],
                    env=dict(os.environ, HEAPSNAP_SNAPSHOT_THREADS=threads, **extra))
            check(r.returncode == 0, "%s with %s scan threads runs (%s)" % (name, threads, r.stderr))
            info = hsnap_json(a, "snapshots", "--json", out)["snapshots"][-1]
            check(info["complete"], "%s, %s threads: the snapshot is complete (%s)" % (name, threads, info))
            dump = hsnap_json(a, "snapshots", "--dump", str(info["index"]), out)
            graph_path = out + ".graph.json"
            g = run([a.heapsnap, "export", "--format", "graph-json", "-o", graph_path, out])
            check(g.returncode == 0, "graph-json export (%s)" % g.stderr)
            with open(graph_path) as f:
                graph = json.load(f)
            views[key] = {
                # (roots and root_bytes count the ranges scanned, those without a pointer too: the
                # tracer's own mappings, which its writer thread's timing decides, are among them)
                "info": without(info, ("time_s", "pause_s", "scan_s", "total_s", "cpu_s", "scan_threads", "label", "roots",
                                       "root_bytes")),
                # (a block's time and a thread's id differ from run to run)
                "blocks": [without(b, ("time_ms",)) for b in dump["block_list"]],
                # (a register root is a copy in the tracer's memory, named by the thread's id)
                "roots": [without(x, ("detail", "start", "name") if x["kind"] == "registers" else ("detail",))
                          for x in dump["root_list"]],
                "graph": graph,
                "types": hsnap_json(a, "types", "--json", "-n", "1000", out)["types"],
                "unreachable": without(hsnap_json(a, "unreachable", "--json", out), ("file",)),
                "threads": info["scan_threads"],
            }
        one = views["1"]
        check(one["threads"] == 1, "%s: HEAPSNAP_SNAPSHOT_THREADS=1 scans on one thread (%s)" % (name, one["threads"]))
        print(name, "blocks", len(one["blocks"]), "edges", one["info"]["edges"], "bytes", one["info"]["bytes"],
              "threads", {t: v["threads"] for t, v in views.items()})
        if name == "mesh":
            check(one["info"]["bytes"] > 20 * 2 ** 20 and one["info"]["edges"] > 200000,
                  "mesh: a heap of many 2 MiB scan chunks, with edges (%s)" % one["info"])
            for t in ("2", "3"):
                check(views[t]["threads"] == int(t), "mesh: %s threads scanned (%s)" % (t, views[t]["threads"]))
        for t in views:
            for part in ("info", "blocks", "roots", "graph", "types", "unreachable"):
                check(views[t][part] == one[part], "%s: %s with %s threads as with one%s" % (
                    name, part, t, "" if views[t][part] == one[part] else ": %s against %s" % (views[t][part], one[part])))


if __name__ == "__main__":
    casekit.main(globals(), ["--heapsnap", "--programs"])
