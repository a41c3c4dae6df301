"""Runs a command and checks its CPU time and peak memory.

  measure.py --cpu-seconds S --rss-gib G -- COMMAND...

Prints the wall and CPU (user + system) seconds and the peak resident set
of the command (its largest process), and fails when the CPU time or the
peak exceeds the bounds. CPU time, not wall time, is bounded: the wall time
of a test depends on what else the machine runs.
"""

import argparse
import resource
import subprocess
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cpu-seconds", type=float, required=True)
    p.add_argument("--rss-gib", type=float, required=True)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    start = time.monotonic()
    rc = subprocess.call(command)
    wall = time.monotonic() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime
    gib = usage.ru_maxrss / 2.0 ** 20  # KiB on Linux
    print("wall %.1f s, cpu %.1f s, peak rss %.2f GiB" % (wall, cpu, gib))
    if rc != 0:
        sys.exit("FAIL: the command exited with %d" % rc)
    if cpu > args.cpu_seconds or gib > args.rss_gib:
        sys.exit("FAIL: over %g cpu seconds or %g GiB" % (args.cpu_seconds,
                                                          args.rss_gib))
    print("within %g cpu seconds and %g GiB" % (args.cpu_seconds,
                                                args.rss_gib))


if __name__ == "__main__":
    main()
