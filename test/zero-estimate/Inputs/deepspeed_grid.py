#!/usr/bin/env python3
"""deepspeed_grid.py ZERO_ESTIMATE

Checks `zero-estimate --format json` against DeepSpeed's two estimators,
estimate_zero2_model_states_mem_needs and estimate_zero3_model_states_mem_needs,
written out below in Python with the estimators' own arithmetic (exact ints,
true division, int() truncation, max of an int and a float, 1/nodes as a
float), over a grid of sizes, stages 2 and 3, every offload option, zero_init
on and off, 1 and 8 GPUs per node and 1, 3 and 4 nodes, with integer and float
buffer factors. Every byte count must be the same integer, and every row of
the *_all_cold table the same text. Prints what it compared and how many of
the figures Python's float arithmetic puts away from the exact rational
result, so that the grid is known to reach the branches where rounding
matters. Also checks that the text gives the factor as Python's repr does,
and our own columns: the device total and pinned host arena per rank without
offload and with the optimizer offloaded (none with parameter offload),
derived here from S, L and the ranks at the tool's defaults (bf16, alignment
2, one bucket of 5e8 elements, no prefetch).
"""
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from math import floor


def zero2(params, gpus_per_node, nodes, offload, factor):
    """(cpu bytes, gpu bytes) of estimate_zero2_model_states_mem_needs."""
    gpus = gpus_per_node * nodes
    if not offload:
        gpu = 2 * params + int(18 * params / gpus)
        cpu = params * 4 * gpus_per_node * factor
    else:
        gpu = 2 * params
        # DeepSpeed's code takes all GPUs here, not the node's.
        cpu = params * max(4 * gpus, 16) * factor
    return int(cpu), int(gpu)


def zero3(params, largest, gpus_per_node, nodes, offload, offload_params,
          zero_init, factor):
    """(cpu bytes, gpu bytes, largest layer bytes) of
    estimate_zero3_model_states_mem_needs."""
    gpus = gpus_per_node * nodes
    per_node = 1 / nodes
    layer = 4 * largest
    if not offload:
        # offload_params without offload takes this branch too.
        gpu = layer + int(18 * params / gpus)
        built = largest if zero_init else params
        cpu = built * 4 * gpus_per_node * factor
        return int(cpu), int(gpu), layer
    host = 18 if offload_params else 16
    gpu = layer if offload_params else layer + int(2 * params / gpus)
    if zero_init:
        cpu = params * host * per_node * factor
    else:
        cpu = params * max(4 * gpus_per_node, host * per_node) * factor
    return int(cpu), int(gpu), layer


def exact(stage, params, largest, gpus_per_node, nodes, offload,
          offload_params, zero_init, factor):
    """The same figures in exact rational arithmetic, floored."""
    f = Fraction(factor)
    gpus = gpus_per_node * nodes
    if stage == 2:
        if offload:
            return (floor(params * max(4 * gpus, 16) * f), 2 * params)
        return (floor(params * 4 * gpus_per_node * f),
                2 * params + floor(Fraction(18 * params, gpus)))
    layer = 4 * largest
    if not offload:
        built = largest if zero_init else params
        return (floor(built * 4 * gpus_per_node * f),
                layer + floor(Fraction(18 * params, gpus)))
    host = 18 if offload_params else 16
    gpu = layer if offload_params else layer + floor(Fraction(2 * params, gpus))
    mult = Fraction(host, nodes)
    if not zero_init:
        mult = max(Fraction(4 * gpus_per_node), mult)
    return floor(params * mult * f), gpu


def round_up(x, m):
    return (x + m - 1) // m * m


def ours(stage, params, largest, gpus, offload):
    """(device bytes, host bytes) of our plan of one flat bf16 partition:
    params and grads (whole or the S'/n shard), the fp32 master, m and v
    (12 bytes per owned element) on the device, or with the optimizer
    offloaded in the pinned host arena beside the 16-bit gradient and
    parameter copies, each buffer at a 64-byte boundary and the arena
    rounded up to 64; plus one reduce bucket and, at stage 3, the gathered
    largest layer."""
    padded = round_up(params, 2 * gpus)
    shard = padded // gpus
    params_bytes = 2 * (shard if stage == 3 else params)
    buffers = 2 * min(500000000, padded)
    if stage == 3:
        buffers += 2 * round_up(largest, 2 * gpus)
    device = params_bytes + 2 * shard + buffers
    if not offload:
        return device + 12 * shard, 0
    host = 0
    for size in (4 * shard, 4 * shard, 4 * shard, 2 * shard, 2 * shard):
        host = round_up(host, 64) + size
    return device, round_up(host, 64)


