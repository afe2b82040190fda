#!/usr/bin/env python3
"""Integration tests of the snapshots' moments (issue 30): at a heap or RSS threshold, at the peak,
on growth, and the at-peak child's life (tests/programs/snapshot_edges.c).

usage: moment_cases.py CASE --heapsnap BIN --programs DIR --workdir DIR   (exit 77 = skipped)
"""
import os
import re

import casekit
from casekit import check
from snapshot_cases import run, record, hsnap_json, edges


def case_peak(a):
    """The peak of a block that no fold saw (under 256 KiB): its size, at the time it was live, not
    at exit; and eight threads' blocks live at once add up."""
    r, path = record(a, "peak", [edges(a), "peak"], [])
    check(r.returncode == 0, "program exits 0")
    s = hsnap_json(a, "summary", "--json", path)
    check(s["peak_heap_bytes"] >= 200000, "peak at least the 200,000-byte block (%d)" % s["peak_heap_bytes"])
    check(s["peak_time_s"] < 0.3 + 0.15, "the peak is placed while the block was live, not later (%.3f s)" % s["peak_time_s"])
    r, path = record(a, "peak_all", [edges(a), "peak"], ["--sample-bytes", "1"])
    t = run([a.heapsnap, "peak", path]).stdout
    m = re.search(r"exact peak .* at (\d+) ms; live blocks below: every block, at that moment", t)
    check(m is not None and int(m.group(1)) < 300,
          "every allocation recorded: peak prints the event's time, while the block was live (%s)" % t.splitlines()[1:2])
    # A fold between read_totals' reads of a thread's delta and maximum counted a 64 MiB block
    # twice, and the 128 MiB stayed the peak (the writer reading the totals every 1 ms).
    r, path = record(a, "peak_churn", [edges(a), "churn"], [], env={"HEAPSNAP_FLUSH_MS": "1"})
    s = hsnap_json(a, "summary", "--json", path)
    check(s["peak_heap_bytes"] == 64 << 20, "64 MiB blocks allocated and freed in turn: peak 64 MiB (%d)" % s["peak_heap_bytes"])
    r, path = record(a, "peak_threads", [edges(a), "peak_threads"], [])
    check(r.returncode == 0, "program exits 0")
    s = hsnap_json(a, "summary", "--json", path)
    check(s["peak_heap_bytes"] >= 8 * 250000, "eight threads' blocks live at once: peak at least 2,000,000 (%d)" % s["peak_heap_bytes"])
    check(s["peak_accuracy_bytes"] >= 9 * 256 * 1024,
          "the accuracy counts the threads that ran at once, not those left at exit (%d)" % s["peak_accuracy_bytes"])
    # --snapshot-at-peak narrows every thread's fold room, a new thread's too (it began with 256 KiB,
    # and each thread's 250,000 bytes went unseen): the accuracy is the threads times the widest
    # room given out, under 5% of the peak, where it was 9 x 256 KiB, more than the peak itself.
    r, path = record(a, "peak_threads_at_peak", [edges(a), "peak_threads"], ["--snapshot-at-peak"])
    check(r.returncode == 0, "program exits 0 (%s)" % r.stderr[-300:])
    s = hsnap_json(a, "summary", "--json", path)
    peak, acc = s["peak_heap_bytes"], s["peak_accuracy_bytes"]
    check(0 < acc <= peak * 5 // 100,
          "at-peak: the peak's accuracy is within 5%% of it (%d of %d)" % (acc, peak))
    check(peak - acc <= 2000000 + 64 * 1024 and peak + acc >= 2000000,
          "at-peak: the peak's range holds the eight blocks live at once (%d +- %d)" % (peak, acc))
    snaps = [x for x in hsnap_json(a, "snapshots", "--json", path)["snapshots"] if x["trigger"] == "peak"]
    check(len(snaps) == 1 and snaps[0]["bytes"] >= 2000000,
          "at-peak: the snapshot holds the eight blocks (%s)" % [(x["trigger"], x["bytes"]) for x in snaps])


