"""What the sections of update_docs.py share: a results file read, the
machine line, and the goals a measured ratio is marked against."""

import json
import os


# Goals of issue 8.
GOAL_BANDWIDTH = 0.8
GOAL_COMM = 0.95
GOAL_MODEL = (0.75, 1.33)


def load(results, name):
    path = os.path.join(results, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def machine_line(m):
    if not m:
        return "Machine: unknown (no machine.json)."
    return ("Machine: %d cores (`nproc` = %d), `%s` (lscpu model name), "
            "%.1f GiB memory, %s; %s. Measured on %s with the other "
            "engineers' builds and tests running on the same cores (load "
            "average %s at the start): absolute numbers drift, which is why "
            "every figure below is a ratio of two measurements taken back to "
            "back in the same run (medians over interleaved rounds)." % (
                m["nproc"], m["nproc"], m["cpu"], m["mem_gib"],
                m.get("virtualization", "bare metal"), m.get("mpi", "MPI"),
                m.get("date", "?"), m.get("loadavg", "?")))


def ok(value, lo, hi=None):
    if hi is None:
        return "yes" if value >= lo else "**no**"
    return "yes" if lo <= value <= hi else "**no**"
