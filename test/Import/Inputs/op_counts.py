#!/usr/bin/env python3
"""Counts of each op kind in a printed module, one 'kind count' a line.

  op_counts.py FILE [--rename FROM=TO ...]
"""

import argparse
import collections
import re

p = argparse.ArgumentParser()
p.add_argument("file")
p.add_argument("--rename", action="append", default=[])
args = p.parse_args()
rename = dict(r.split("=") for r in args.rename)
counts = collections.Counter()
for line in open(args.file):
    m = re.match(r"\s*(?:%[^=]*=\s*)?([a-z_]+\.[a-z_]+)\b", line)
    if m and not line.lstrip().startswith("//"):
        kind = m.group(1)
        counts[rename.get(kind, kind)] += 1
for kind in sorted(counts):
    print(kind, counts[kind])
