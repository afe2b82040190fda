# The "py" benchmark workload: dicts, lists, strings, json and regular expressions, run with
# PYTHONMALLOC=malloc so that every Python object is a malloc call (~6-7 M calls, ~1 s natively).
# An optional argument scales the work (scripts/bench --quick runs it smaller); default 1.
import json
import re
import sys

scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0

words = re.compile(r"[a-z]+(\d+)")
records = []
for i in range(int(120000 * scale)):
    rec = {"id": i, "name": "item-%d" % i, "tags": ["t%d" % (i % 7), "g%d" % (i % 13)],
           "score": i * 0.5}
    records.append(rec)
text = json.dumps(records[:int(40000 * scale)])
back = json.loads(text)
index = {}
for r in back:
    for t in r["tags"]:
        index.setdefault(t, []).append(r["id"])
total = 0
for line in ("abc%d def%d" % (i, i * 2) for i in range(int(150000 * scale))):
    for m in words.finditer(line):
        total += int(m.group(1))
keep = {k: v[:100] for k, v in index.items()}
del records, back
print(len(text), len(index), total, sum(len(v) for v in keep.values()))
