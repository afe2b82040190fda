#!/usr/bin/env python3
"""Integration tests of the client API (preload/include/heapsnap.h): pools, move ranges (.NET's
MovedReferences example), markers, snapshot requests, and the header's no-op behaviour without
the tracer.

usage: pool_cases.py CASE --heapsnap BIN --programs DIR --workdir DIR
"""
import json
import os
import subprocess

import casekit
from casekit import fail, check

SLOT = 64


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    return r


def hj(a, *args):
    r = run([a.heapsnap, *args])
    if r.returncode != 0:
        fail("heapsnap %s: %s" % (" ".join(args), r.stderr))
    return json.loads(r.stdout)


def case_dotnet(a):
    prog = os.path.join(a.programs, "pool_dotnet")
    native = run([prog])
    check(native.returncode == 0 and native.stdout.startswith("active 0 pool no"),
          "without the tracer every call is a no-op (heapsnap_active() == 0, no pool)")
    path = os.path.join(a.workdir, "dotnet.hsnap")
    if os.path.exists(path):
        os.unlink(path)
    r = run([a.heapsnap, "record", "-q", "-o", path, "--sample-bytes", "1", "--snapshot-on-request", "--", prog])
    check(r.returncode == 0 and r.stdout.startswith("active 1 pool yes"), "under the tracer the API is live")
    arena = int([l for l in r.stdout.splitlines() if l.startswith("arena")][0].split()[1], 16)
    # Replay: the survivors, followed through the move, at their new addresses with their ids.
    lk = hj(a, "leaks", "--json", path)
    objs = sorted((int(o["address"], 16) - arena) // SLOT for o in lk["pool_objects"])
    check(objs == [7, 8, 10, 11, 12, 13, 14], "replay: survivors at slots 07 08 10 11 12 13 14 (%s)" % objs)
    sizes = {(int(o["address"], 16) - arena) // SLOT: o["size"] for o in lk["pool_objects"]}
    check(sizes[8] == 2 * SLOT and all(sizes[s] == SLOT for s in (7, 10, 11, 12, 13, 14)),
          "the two-slot object (was at 10) is now at 08; the others are one slot")
    ids_alloc = sorted(o["id"] for o in lk["pool_objects"])
    check(len(set(ids_alloc)) == 7, "each survivor kept its own identity")
    pool = lk["pools"][0]
    check(pool["name"] == "dotnet-gen0" and pool["moves"] == 1 and pool["compacted_away"] == 3,
          "one compacting move; 09, 13 and 19 did not survive (%s)" % pool)
    # The snapshot after compaction: pool objects are blocks, the arena malloc block is not.
    snaps = hj(a, "snapshots", "--json", path)["snapshots"]
    check(len(snaps) == 1 and snaps[0]["trigger"] == "client" and snaps[0]["label"] == "after compaction"
          and snaps[0]["complete"], "heapsnap_snapshot() took a labelled snapshot")
    d = hj(a, "snapshots", "--dump", "0", path)
    blocks = {int(b["address"], 16): b for b in d["block_list"]}
    inarena = sorted((ad - arena) // SLOT for ad in blocks if arena <= ad < arena + 32 * SLOT)
    check(inarena == [7, 8, 10, 11, 12, 13, 14], "snapshot: the pool's 7 objects are blocks (%s)" % inarena)
    check(arena not in blocks or blocks[arena]["size"] != 32 * SLOT, "the arena's malloc block is not a node")
    b7, b14 = blocks[arena + 7 * SLOT], blocks[arena + 14 * SLOT]
    check([e["to"] for e in b7["edges"]] == [b14["n"]], "slot 07 -> slot 14")
    b10, b11 = blocks[arena + 10 * SLOT], blocks[arena + 11 * SLOT]
    check([e["to"] for e in b10["edges"]] == [b11["n"]], "slot 10 -> slot 11")
    tr = hj(a, "top-retainers", "--json", path)
    top = [o for o in tr["objects"] if "address" in o and int(o["address"], 16) == arena + 7 * SLOT]
    check(top and top[0]["retained_bytes"] == 2 * SLOT, "slot 07 retains itself and slot 14: 128 bytes")
    ta = hj(a, "top-allocators", "--json", path)
    check(any(x["site"].startswith("[pool dotnet-gen0]") for x in ta["sites"]),
          "top-allocators labels the pool's objects with the pool's name")
    tl = hj(a, "timeline", "--json", path)
    check([m["text"] for m in tl["markers"]] == ["allocated 10 objects", "compacted"], "markers in order")


def case_noncompacting(a):
    # A non-compacting report: survivors listed, objects no range covers stay put.
    src = os.path.join(a.workdir, "noncompact.c")
    exe = os.path.join(a.workdir, "noncompact")
    with open(src, "w") as f:
        f.write(r'''
#include <heapsnap.h>
#include <stdio.h>
#include <stdlib.h>
int main(void) {
  char *arena = malloc(4096);
  heapsnap_pool *p = heapsnap_pool_create("nc");
  for (int i = 0; i < 8; ++i) heapsnap_pool_alloc(p, arena + 64 * i, 64);
  const void *o[] = {arena}, *n[] = {arena + 1024};
  size_t l[] = {128};
  heapsnap_moved_ranges(p, o, n, l, 1, 0);            /* objects 0,1 move by 1024 */
  const void *o2[] = {arena + 1024}, *n2[] = {arena + 2048};
  heapsnap_moved_ranges(p, o2, n2, l, 1, 0);          /* and again: a block moving twice */
  heapsnap_pool_free(p, arena + 64 * 7);
  printf("arena %p\n", (void *)arena);
  return 0;
}
''')
    inc = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "preload", "include")
    r = run(["cc", "-O1", "-I", inc, "-o", exe, src])
    check(r.returncode == 0, "a program compiled with only -I preload/include builds (%s)" % r.stderr)
    path = os.path.join(a.workdir, "nc.hsnap")
    if os.path.exists(path):
        os.unlink(path)
    r = run([a.heapsnap, "record", "-q", "-o", path, "--sample-bytes", "1", "--", exe])
    arena = int(r.stdout.split()[1], 16)
    lk = hj(a, "leaks", "--json", path)
    offs = sorted(int(o["address"], 16) - arena for o in lk["pool_objects"])
    check(offs == [64 * 2, 64 * 3, 64 * 4, 64 * 5, 64 * 6, 2048, 2048 + 64],
          "non-compacting: uncovered objects stay, covered ones moved twice, the freed one is gone (%s)" % offs)


if __name__ == "__main__":
    casekit.main(globals(), ["--heapsnap", "--programs"])
