# The report's size-budget workload: dict-heavy Python whose native call stacks differ widely.
# Recursion re-enters the interpreter through six C paths (map, sorted key, dict() of a
# generator, filter, functools.reduce, min key), so every path down the recursion is a distinct
# native stack: depth 6 gives ~0.85 million distinct stacks, depth 7 ~4.8 million.
#
#   PYTHONMALLOC=malloc heapsnap record --sample-bytes 1 --stack-depth 256 -o big.hsnap -- \
#       /usr/bin/python3 tests/report/many_stacks.py 7
#   heapsnap report big.hsnap -o big.html
import functools
import sys

sys.setrecursionlimit(10000)


def leaf(path):
    d = {"path": path, "n": len(path), "s": "x" * (len(path) % 7)}
    d[str(path)] = [path, {"k": path}]
    return d


def via_map(f, xs): return list(map(f, xs))
def via_sorted(f, xs): return sorted(xs, key=f)
def via_dict(f, xs): return dict((x, f(x)) for x in xs)
def via_filter(f, xs): return list(filter(f, xs))
def via_reduce(f, xs): return functools.reduce(lambda a, x: (a, f(x)), xs, None)
def via_min(f, xs): return min(xs, key=f)


VIAS = [via_map, via_sorted, via_dict, via_filter, via_reduce, via_min]


def rec(path, depth):
    if depth == 0:
        return leaf(path)
    out = {}
    for i, via in enumerate(VIAS):
        def step(x, i=i):
            out[(i, x)] = rec(path + (i,), depth - 1)
            return 1
        via(step, [0])
    return out


depth = int(sys.argv[1]) if len(sys.argv) > 1 else 6
keep = rec((), depth)
print(len(keep))
