#!/usr/bin/env python3
"""Writes the hand-made inputs of tests/fuzz/regressions/records/ (decompressed record streams, as
capture_records_fuzz takes them). Each is the smallest stream that showed a bug; the comment says
which. Inputs the fuzzers found are checked in as they were minimized (see regressions/README.md).

usage: make_regressions.py [OUTDIR]   (default: regressions/records next to this script)
"""
import os
import sys


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def zigzag(n):
    return (n << 1) ^ (n >> 63) if n >= 0 else ((-n) << 1) - 1


def field(num, wire, payload):
    key = varint((num << 3) | wire)
    if wire == 0:
        return key + varint(payload)
    return key + varint(len(payload)) + payload


def packed(num, values, signed=False):
    return field(num, 2, b"".join(varint(zigzag(v) if signed else v) for v in values))


def record(body_field, body):
    rec = field(body_field, 2, body)
    return varint(len(rec)) + rec


def process(sample_bytes=1):
    return record(1, field(1, 0, 4242) + field(6, 0, sample_bytes))


ALLOC, FREE, REALLOC = 0, 1, 2


def batch(events, base_id=0, tid=7):
    """events: list of (kind, dict) with keys id_delta, size, stack, fn, ref, moved."""
    cols = {k: [] for k in ("kind", "time", "size", "stack", "fn", "id_delta", "ref", "moved")}
    for kind, e in events:
        cols["kind"].append(kind)
        cols["time"].append(1)
        if kind == ALLOC:
            cols["id_delta"].append(e.get("id_delta", 1))
            cols["size"].append(e.get("size", 16))
            cols["stack"].append(e.get("stack", 0))
            cols["fn"].append(0)
        elif kind == FREE:
            cols["stack"].append(e.get("stack", 0))
            cols["ref"].append(e.get("ref", 0))
        elif kind == REALLOC:
            cols["ref"].append(e.get("ref", 0))
            cols["size"].append(e.get("size", 32))
            cols["stack"].append(e.get("stack", 0))
            cols["fn"].append(2)
            cols["moved"].append(1)
    body = field(1, 0, tid) + field(10, 0, base_id)
    body += packed(3, cols["kind"]) + packed(4, cols["time"]) + packed(6, cols["size"])
    body += packed(7, cols["stack"]) + packed(8, cols["fn"])
    body += packed(11, cols["id_delta"], signed=True) + packed(12, cols["ref"], signed=True)
    body += packed(13, cols["moved"])
    return record(5, body)


def snapshot_begin(index):
    return record(12, field(1, 0, index) + field(2, 0, 5))


def snapshot_blocks(index, first, n, start):
    """n blocks of 16 bytes, 64 bytes apart from address start on, no identity."""
    body = field(1, 0, index) + packed(2, [start] + [64] * (n - 1), signed=True) + packed(3, [16] * n)
    body += packed(4, [0] * n, signed=True) + packed(5, [0] * n) + packed(6, [0] * n) + packed(7, [0] * n)
    return record(13, body + field(9, 0, first))


def snapshot_edges(index, base, from_delta, count, to_delta):
    body = field(1, 0, index) + packed(2, from_delta) + packed(3, count)
    body += packed(4, to_delta, signed=True) + packed(6, [0] * len(to_delta))
    return record(14, body + field(7, 0, base))