def case_heap_threshold_short(a):
    """--snapshot-heap-above (issue 30.1): a peak far shorter than the writer's tick, then the end,
    still gets its snapshot; and the alarm goes off at the allocation that crosses the threshold
    (one thread: exact), not at the next fold or tick."""
    r, path = record(a, "short_peak", [edges(a), "short_peak"], ["--snapshot-heap-above", "20M"])
    check(r.returncode == 0, "program exits 0 (%s)" % r.stderr)
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    heap = [x for x in snaps if x["trigger"] == "heap-threshold"]
    check(len(heap) == 1 and heap[0]["complete"], "one heap-threshold snapshot, complete (%s)" % snaps)
    m = re.search(r"crossed at [\d.]+ ms with the heap at (\d+) B", heap[0]["label"])
    check(m is not None, "its label says when the heap crossed (%s)" % heap[0]["label"])
    crossed = int(m.group(1))
    check(84 * 250000 <= crossed < 85 * 250000 + 65536,
          "at the 84th block's allocation, the first over 20 MiB: %d bytes (not a fold or tick later)" % crossed)


def case_rss_threshold(a):
    """--snapshot-rss-above (issue 30.1): RSS that rises past the threshold and falls again within
    about 100 ms, between two of the writer's ticks, still gets its snapshot, and it is taken at the
    allocation after the crossing (the RSS alarm at the fold), not at a tick: its label says RSS
    just over the threshold. (A tick that happens to land right after the crossing sees about the
    same figure; one later in the rise sees far more.)"""
    level = 64 << 20
    r, path = record(a, "rss_burst", [edges(a), "rss_burst"], ["--snapshot-rss-above", "64M"])
    check(r.returncode == 0, "program exits 0 (%s)" % r.stderr)
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    rss = [x for x in snaps if x["trigger"] == "rss-threshold"]
    check(len(rss) == 1 and rss[0]["complete"], "one rss-threshold snapshot, complete (%s)" % snaps)
    m = re.search(r"(?:crossed|seen by the writer) at [\d.]+ ms with RSS at (\d+) B, taken [\d.]+ ms later",
                  rss[0]["label"])
    check(m is not None, "its label says when RSS crossed and at what figure (%s)" % rss[0]["label"])
    seen = int(m.group(1))
    check(level <= seen < level + (8 << 20),
          "seen at %d bytes: over 64 MiB, and within a block or two of the crossing (not up to 128 MiB later)" % seen)


def case_rss_threshold_mapped(a):
    """--snapshot-rss-above crossed by the program's own mapping, written with no allocation (no fold
    to check it): the writer's tick is the backstop, and the label says it saw it."""
    r, path = record(a, "rss_mapped", [edges(a), "rss_mapped"], ["--snapshot-rss-above", "64M"])
    check(r.returncode == 0 and "snapshot started 1" in r.stdout,
          "program exits 0, having seen the snapshot start while it held the mapping (%s %s)" % (r.stdout, r.stderr))
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    rss = [x for x in snaps if x["trigger"] == "rss-threshold"]
    check(len(rss) == 1 and rss[0]["complete"], "one rss-threshold snapshot, complete (%s)" % snaps)
    m = re.search(r"seen by the writer at [\d.]+ ms with RSS at (\d+) B", rss[0]["label"])
    check(m is not None and int(m.group(1)) >= 64 << 20, "its label says the writer saw RSS over 64 MiB (%s)" % rss[0]["label"])


def case_heap_threshold_threads(a):
    """--snapshot-heap-above crossed by the sum of 8 threads' blocks, none of which folds (each under
    the fold size): the writer's backstop takes it, labelled as the writer's sighting, with the 8
    blocks in it; and a one-thread crossing is never labelled by the writer (see heap_threshold_short)."""
    r, path = record(a, "threads_threshold", [edges(a), "threads_threshold"], ["--snapshot-heap-above", "1M"])
    check(r.returncode == 0 and "snapshot started 1" in r.stdout,
          "program exits 0, having seen the snapshot start while its threads held their blocks (%s %s)" % (r.stdout, r.stderr))
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    heap = [x for x in snaps if x["trigger"] == "heap-threshold"]
    check(len(heap) == 1 and heap[0]["complete"], "one heap-threshold snapshot, complete (%s)" % snaps)
    m = re.search(r"crossed (?:at|by) [\d.]+ ms(?: with the heap at|: the writer saw the heap at) (\d+) B", heap[0]["label"])
    check(m is not None and int(m.group(1)) >= 1000000, "its label says when and at what heap it was crossed (%s)" % heap[0]["label"])
    check(heap[0]["blocks"] >= 8 and heap[0]["heap_bytes"] >= 8 * 200000,
          "the snapshot holds the 8 threads' blocks (%d blocks, %d bytes)" % (heap[0]["blocks"], heap[0]["heap_bytes"]))


