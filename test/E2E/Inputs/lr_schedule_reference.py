#!/usr/bin/env python3
"""DeepSpeed's learning-rate schedulers, written for this test from the
formulas of deepspeed.runtime.lr_schedules (WarmupLR, WarmupDecayLR,
WarmupCosineLR, OneCycle with its momentum, LRRangeTest), driven as
DeepSpeed's engine drives them: the constructor sets the first step's
learning rate and step() runs after every optimizer step that was not
skipped. Checks the `lr` (and OneCycle's betas) column of a training log.

  lr_schedule_reference.py --spec TYPE:name=value,... --lr BASE --log LOG
"""
import argparse
import json
import math
import sys


def parse_spec(spec):
    kind, _, rest = spec.partition(":")
    params = {}
    for item in filter(None, rest.split(",")):
        name, _, value = item.partition("=")
        params[name.strip()] = value.strip()
    return kind.strip(), params


class Warmup:
    def __init__(self, p, decay):
        self.min_lr = float(p.get("warmup_min_lr", 0.0))
        self.max_lr = float(p.get("warmup_max_lr", 0.001))
        self.delta = self.max_lr - self.min_lr
        self.warmup = max(2, int(p.get("warmup_num_steps", 1000)))
        self.type = p.get("warmup_type", "log")
        self.inverse_log = 1.0 / math.log(self.warmup)
        self.total = int(p.get("total_num_steps", 0)) if decay else None
        self.it = -1
        self.lr = self.min_lr  # what the constructor sets

    def gamma(self):
        if self.it < self.warmup:
            if self.type == "log":
                return self.inverse_log * math.log(self.it + 1)
            return self.it / self.warmup
        if self.total is None:
            return 1.0
        return max(0.0, float(self.total - self.it) /
                   float(max(1.0, self.total - self.warmup)))

    def step(self):
        self.it += 1
        self.lr = self.min_lr + self.delta * self.gamma()


class WarmupCosine:
    def __init__(self, p, base_lr):
        self.base = base_lr
        self.total = int(p["total_num_steps"])
        self.min_ratio = float(p.get("warmup_min_ratio", 0.0))
        self.cos_min = float(p.get("cos_min_ratio", 0.0001))
        self.type = p.get("warmup_type", "log")
        self.warmup = max(2, int(p.get("warmup_num_steps", 1000)))
        self.inverse_log = 1.0 / math.log(self.warmup)
        self.it = -1
        self.lr = 0.0  # get_lr() before the first step() is [0.0]

    def ratio(self):
        if self.it < self.warmup:
            if self.type == "log":
                r = self.inverse_log * math.log(self.it + 1)
            else:
                r = self.it / self.warmup
            return self.min_ratio + r * (1.0 - self.min_ratio)
        last = self.it - self.warmup + 1
        total = self.total - self.warmup
        r = (1 + math.cos(math.pi * last / total)) / 2
        return max(0.0, self.cos_min + (1.0 - self.cos_min) * r)

    def step(self):
        self.it += 1
        self.lr = self.base * self.ratio()