def snapshot_end(index, blocks):
    return record(16, field(1, 0, index) + field(2, 0, blocks) + field(8, 0, 1))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "regressions", "records")
    os.makedirs(out, exist_ok=True)
    files = {}
    # replay.cc fig(): an ALLOC naming stack 0xfffffff0, which no Stack record defined, resized
    # by_stack to 2^32 entries (~340 GB). Now counted under stack 0 and reported as a problem.
    files["alloc-undefined-stack"] = process() + batch([(ALLOC, {"stack": 0xFFFFFFF0})])
    # Same through REALLOC of a live block, whose stack is the realloc's own.
    files["realloc-undefined-stack"] = process() + batch(
        [(ALLOC, {"stack": 0}), (REALLOC, {"ref": 0, "stack": 0x7FFFFFFF})])
    # replay.cc + util/flat_map.h: a FREE of id 0 (latest id 1, ref 1) "erased" an empty slot of the
    # live table (0 is its empty-key marker) and decremented its count below zero; the next ALLOC
    # then saw the table as over-full and doubled it, every 3 frees: 40 rounds ask 16 * 2^40 slots.
    rounds = []
    for _ in range(40):
        rounds += [(FREE, {"ref": 1})] * 3 + [(ALLOC, {"id_delta": 0})]
    files["free-id-zero"] = process() + batch([(ALLOC, {"id_delta": 1})] + rounds)
    # snapshot/heap_snapshot.cc load_snapshot(): edge_begin is sized to the blocks read when the
    # first SnapshotEdges arrives; SnapshotBlocks after it, then edges of the later blocks, wrote
    # past its end (heap-buffer-overflow). Blocks 0, edges of 0, blocks 1..10, an edge of block 5.
    files["snapshot-blocks-after-edges"] = (
        process() + snapshot_begin(0) + snapshot_blocks(0, 0, 1, 0x1000) + snapshot_edges(0, 0, [0], [0], [])
        + snapshot_blocks(0, 1, 10, 0x2000) + snapshot_edges(0, 0, [5], [1], [-5]) + snapshot_end(0, 11))
    # snapshot/load_snapshot.cc's raw block/edge decoder (snapshot/snapshot_columns.h), which the
    # harness compares with the libprotobuf path on every snapshot: a column with an 11-byte varint
    # and one whose last varint runs past it (libprotobuf refuses both records: skipped, so the
    # next block record is out of order), then a capture whose columns come split in two chunks
    # and unpacked (valid: left to libprotobuf), with raw edge records over three frames, interior
    # edges, and a failing edge record after good ones.
    eleven = b"\x81" * 10 + b"\x01"
    bad_addr = field(1, 0, 0) + field(2, 2, eleven) + packed(3, [16]) + packed(4, [0], signed=True)
    bad_addr += packed(5, [0]) + packed(6, [0]) + packed(7, [0])
    cut_addr = field(1, 0, 0) + field(2, 2, b"\x81") + packed(3, [16]) + packed(4, [0], signed=True)
    cut_addr += packed(5, [0]) + packed(6, [0]) + packed(7, [0])
    files["snapshot-raw-overlong-varint"] = (
        process() + snapshot_begin(0) + record(13, bad_addr) + record(13, cut_addr)
        + snapshot_blocks(0, 0, 4, 0x1000) + snapshot_end(0, 4))
    split = field(1, 0, 0) + packed(2, [0x1000, 64], signed=True) + packed(2, [64, 64], signed=True)
    split += b"".join(field(3, 0, 16) for _ in range(4)) + packed(4, [0] * 4, signed=True)
    split += packed(5, [0] * 4) + packed(6, [0] * 4) + packed(7, [0] * 4) + field(9, 0, 0)
    frame = b"HSFRAME!"
    def edges_interior(base, from_delta, count, to_delta, interior):
        body = field(1, 0, 0) + packed(2, from_delta) + packed(3, count) + packed(4, to_delta, signed=True)
        body += packed(5, interior) + packed(6, [8] * len(to_delta)) + field(7, 0, base)
        return record(14, body)
    files["snapshot-raw-split-columns-frames"] = (
        process() + snapshot_begin(0) + record(13, split) + snapshot_blocks(0, 4, 8, 0x2000) + frame
        + edges_interior(0, [0, 1], [2, 1], [1, 2, 1], [1]) + edges_interior(3, [0, 2], [1, 3], [-3, 1, 2, 3], [0, 2])
        + frame + edges_interior(6, [0], [1], [1], []) + edges_interior(8, [1], [2], [1, 9], [])
        + frame + snapshot_end(0, 12))
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        print("%s: %d bytes" % (name, len(data)))


if __name__ == "__main__":
    main()