def case_child_name(a):
    """The snapshot child names itself heapsnap-snap (in ps, top): the kept at-peak child lives as
    long as the program, and it used to show under the forking thread's name, heapsnap-writer."""
    r, path = record(a, "child_name", [edges(a), "child_name"], ["--snapshot-at-peak"])
    check(r.returncode == 0, "program exits 0 (%s)" % r.stderr)
    names = [l.split(" ", 1)[1] for l in r.stdout.splitlines() if l.startswith("child ")]
    check("heapsnap-snap" in names, "a child of the program is named heapsnap-snap: %s" % names)
    check("heapsnap-writer" not in names, "no child goes by the writer thread's name: %s" % names)


def case_at_peak_early_scan(a):
    """The kept at-peak child scans before the end once the heap has fallen below half of its
    heap, so the program's exit does not wait for it: it has ended, and been waited for, while the
    program still runs; its snapshot is the peak's, whole, and the marker says when it was scanned."""
    r, path = record(a, "at_peak_early_scan", [edges(a), "fall_and_stay"], ["--snapshot-at-peak"])
    check(r.returncode == 0, "program exits 0 (%s)" % r.stderr)
    check("scanned 1" in r.stdout, "the at-peak child scanned and exited while the heap stayed low: %s" % r.stdout.strip())
    check("reaped 1" in r.stdout, "and was waited for then, not left a zombie until the end: %s" % r.stdout.strip())
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    check(len(snaps) == 1 and snaps[0]["trigger"] == "peak" and snaps[0]["complete"],
          "one at-peak snapshot, complete: %s" % snaps)
    peak = 40 * 250000
    check(peak * 0.95 <= snaps[0]["bytes"] <= peak, "its heap, %d bytes, is the peak's (%d)" % (snaps[0]["bytes"], peak))
    check(snaps[0]["blocks"] * 250000 == snaps[0]["bytes"], "the blocks of the peak in it, %d of them" % snaps[0]["blocks"])
    u = hsnap_json(a, "unreachable", "--json", path)
    check(u["reachable"]["bytes"] == snaps[0]["bytes"], "every block in it reachable from the global: %s" % u["reachable"])
    t = run([a.heapsnap, "timeline", path]).stdout
    m = re.search(r"heapsnap: at-peak snapshot kept: the heap at (\d+) B \(\d+ taken, 0 failed\); scanned from "
                  r"[\d.]+ s, when the heap had fallen to (\d+) B", t)
    check(m is not None, "the marker says it was scanned early: %s" % [l for l in t.splitlines() if "at-peak" in l])
    check(int(m.group(2)) < int(m.group(1)) // 2, "the heap had fallen below half of the snapshot's: %s" % m.group(0))
    left = [f for f in os.listdir(os.path.dirname(path)) if os.path.basename(path) + ".peak-" in f]
    check(not left, "no temporary file left: %s" % left)


def case_at_peak(a):
    """--snapshot-at-peak (issue 30.2): one at-peak snapshot, whose heap is within the percentage of
    the run's maximum, on a peak of a few milliseconds, on the highest of several peaks, and on a
    peak at exit; the percentage is the user's; a bad one is refused."""
    for mode, peak, opt, pct in (("short_peak", 25000000, "--snapshot-at-peak", 5),
                                 ("several_peaks", 30000000, "--snapshot-at-peak", 5),
                                 ("peak_at_exit", 25000000, "--snapshot-at-peak=2", 2),
                                 ("dipping_rise", 60300000, "--snapshot-at-peak", 5)):
        r, path = record(a, "at_peak_" + mode, [edges(a), mode], [opt])
        check(r.returncode == 0, "%s: program exits 0 (%s)" % (mode, r.stderr))
        snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
        at_peak = [x for x in snaps if x["trigger"] == "peak"]
        check(len(snaps) == 1 and len(at_peak) == 1 and at_peak[0]["complete"],
              "%s: one at-peak snapshot, complete, and no other (%s)" % (mode, snaps))
        s = hsnap_json(a, "summary", "--json", path)
        check(s["peak_heap_bytes"] == peak, "%s: the run's maximum is exact: %d" % (mode, s["peak_heap_bytes"]))
        got = at_peak[0]["bytes"]
        check(peak * (100 - pct) / 100 <= got <= peak,
              "%s: its heap, %d bytes, is within %d%% of the maximum %d" % (mode, got, pct, peak))
        check("within %d%%" % pct in at_peak[0]["label"], "%s: its label says the bound (%s)" % (mode, at_peak[0]["label"]))
        u = hsnap_json(a, "unreachable", "--json", path)
        check(u["definitely_lost"]["bytes"] == 0 and u["possibly_lost"]["bytes"] == 0 and u["reachable"]["bytes"] == got,
              "%s: every block in it reachable, the one whose allocation crossed too (its thread waited with its "
              "registers on its stack): %s" % (mode, {k: v for k, v in u.items() if isinstance(v, dict)}))
        p = hsnap_json(a, "peak", "--json", path)
        check(p.get("peak_snapshot") and p["peak_snapshot"]["index"] == at_peak[0]["index"],
              "%s: peak --json names the at-peak snapshot (%s)" % (mode, p.get("peak_snapshot")))
        t = run([a.heapsnap, "peak", path]).stdout
        check(("what held the heap at its peak: snapshot %d" % at_peak[0]["index"]) in t and "top retainers of snapshot" in t,
              "%s: peak prints the snapshot's top retainers beside the stacks" % mode)
        t = run([a.heapsnap, "timeline", path]).stdout
        m = re.search(r"heapsnap: at-peak snapshot kept: the heap at \d+ B \((\d+) taken, 0 failed\)", t)
        check(m is not None,
              "%s: the timeline says it was kept, and how many were taken (%s)" % (mode, [l for l in t.splitlines() if "at-peak" in l]))
        if mode == "short_peak":
            # One rise, one fall: a fork at the fall (forking at every 5% level took about 39).
            check(int(m.group(1)) <= 3, "%s: a fork at the fall, not one per level: %s taken" % (mode, m.group(1)))
        if mode == "dipping_rise":
            # Dips that leave the heap within the percentage of its highest, less the folds' slack
            # (2 x 256 KiB), fork nothing: only the first steps' do, to a heap of about 16 MB (25
            # here; a fork at every dip that followed a level took 45).
            check(int(m.group(1)) <= 32, "%s: no fork for a dip within the percentage: %s taken" % (mode, m.group(1)))
    for bad in ("0", "101", "x"):
        q = run([a.heapsnap, "record", "-q", "-o", os.path.join(a.workdir, "bad.hsnap"), "--snapshot-at-peak=" + bad, "--", edges(a), "short_peak"])
        check(q.returncode == 2 and "--snapshot-at-peak '%s'" % bad in q.stderr,
              "--snapshot-at-peak=%s is refused with the reason (rc %d, %s)" % (bad, q.returncode, q.stderr.strip()))
    # With an exit snapshot too: the default snapshot of the queries is the last taken (exit);
    # `--snapshot peak` picks the at-peak one by name.
    r, path = record(a, "at_peak_and_exit", [edges(a), "short_peak"], ["--snapshot-at-peak", "--snapshot-at-exit"])
    snaps = hsnap_json(a, "snapshots", "--json", path)["snapshots"]
    by = {x["trigger"]: x["index"] for x in snaps}
    check(sorted(by) == ["exit", "peak"], "an at-peak and an exit snapshot (%s)" % by)
    u = hsnap_json(a, "unreachable", "--json", path)
    check(u["snapshot"] == by["exit"], "a query without --snapshot reads the last taken, the exit one (%s)" % u["snapshot"])
    u = hsnap_json(a, "unreachable", "--json", "--snapshot", "peak", path)
    check(u["snapshot"] == by["peak"], "--snapshot peak reads the at-peak one (%s)" % u["snapshot"])
    q = run([a.heapsnap, "unreachable", "--snapshot", "growth", path])
    check(q.returncode == 1 and "no complete growth snapshot" in q.stderr, "--snapshot growth: there is none, said (%s)" % q.stderr.strip())
    q = run([a.heapsnap, "unreachable", "--snapshot", "tallest", path])
    check(q.returncode == 2 and "'tallest' is not a snapshot index or trigger" in q.stderr,
          "--snapshot tallest is refused as a usage error (rc %d, %s)" % (q.returncode, q.stderr.strip()))
    # A heap that never reaches the first level (256 KiB): no snapshot, and the timeline says why.
    r, path = record(a, "at_peak_small", [edges(a), "peak"], ["--snapshot-at-peak"])
    t = run([a.heapsnap, "timeline", path]).stdout
    check("no at-peak snapshot: the heap never reached 262144 B" in t,
          "a heap under 256 KiB: no at-peak snapshot, and why (%s)" % [l for l in t.splitlines() if "heapsnap" in l])
    # Issue 30.1: a snapshot asked for and not taken is said, with the reason.
    r, path = record(a, "not_taken", [edges(a), "short_peak"],
                     ["--snapshot-before-destructors", "--snapshot-at-exit", "--max-snapshots", "1"])
    j = hsnap_json(a, "snapshots", "--json", path)
    check([x["trigger"] for x in j["snapshots"]] == ["before-destructors"] and
          any(n.startswith("snapshot not taken (exit): --max-snapshots reached") for n in j["notes"]),
          "--max-snapshots 1 with two asked for: the second is said not taken, and why (%s)" % j["notes"])
    t = run([a.heapsnap, "snapshots", path]).stdout
    check("snapshot not taken (exit): --max-snapshots reached" in t, "snapshots prints it too")
    sj = hsnap_json(a, "summary", "--json", path)
    check(any(n.startswith("snapshot not taken (exit)") for n in sj["snapshot_notes"]),
          "summary --json has it in snapshot_notes (%s)" % sj.get("snapshot_notes"))
    t = run([a.heapsnap, "summary", path]).stdout
    check("snapshot not taken (exit): --max-snapshots reached" in t, "summary prints it under snapshots")


def case_on_growth(a):
    """--snapshot-on-growth (issue 30.4): a heap growing steadily to 42 MB, a snapshot each 4 MB,
    at most 4 kept: the kept ones are thinned evenly (the first, then every other, the newest last;
    the step doubles), and a diff between the first and the last names the site that grew."""
    r, path = record(a, "on_growth", [edges(a), "slow_growth"], ["--snapshot-on-growth", "4M", "--max-snapshots", "4"])
    check(r.returncode == 0, "program exits 0 (%s)" % r.stderr)
    j = hsnap_json(a, "snapshots", "--json", path)
    snaps = j["snapshots"]
    heaps = [x["heap_bytes"] for x in snaps]
    check(all(x["trigger"] == "growth" and x["complete"] for x in snaps) and 2 <= len(snaps) <= 4,
          "2 to 4 growth snapshots, complete (%s)" % [(x["trigger"], x["heap_bytes"], x["complete"]) for x in snaps])
    step = 4 << 20
    check(heaps == sorted(heaps) and step <= heaps[0] < step + 100000,
          "the first at the first 4 MiB crossed, in order of growth (%s)" % heaps)
    check(heaps[-1] >= 42000000 - 2 * 2 * step, "the newest near the end of the growth (%s)" % heaps)
    gaps = [b - x for x, b in zip(heaps, heaps[1:])]
    check(all(g >= step for g in gaps) and max(gaps) <= 2 * min(gaps) + 200000,
          "spread evenly: gaps of at least the step, none more than twice another (%s)" % gaps)
    check(any(n.startswith("growth snapshots: %d kept of " % len(snaps)) and "thinned" in n for n in j["notes"]),
          "snapshots says how many were kept of how many taken (%s)" % j["notes"])
    first, last = snaps[0]["index"], snaps[-1]["index"]
    d = hsnap_json(a, "diff", "--json", "%s:%d" % (path, first), "%s:%d" % (path, last))
    top = d["sites"][0] if d["sites"] else {}
    check(top.get("site", "").startswith("leak_slowly") and top["bytes_change"] == heaps[-1] - heaps[0],
          "diff first..last: leak_slowly grew by the heaps' difference (%s)" % top)
    check(not any(x["site"].startswith("fixed_table") for x in d["sites"]), "fixed_table did not change")
    for bad in ("0", "1001%", "x%", "abc"):
        q = run([a.heapsnap, "record", "-q", "-o", os.path.join(a.workdir, "bad.hsnap"), "--snapshot-on-growth", bad,
                 "--", edges(a), "short_peak"])
        check(q.returncode == 2 and "--snapshot-on-growth '%s'" % bad in q.stderr,
              "--snapshot-on-growth %s is refused with the reason (rc %d, %s)" % (bad, q.returncode, q.stderr.strip()))


if __name__ == "__main__":
    casekit.main(globals(), ["--heapsnap", "--programs"])
