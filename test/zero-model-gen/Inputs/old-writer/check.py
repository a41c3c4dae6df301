"""Runs every zero-model-gen command line in commands.txt and compares what
it writes with digests of the old hand-written text writer's output
(digests.txt: exit code, stderr and canonical stdout of each, see
normalize.py). Prints one line per mismatch and a summary.

  check.py ZERO_MODEL_GEN            compare
  check.py --record DIR              write digests.txt from an old writer's
                                     DIR/NNN.{out,err,rc}"""
import hashlib
import os
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from normalize import canonical  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def sha(data):
    return hashlib.sha256(data.encode()).hexdigest()


def commands():
    with open(os.path.join(HERE, "commands.txt")) as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def record(old_dir):
    with open(os.path.join(HERE, "digests.txt"), "w") as out:
        for i, _ in enumerate(commands(), 1):
            base = os.path.join(old_dir, "%03d" % i)
            text = {ext: open(base + "." + ext).read()
                    for ext in ("out", "err", "rc")}
            out.write("%d %s %s %s\n" % (int(text["rc"]), sha(text["err"]),
                                         sha(canonical(text["out"])),
                                         sha(text["out"])))


def compare(tool):
    with open(os.path.join(HERE, "digests.txt")) as f:
        digests = [line.split() for line in f]
    cmds = commands()
    if len(digests) != len(cmds):
        sys.exit("digests.txt has %d lines for %d commands" %
                 (len(digests), len(cmds)))
    bytewise = canonical_only = bad = 0
    for cmd, (rc, err, canon, raw) in zip(cmds, digests):
        run = subprocess.run([tool] + shlex.split(cmd), capture_output=True,
                             text=True)
        if (str(run.returncode), sha(run.stderr)) != (rc, err) or \
                sha(canonical(run.stdout)) != canon:
            bad += 1
            print("DIFFERS: zero-model-gen " + cmd)
        elif sha(run.stdout) == raw:
            bytewise += 1
        else:
            canonical_only += 1
    print("%d commands: %d byte-identical, %d identical after canonical "
          "spelling, %d differ" % (len(cmds), bytewise, canonical_only, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "--record":
        record(sys.argv[2])
    else:
        sys.exit(compare(sys.argv[1]))
