#!/usr/bin/env python3
"""Prints an .mlir file with its SSA names replaced by their order of first
appearance (%v0, %v1, ...), comment and empty lines dropped.

zero-model-gen names values (%mm3, %loss, a split's %q11, %k12, %v13) where
zero-opt numbers them (%3, %arg0, %7:3 with uses %7#1): with the names
numbered alike, the two texts compare equal exactly when the generated IR
prints back as it was written."""

import re
import sys

GROUP = re.compile(r"(%[\w$.-]+):(\d+)(?= = )")
VALUE = re.compile(r"%[\w$.-]+(?:#\d+)?")


def main():
    text = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
    # %7:3 = ... defines %7#0, %7#1 and %7#2.
    text = GROUP.sub(
        lambda m: ", ".join("%s#%d" % (m.group(1), i)
                            for i in range(int(m.group(2)))), text)
    ids = {}
    out = []
    for line in text.splitlines():
        # Comments, and the empty line zero-opt ends its output with.
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        out.append(VALUE.sub(
            lambda m: "%%v%d" % ids.setdefault(m.group(0), len(ids)), line))
    print("\n".join(out))


if __name__ == "__main__":
    main()
