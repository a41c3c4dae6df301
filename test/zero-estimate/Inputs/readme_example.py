#!/usr/bin/env python3
"""readme_example.py DOC TOOL_DIR

Finds the zero-estimate example in DOC (docs/Tools.md) (the ```sh block after the comment
naming readme.test and the ```text block after it), runs its command with the
tools in TOOL_DIR and asserts that every line of the text block is a line of
what the command prints, whitespace included. Prints how many lines it found.
"""
import os
import shlex
import subprocess
import sys


def main():
    readme, tool_dir = sys.argv[1], sys.argv[2]
    lines = open(readme).read().splitlines()
    start = next(i for i, l in enumerate(lines)
                 if l.startswith("<!--") and "readme.test" in l)
    assert lines[start + 1] == "```sh", lines[start + 1]
    command = shlex.split(lines[start + 2])
    assert lines[start + 3] == "```" and lines[start + 4] == "```text"
    end = lines.index("```", start + 5)
    expected = lines[start + 5:end]
    command[0] = os.path.join(tool_dir, command[0])
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    printed = set(out.stdout.splitlines())
    missing = [l for l in expected if l not in printed]
    if missing:
        sys.exit("%s's zero-estimate example is stale; these lines "
                 "are not in the output of `%s`:\n%s" %
                 (readme, lines[start + 2], "\n".join(missing)))
    print("%s example: %d lines found in the output" %
          (os.path.basename(readme), len(expected)))


if __name__ == "__main__":
    main()
