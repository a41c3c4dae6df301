#!/usr/bin/env python3
"""readme_commands.py README TEST --python PY --mpirun CMD

Prints, as a shell script, the commands of the README's ```sh block that
follows the comment naming TEST (one command a line, `\\` continuing one),
with the leading `python3` and `mpirun` of a command replaced by PY and CMD
(the test's own). Fails if the block is missing or holds more than five
commands, the most the README's quick start promises.
"""
import argparse
import shlex
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("readme")
    p.add_argument("test")
    p.add_argument("--python", required=True)
    p.add_argument("--mpirun", required=True)
    args = p.parse_args()
    lines = open(args.readme).read().splitlines()
    start = next((i for i, l in enumerate(lines)
                  if l.startswith("<!--") and args.test in l), None)
    if start is None or lines[start + 1] != "```sh":
        sys.exit("%s: no ```sh block after a comment naming %s" % (
            args.readme, args.test))
    end = lines.index("```", start + 2)
    commands, current = [], ""
    for line in lines[start + 2:end]:
        current += line
        if current.endswith("\\"):
            current = current[:-1]
            continue
        if current.strip():
            commands.append(current.strip())
        current = ""
    if not commands or len(commands) > 5:
        sys.exit("%s: the block after the comment naming %s has %d "
                 "commands, not 1 to 5" % (args.readme, args.test,
                                           len(commands)))
    tools = {"python3": args.python, "mpirun": args.mpirun}
    print("set -e")
    for c in commands:
        word, _, rest = c.partition(" ")
        print("echo %s" % shlex.quote("$ " + c))
        print(tools.get(word, word) + " " + rest)
    print("# %d commands" % len(commands))


if __name__ == "__main__":
    main()