class OneCycle:
    def __init__(self, p):
        first = float(p.get("cycle_first_step_size", 2000))
        second = float(p["cycle_second_step_size"]) if \
            int(p.get("cycle_second_step_size", 0)) else first
        self.total = first + second
        self.step_ratio = first / self.total
        self.min_lr = float(p["cycle_min_lr"])
        self.max_lr = float(p["cycle_max_lr"])
        self.decay_lr_rate = float(p.get("decay_lr_rate", 0.0))
        self.decay_step = int(p.get("decay_step_size", 0))
        self.momentum = p.get("cycle_momentum", "true") in ("true", "True", "1")
        self.min_mom = float(p.get("cycle_min_mom", 0.8))
        self.max_mom = float(p.get("cycle_max_mom", 0.9))
        self.decay_mom_rate = float(p.get("decay_mom_rate", 0.0))
        self.skip_lr = self.decay_step == 0 or self.decay_lr_rate == 0
        self.skip_mom = self.decay_step == 0 or self.decay_mom_rate == 0
        self.it = -1
        self.lr = self.min_lr
        self.betas = (self.min_mom, 0.99) if self.momentum else None

    def scale(self):
        bi = self.it + 1
        cycle = math.floor(1 + bi / self.total)
        x = 1. + bi / self.total - cycle
        if x <= self.step_ratio:
            return x / self.step_ratio
        return (x - 1) / (self.step_ratio - 1)

    def step(self):
        self.it += 1
        if self.it < self.total:
            s = self.scale()
            self.lr = self.min_lr + (self.max_lr - self.min_lr) * s
            mom = self.max_mom - (self.max_mom - self.min_mom) * s
        else:
            interval = (self.it - self.total + 1) / self.decay_step \
                if self.decay_step else 0.0
            self.lr = self.min_lr if self.skip_lr else \
                self.min_lr / (1 + self.decay_lr_rate * interval)
            mom = self.max_mom if self.skip_mom else \
                self.max_mom * (1 + self.decay_mom_rate * interval)
        if self.momentum:
            self.betas = (mom, 0.99)


class RangeTest:
    def __init__(self, p):
        self.min_lr = float(p.get("lr_range_test_min_lr", 1e-3))
        self.size = int(p.get("lr_range_test_step_size", 2000))
        self.rate = float(p.get("lr_range_test_step_rate", 1.0))
        self.staircase = p.get("lr_range_test_staircase", "false") in (
            "true", "True", "1")
        self.it = -1
        self.lr = self.min_lr
        self.betas = None

    def step(self):
        self.it += 1
        interval = float(self.it + 1) / self.size
        if self.staircase:
            interval = math.floor(interval)
        self.lr = self.min_lr * (1 + self.rate * interval)


def make(spec, base_lr):
    kind, p = parse_spec(spec)
    if kind == "WarmupLR":
        s = Warmup(p, decay=False)
    elif kind == "WarmupDecayLR":
        s = Warmup(p, decay=True)
    elif kind == "WarmupCosineLR":
        s = WarmupCosine(p, base_lr)
    elif kind == "OneCycle":
        return OneCycle(p)
    elif kind == "LRRangeTest":
        return RangeTest(p)
    else:
        raise SystemExit("unknown scheduler " + kind)
    s.betas = None
    return s


def close(x, y, rtol):
    return x == y or abs(x - y) <= rtol * max(abs(y), 1e-300)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", required=True)
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--steps", type=int)
    ap.add_argument("--rtol", type=float, default=1e-7)
    args = ap.parse_args()
    log = [json.loads(l) for l in open(args.log) if l.strip()]
    if args.steps is not None and len(log) != args.steps:
        print("FAIL: %d log lines, expected %d" % (len(log), args.steps))
        sys.exit(1)
    sched = make(args.spec, args.lr)
    worst, distinct, skipped = 0.0, set(), 0
    for line in log:
        if not close(line["lr"], sched.lr, args.rtol):
            print("FAIL: step %d: lr %r, reference %r" %
                  (line["step"], line["lr"], sched.lr))
            sys.exit(1)
        if sched.lr:
            worst = max(worst, abs(line["lr"] - sched.lr) / abs(sched.lr))
        if sched.betas is not None:
            for k, key in enumerate(("beta1", "beta2")):
                if not close(line[key], sched.betas[k], args.rtol):
                    print("FAIL: step %d: %s %r, reference %r" %
                          (line["step"], key, line[key], sched.betas[k]))
                    sys.exit(1)
        distinct.add(sched.lr)
        if line["skipped"]:
            skipped += 1
        else:
            sched.step()
    print("%s: %d steps (%d skipped) match the reference within %g "
          "(%d distinct learning rates, worst %.2g)" %
          (args.spec.split(":")[0], len(log), skipped, args.rtol,
           len(distinct), worst))


if __name__ == "__main__":
    main()