def device(on):
    return "cpu " if on else "none"


def options_text(stage, offload, offload_params, zero_init):
    if stage == 2:
        return "offload_optimizer=" + device(offload)
    return "offload_param=%s, offload_optimizer=%s, zero_init=%d" % (
        device(offload_params), device(offload), 1 if zero_init else 0)


def reference_rows(stage, params, largest, gpus_per_node, nodes, factor):
    """The rows of DeepSpeed's *_all_cold table, in its order."""
    rows = []
    for offload in (True, False):
        for offload_params in ((True, False) if stage == 3 else (False,)):
            if offload_params and not offload:
                continue
            for zero_init in ((True, False) if stage == 3 else (True,)):
                if stage == 2:
                    cpu, gpu = zero2(params, gpus_per_node, nodes, offload,
                                     factor)
                else:
                    cpu, gpu, _ = zero3(params, largest, gpus_per_node,
                                        nodes, offload, offload_params,
                                        zero_init, factor)
                line = " %7.2fGB | %6.2fGB | %s" % (
                    cpu / 2**30, gpu / 2**30,
                    options_text(stage, offload, offload_params, zero_init))
                rows.append((offload, offload_params, zero_init, cpu, gpu,
                             line))
    return rows


def reference_header(stage, params, largest, gpus_per_node, nodes):
    sw = "SW: Model with %dM total params" % int(params / 1e6)
    if stage == 3:
        sw += ", %dM largest layer params" % int(largest / 1e6)
    return ["Estimated memory needed for params, optim states and gradients "
            "for a:",
            "HW: Setup with %d %s, %d %s per node." %
            (nodes, "nodes" if nodes > 1 else "node", gpus_per_node,
             "GPUs" if gpus_per_node > 1 else "GPU"),
            sw + ".", "  per CPU  |  per GPU |   Options"]


