"""hpZ against plain ZeRO-3 on the same topology: the losses of every step
are bitwise equal, every measured peak equals its plan, and hpZ's planned
peak is ZeRO-3's plus its secondary shards (each persistent buffer starts at
a 64-byte boundary)."""
import argparse
import json
import sys

DTYPE_BYTES = {"f32": 4, "bf16": 2, "f16": 2}


def fail(msg):
    print("hpz_check: " + msg)
    sys.exit(1)


def read_log(path):
    return [json.loads(l) for l in open(path) if l.strip()]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--hpz-log", required=True)
    p.add_argument("--hpz-manifest", required=True)
    p.add_argument("--zero3-log", required=True)
    p.add_argument("--what", required=True)
    a = p.parse_args()
    hpz, z3 = read_log(a.hpz_log), read_log(a.zero3_log)
    if len(hpz) != len(z3) or not hpz:
        fail("%d steps against %d" % (len(hpz), len(z3)))
    for h, z in zip(hpz, z3):
        if h["loss"] != z["loss"]:
            fail("step %d: loss %r, ZeRO-3 %r" % (h["step"], h["loss"],
                                                  z["loss"]))
        for line, name in ((h, "hpZ"), (z, "ZeRO-3")):
            if line["peak_bytes"] != line["planned_peak_bytes"]:
                fail("%s step %d: measured peak %d != planned %d" %
                     (name, line["step"], line["peak_bytes"],
                      line["planned_peak_bytes"]))
    m = json.load(open(a.hpz_manifest))
    secondary = 0
    for part in m["partitions"]:
        n = part.get("buffer_numel", {}).get("secondary")
        if n:
            secondary += -(-n * DTYPE_BYTES[part["compute_dtype"]] // 64) * 64
    if not secondary:
        fail("the hpZ program keeps no secondary shard")
    want = z3[-1]["planned_peak_bytes"] + secondary
    if hpz[-1]["planned_peak_bytes"] != want:
        fail("hpZ planned peak %d != ZeRO-3's %d + secondary shards %d" %
             (hpz[-1]["planned_peak_bytes"], z3[-1]["planned_peak_bytes"],
              secondary))
    print("%s: %d steps bitwise equal to ZeRO-3; peak %d == planned == "
          "ZeRO-3's %d + secondary shards %d" %
          (a.what, len(hpz), hpz[-1]["peak_bytes"], z3[-1]["peak_bytes"],
           secondary))


if __name__ == "__main__":
    main()
