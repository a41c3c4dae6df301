#!/usr/bin/env python3
"""The bytes rank 0's collectives send within its node and between nodes,
worked out from a scheduled step (zero-compile --emit=mlir) and its manifest
(--print-manifest) with zero_rt/topology.h's rule, written here again:

  a collective over members 0..n-1, q of them on each node, where member j
  contributes or owns part c[j], runs across nodes among the members of the
  same local index (j % q) and within each node; a member sends every part
  of a level but its own, once per pass (an all-reduce has two). Member me
  sends within its node passes * (sum c - sum of its local index's parts)
  and across nodes passes * (its local index's parts - c[me]).

The parts are the report's: a layout range's per-rank owned pieces (an
all-gather, a reduce-scatter, a reduce per owner), a whole stage-3 group's
padded shards (a prefetch or gather), an all-reduce's even split of its
elements. Then `check` compares with the --log-json lines of a run over
several nodes, and their losses with a one-node run's; `plan` writes them
as the manifest's plan.comm into a lowered program (the plan the report
makes), for the driver's end-of-run comparison.
"""

import argparse
import json
import re
import sys

DTYPE_BYTES = {"f32": 4, "bf16": 2, "f16": 2}


def fail(msg):
    print("comm_bytes: " + msg, file=sys.stderr)
    sys.exit(1)


def even_chunks(n, ranks):
    return [n // ranks + (1 if r < n % ranks else 0) for r in range(ranks)]


def owned(part, rank):
    shard, numel = part["shard_numel"], part["numel"]
    return min(rank * shard, numel), min((rank + 1) * shard, numel)


def layout_chunks(part, b, e, ranks):
    out = []
    for r in range(ranks):
        ob, oe = owned(part, r)
        out.append(max(0, min(oe, e) - max(ob, b)))
    return out


def link_bytes(chunks, q, me, passes):
    n = len(chunks)
    if n <= 1:
        return 0, 0
    total = sum(chunks)
    if q >= n:
        return passes * (total - chunks[me]), 0
    cross = sum(c for j, c in enumerate(chunks) if j % q == me % q)
    return passes * (total - cross), passes * (cross - chunks[me])


OP = re.compile(r"zero\.(all_gather|reduce_scatter|reduce|all_reduce|prefetch|"
                r"gather)\b(.*)")
RANGE = re.compile(r"\[(\d+), (\d+)\)")
GROUP = re.compile(r"group @([\w.]+)")


def expected(mlir, manifest, ranks_per_node):
    m = json.load(open(manifest))
    if m["accumulation_steps"] != 1:
        fail("the test counts each collective once: one micro step only")
    world = m["world_size"]
    q = ranks_per_node if 0 < ranks_per_node < world else world
    parts = {p["name"]: p for p in m["partitions"]}
    out = {}

    def add(kind, chunks, eb, passes=1):
        intra, inter = link_bytes([c * eb for c in chunks], q, 0, passes)
        a = out.setdefault(kind, [0, 0])
        a[0] += intra
        a[1] += inter

    for line in open(mlir):
        op = OP.search(line)
        if not op or "zero.partition" in line:
            continue
        kind, rest = op.group(1), op.group(2)
        group = GROUP.search(rest)
        part = parts[group.group(1)] if group else None
        eb = DTYPE_BYTES[part["compute_dtype"]] if part else 4
        rng = RANGE.search(rest)
        if kind in ("prefetch", "gather"):
            add("all_gather", even_chunks(part["padded_numel"], world), eb)
        elif kind == "all_reduce":
            if "overflow_norm" in rest:
                add("all_reduce", even_chunks(2, world), 4, 2)
            else:
                b, e = map(int, rng.groups())
                add("all_reduce", even_chunks(e - b, world), eb, 2)
        else:
            b, e = map(int, rng.groups())
            add(kind, layout_chunks(part, b, e, world), eb)
    return {k: {"intra_node_bytes": v[0], "inter_node_bytes": v[1]}
            for k, v in out.items() if v != [0, 0]}


def mlir_unescape(text):
    return re.sub(r"\\([0-9A-Fa-f]{2})",
                  lambda m: chr(int(m.group(1), 16)), text)


def mlir_escape(text):
    return "".join(c if 32 <= ord(c) < 127 and c not in '"\\'
                   else "\\%02X" % ord(c) for c in text)


MANIFEST = re.compile(r'(@zero_manifest\(")(.*?)(\\00"\))')


def cmd_plan(args):
    text = open(args.lowered).read()
    found = MANIFEST.search(text)
    if not found:
        fail("no @zero_manifest in " + args.lowered)
    manifest = json.loads(mlir_unescape(found.group(2)))
    with open(args.manifest, "w") as f:
        json.dump(manifest, f)
    comm = expected(args.mlir, args.manifest, args.ranks_per_node)
    for kind in args.off_by_one or []:
        comm[kind]["inter_node_bytes"] += 1
    manifest["plan"]["comm"] = comm
    body = mlir_escape(json.dumps(manifest, sort_keys=True,
                                  separators=(",", ":")))
    with open(args.output, "w") as f:
        f.write(text[:found.start(2)] + body + text[found.end(2):])


def read_log(path):
    return [json.loads(l) for l in open(path) if l.strip()]


def cmd_check(args):
    want = expected(args.mlir, args.manifest, args.ranks_per_node)
    log = read_log(args.log)
    ref = read_log(args.reference)
    if len(log) != len(ref) or not log:
        fail("%d steps against %d" % (len(log), len(ref)))
    for a, b in zip(log, ref):
        got = a.get("comm")
        if got != want:
            fail("step %d: measured %s, the rule gives %s"
                 % (a["step"], json.dumps(got, sort_keys=True),
                    json.dumps(want, sort_keys=True)))
        if abs(a["loss"] - b["loss"]) > args.rtol * abs(b["loss"]):
            fail("step %d: loss %r, one node %r" % (a["step"], a["loss"],
                                                     b["loss"]))
    for kind in sorted(want):
        print("%s: intra %d inter %d bytes per step" % (
            kind, want[kind]["intra_node_bytes"],
            want[kind]["inter_node_bytes"]))
    print("comm ok: %d steps, losses within %g of one node" % (len(log),
                                                               args.rtol))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("--mlir", required=True)
    c.add_argument("--manifest", required=True)
    c.add_argument("--ranks-per-node", type=int, required=True)
    c.add_argument("--log", required=True)
    c.add_argument("--reference", required=True)
    c.add_argument("--rtol", type=float, default=1e-6)
    c = sub.add_parser("plan", help="write the rule's bytes as plan.comm "
                       "into a lowered program's manifest")
    c.add_argument("--mlir", required=True)
    c.add_argument("--lowered", required=True)
    c.add_argument("--manifest", required=True,
                   help="where to write the manifest read from --lowered")
    c.add_argument("--ranks-per-node", type=int, required=True)
    c.add_argument("--off-by-one", action="append",
                   help="plan one more inter-node byte of this kind")
    c.add_argument("-o", dest="output", required=True)
    args = p.parse_args()
    {"check": cmd_check, "plan": cmd_plan}[args.cmd](args)


if __name__ == "__main__":
    main()
