#!/usr/bin/env python3
"""Checks zero-report's intra-/inter-node split against the two-level rule.

For each model and stage, schedules the model for 4 ranks on 2 nodes of 2
(ranks-per-node=2) and asserts, from the scheduled IR alone, that the
report's comm.intra_node_bytes_per_rank, comm.inter_node_bytes_per_rank and
comm.bytes_by_kind are what rank 0 sends when each collective runs in two
levels: member j of a collective owns (or contributes) part j; across nodes
rank 0 exchanges with the member of its local index on the other node (rank
2), within its node with rank 1, so it sends the parts of ranks 1 and 3
within the node and rank 2's part across nodes (a reduce-scatter); an
all-gather sends the same bytes, an all-reduce twice. The sum is the
one-level ring's, the report of the same step on one node.
"""
import json
import re
import sys

from report_models import models, run

RANKS, PER_NODE = 4, 2


def even(n):
    return [n // RANKS + (1 if r < n % RANKS else 0) for r in range(RANKS)]


def layout(padded, b, e):
    shard = padded // RANKS
    return [max(0, min((r + 1) * shard, e) - max(r * shard, b))
            for r in range(RANKS)]


def split(parts, passes):
    cross = sum(p for j, p in enumerate(parts) if j % PER_NODE == 0)
    return passes * (sum(parts) - cross), passes * (cross - parts[0])


def expected(sched):
    padded = {m.group(1): int(m.group(2)) for m in re.finditer(
        r"zero\.partition @([\w.]+) stage \d+ world_size \d+ alignment \d+ "
        r"numel \d+ padded (\d+)", sched)}
    kinds = {}
    for m in re.finditer(
            r"zero\.(all_gather|prefetch|reduce_scatter|reduce|all_reduce)"
            r" ([^\n]*)", sched):
        op, rest = m.group(1), m.group(2)
        group = re.search(r"group @([\w.]+)", rest).group(1)
        rng = re.search(r"\[(\d+), (\d+)\)", rest)
        kind = "all_gather" if op == "prefetch" else op
        eb, passes = 2, 2 if kind == "all_reduce" else 1
        if kind == "all_reduce" and rng:
            parts = even(int(rng.group(2)) - int(rng.group(1)))
        elif kind == "all_reduce":
            t = re.search(r": tensor<(\d+)x(\w+)>", rest)
            parts = even(int(t.group(1)))
            eb = {"f32": 4, "i64": 8}[t.group(2)]
        elif rng:
            parts = layout(padded[group], int(rng.group(1)),
                           int(rng.group(2)))
        else:
            parts = even(padded[group])
        intra, inter = split(parts, passes)
        k = kinds.setdefault(kind, [0, 0])
        k[0] += intra * eb
        k[1] += inter * eb
    return kinds


def main():
    zero_opt, model_gen = sys.argv[1], sys.argv[2]
    checked = 0
    for name, model in models(model_gen):
        for stage in range(4):
            opts = "stage=%d world-size=%d reduce-bucket-size=20000" % (
                stage, RANKS)
            reports = []
            for topology in (" ranks-per-node=%d" % PER_NODE, ""):
                sched = run([zero_opt, "--zero-pipeline=" + opts + topology],
                            stdin=model)
                reports.append((sched, json.loads(run(
                    [zero_opt, "--zero-report=out=-", "-o", "/dev/null"],
                    stdin=sched))))
            (sched, rep), (_, one) = reports
            where = "%s stage %d" % (name, stage)
            comm = rep["comm"]
            kinds = expected(sched)
            got = {k: [v["intra_node"], v["inter_node"]]
                   for k, v in comm["bytes_by_kind"].items()}
            assert got == kinds, (where, got, kinds)
            intra = sum(v[0] for v in kinds.values())
            inter = sum(v[1] for v in kinds.values())
            assert comm["intra_node_bytes_per_rank"] == intra, where
            assert comm["inter_node_bytes_per_rank"] == inter, where
            assert inter > 0 and intra > 0, where
            assert comm["bytes_per_rank"] == intra + inter, where
            assert one["comm"]["bytes_per_rank"] == intra + inter, where
            # On one node the same keys: every byte within the node.
            assert one["comm"]["intra_node_bytes_per_rank"] == intra + inter, \
                where
            assert one["comm"]["inter_node_bytes_per_rank"] == 0, where
            assert all(v["inter_node"] == 0
                       for v in one["comm"]["bytes_by_kind"].values()), where
            assert rep["ranks_per_node"] == PER_NODE, where
            assert one["ranks_per_node"] == RANKS, where
            checked += 1
    print("checked %d configurations" % checked)


if __name__ == "__main__":
    main()
