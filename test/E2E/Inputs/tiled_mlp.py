"""The tiled MLP's end-to-end check (tiled-mlp.test).

check: two or more --log-json logs of the same steps, the untiled run's
first: every step's loss within --rtol of the untiled run's, each run's
measured peak equal to its plan, and with --lower the second run's planned
and measured peaks below the first's. Prints each run's peak.
"""

import argparse
import json
import sys


def read_log(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("logs", nargs="+", metavar="NAME=LOG")
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--lower", action="store_true",
                   help="the second run's peaks are below the first's")
    args = p.parse_args()
    runs = [(spec.split("=", 1)[0], read_log(spec.split("=", 1)[1]))
            for spec in args.logs]
    base_name, base = runs[0]
    if not base:
        fail("%s: no steps" % base_name)
    for name, log in runs:
        if len(log) != len(base):
            fail("%s: %d steps, %s %d" % (name, len(log), base_name,
                                          len(base)))
        for a, b in zip(base, log):
            diff = abs(a["loss"] - b["loss"]) / max(abs(a["loss"]), 1e-30)
            if diff > args.rtol:
                fail("%s step %d: loss %r, %s %r" %
                     (name, a["step"], b["loss"], base_name, a["loss"]))
        last = log[-1]
        if last["peak_bytes"] != last["planned_peak_bytes"]:
            fail("%s: measured peak %d, planned %d" %
                 (name, last["peak_bytes"], last["planned_peak_bytes"]))
    print("%d steps: losses within %g relative of %s" %
          (len(base), args.rtol, base_name))
    print("measured peak == planned peak in every run")
    for name, log in runs:
        print("%s: peak %d" % (name, log[-1]["peak_bytes"]))
    if args.lower:
        (_, a), (name, b) = runs[0], runs[1]
        pa, pb = a[-1]["planned_peak_bytes"], b[-1]["planned_peak_bytes"]
        ma, mb = a[-1]["peak_bytes"], b[-1]["peak_bytes"]
        if not (pb < pa and mb < ma):
            fail("%s: planned peak %d (untiled %d), measured %d (untiled %d)"
                 % (name, pb, pa, mb, ma))
        print("%s: planned and measured peaks lower by %d" % (name, pa - pb))


if __name__ == "__main__":
    main()
