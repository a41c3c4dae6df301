#!/usr/bin/env python3
"""readme_check.py ROOT

Checks README.md as readme.test says: fewer than 120 lines; each ```sh block
right after an HTML comment naming the files (test/..., scripts/...,
.ci/...) that run it, each existing, and each command's first word found in
one of them. And docs/README.md links every page of docs/.
"""
import os
import re
import sys


def fail(msg):
    sys.exit("readme_check: " + msg)


def main():
    root = sys.argv[1]
    lines = open(os.path.join(root, "README.md")).read().splitlines()
    if len(lines) >= 120:
        fail("README.md has %d lines, not under 120" % len(lines))
    blocks = commands = 0
    for i, line in enumerate(lines):
        if line.strip() != "```sh":
            continue
        blocks += 1
        comment = lines[i - 1] if i else ""
        if not (comment.startswith("<!--") and comment.endswith("-->")):
            fail("README.md:%d: a ```sh block without the comment naming "
                 "what runs it" % (i + 1))
        names = re.findall(r"(?:test|scripts|\.ci)/[\w./-]+?(?=[\s;,:]|$)",
                           comment[4:-3].strip())
        if not names:
            fail("README.md:%d: the comment names no file" % i)
        texts = []
        for n in names:
            n = n.rstrip(".")
            path = os.path.join(root, n)
            if not os.path.isfile(path):
                for base, _, files in os.walk(os.path.join(root, "test")):
                    if os.path.basename(n) in files:
                        path = os.path.join(base, os.path.basename(n))
                        break
            if not os.path.isfile(path):
                fail("README.md:%d: the comment names %s, which does not "
                     "exist" % (i, n))
            texts.append(open(path).read())
        end = lines.index("```", i + 1)
        for j in range(i + 1, end):
            cmd = lines[j].split("#")[0].strip()
            if not cmd:
                continue
            commands += 1
            word = cmd.split()[0]
            if not any(word in t for t in texts):
                fail("README.md:%d: `%s` is not run by %s" %
                     (j + 1, word, ", ".join(names)))
    print("README.md: %d lines, %d command blocks, %d commands, each run by "
          "a named file" % (len(lines), blocks, commands))
    index = open(os.path.join(root, "docs", "README.md")).read()
    missing = [p for p in sorted(os.listdir(os.path.join(root, "docs")))
               if p.endswith(".md") and p != "README.md"
               and "(%s)" % p not in index]
    if missing:
        fail("docs/README.md does not link " + ", ".join(missing))
    print("docs/README.md: every page of docs/ indexed")


if __name__ == "__main__":
    main()