# Sizes: tiny and odd counts, the seeds' t5-3b (cold and live), and counts
# past 2^53 / 18, where 18 * S / n as a double is no longer the exact quotient.
SIZES = [(1, 1), (7, 3), (1000003, 1001), (2851000000, 32000000),
         (2851598336, 32899072), (123456789013, 987654321),
         (2**53 // 18 + 1, 2**40 + 1), (10**15 + 7, 10**12 + 3),
         (2**53 + 1, 2**45 + 7), (3 * 10**16 + 1, 10**14 + 9)]
# Python literals: ints stay exact, floats round (1.1 and 0.3 are not
# dyadic).
FACTORS = ["1.5", "1.1", "2", "0.3", "2.0"]
GPUS = [1, 8]
NODES = [1, 3, 4]


def flag_sets(stage):
    if stage == 2:
        return [(False, False, True), (True, False, True)]
    return [(o, p, z) for o in (False, True) for p in (False, True)
            for z in (True, False) if o or not p]


def main():
    tool = sys.argv[1]
    jobs = []
    k = 0
    for params, largest in SIZES:
        for stage in (2, 3):
            for gpn in GPUS:
                for nodes in NODES:
                    for offload, offload_params, zero_init in flag_sets(stage):
                        factor = FACTORS[k % len(FACTORS)]
                        k += 1
                        jobs.append((params, largest, stage, gpn, nodes,
                                     offload, offload_params, zero_init,
                                     factor))

    def run(job):
        (params, largest, stage, gpn, nodes, offload, offload_params,
         zero_init, factor) = job
        cmd = [tool, "--format", "json", "--params", str(params),
               "--stage", str(stage), "--gpus-per-node", str(gpn),
               "--nodes", str(nodes), "--additional-buffer-factor", factor]
        if stage == 3:
            cmd += ["--largest-layer-params", str(largest),
                    "--zero-init" if zero_init else "--no-zero-init"]
        if offload:
            cmd.append("--cpu-offload")
        if offload_params:
            cmd.append("--cpu-offload-params")
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("failed: %s\n%s" % (" ".join(cmd), r.stderr))
        return json.loads(r.stdout)

    with ThreadPoolExecutor(max_workers=2) as pool:
        outputs = list(pool.map(run, jobs))

    rows = ours_rows = 0
    rounded_cpu = rounded_gpu = 0
    for job, out in zip(jobs, outputs):
        (params, largest, stage, gpn, nodes, offload, offload_params,
         zero_init, factor) = job
        f = int(factor) if factor.isdigit() else float(factor)
        where = " ".join(map(str, job))
        if stage == 2:
            cpu, gpu = zero2(params, gpn, nodes, offload, f)
            layer = None
        else:
            cpu, gpu, layer = zero3(params, largest, gpn, nodes, offload,
                                    offload_params, zero_init, f)
        ds = out["deepspeed"]
        got = (ds["cpu_bytes"], ds["bytes"], ds["largest_layer_memory"])
        assert got == (cpu, gpu, layer), (where, got, (cpu, gpu, layer))
        inputs = out["inputs"]
        assert (inputs["cpu_offload"], inputs["cpu_offload_params"],
                inputs["zero_init"]) == (offload, offload_params,
                                         zero_init), where
        assert inputs["additional_buffer_factor"] == f, where

        off = out["ours_offload_optimizer"]
        got = (off["device_total"]["bytes"], off["host_total"]["bytes"])
        want = ours(stage, params, largest, gpn * nodes, True)
        assert got == want, (where, got, want)

        table = out["deepspeed_table"]
        assert table["header"] == reference_header(stage, params, largest,
                                                   gpn, nodes), where
        expected = reference_rows(stage, params, largest, gpn, nodes, f)
        got_rows = [r for r in table["rows"] if r["estimator"] == "current"]
        assert len(got_rows) == len(expected), where
        for r, (o, p, z, c, g, line) in zip(got_rows, expected):
            assert r["offload_optimizer"] == ("cpu" if o else "none"), where
            if stage == 3:
                assert (r["offload_param"], r["zero_init"]) == (
                    "cpu" if p else "none", z), where
            assert (r["cpu_bytes"], r["gpu_bytes"]) == (c, g), (where, r, c, g)
            assert r["line"] == line, (where, r["line"], line)
            # Ours: none with parameter offload.
            if p:
                assert r["ours_gpu_bytes"] is None, where
                assert r["ours_host_bytes"] is None, where
            else:
                want = ours(stage, params, largest, gpn * nodes, o)
                got = (r["ours_gpu_bytes"], r["ours_host_bytes"])
                assert got == want, (where, got, want)
                ours_rows += 1
            rows += 1
            ec, eg = exact(stage, params, largest, gpn, nodes, o, p, z, f)
            rounded_cpu += ec != c
            rounded_gpu += eg != g
        if stage == 2:
            older = [r for r in table["rows"]
                     if r["estimator"] == "before PR #5099"]
            assert len(older) == 1, where
            assert older[0]["gpu_bytes"] == 4 * params + int(
                16 * params / (gpn * nodes)), where

    # The text gives the factor as Python's repr would.
    for literal in ["1.5", "2", "2.0", "0.3", "1e-05", "7e-7", "1e16",
                    "100.0", "3.0000000000000004", "1e14", ".5"]:
        f = int(literal) if literal.isdigit() else float(literal)
        r = subprocess.run([tool, "--params", "1", "--stage", "2",
                            "--additional-buffer-factor", literal],
                           capture_output=True, text=True, check=True)
        want = "additional_buffer_factor=%r" % f
        assert want in r.stdout, (literal, want)

    print("grid: %d runs, %d table rows: DeepSpeed's bytes and lines equal"
          % (len(jobs), rows))
    print("ours: %d rows with our device and host bytes equal" % ours_rows)
    print("float rounding: %d CPU and %d GPU figures differ from exact "
          "arithmetic" % (rounded_cpu, rounded_gpu))


if __name__ == "__main__":
    main()
