#!/usr/bin/env python3
"""Regenerates the measured tables of docs/benchmarks.md from the JSON files
that bench/run.sh writes under bench/results/.

Each generated part sits between `<!-- bench:NAME -->` and
`<!-- /bench:NAME -->`; only those parts are rewritten, the prose around
them is kept. A part whose results file is missing is left as it is.

  bench/update_docs.py [--results DIR] [--doc FILE] [--only NAME,...]
"""

import argparse
import json
import math
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

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


# --- sections ---------------------------------------------------------------


def sec_machine(r):
    # Without this run's machine.json (e.g. ONLY=offload), the line of the
    # run that measured the other sections stays.
    m = load(r, "machine.json")
    return machine_line(m) if m else None


def sec_compile_time(r):
    doc = load(r, "compile_time.json")
    if not doc:
        return None
    rows = {e["model"]: e for e in doc["results"]}
    labels = {
        "gpt2-124M": "GPT-2 124M", "gpt2-1.5B": "GPT-2 1.5B",
        "gpt3-175B-shaped": "175B-shaped", "depth-12": "depth 12",
        "depth-96": "depth 96", "depth-960": "depth 960"}
    out = ["Best of three runs on the machine above (%d cores, `%s`), "
           "pipeline `%s`." % (doc["machine"]["nproc"], doc["machine"]["cpu"],
                               doc["pipeline"]), "",
        "| model | zero-model-gen arguments | layers | ops in the step | "
        "seconds |", "|---|---|---:|---:|---:|"]
    for e in doc["results"]:
        args = "`%s`" % re.sub(r" --batch \d+$", "", e["args"])
        if e["model"] in ("depth-96", "depth-960"):
            args = "same width"
        out.append("| %s | %s | %d | %d | %.3f |" % (
            labels.get(e["model"], e["model"]), args, e["layers"],
            e["step_ops"], e["seconds"]))
    big = rows.get("gpt3-175B-shaped")
    d96, d960 = rows.get("depth-96"), rows.get("depth-960")
    out.append("")
    if big:
        out.append("The 175B-shaped step compiles in %.3f s (goal: 2 s)." %
                   big["seconds"])
    if d96 and d960:
        ops = d960["step_ops"] / d96["step_ops"]
        t = d960["seconds"] / d96["seconds"]
        exponent = math.log(t) / math.log(ops)
        out.append(
            "Scaling with depth: 96 → 960 layers is %.1fx the ops and %.1fx "
            "the time, time ~ ops^%.2f (%s; the process's fixed start-up "
            "cost is part of every point)." % (
                ops, t, exponent,
                "linear" if exponent < 1.15 else "**superlinear**"))
    goals = doc.get("goals")
    if goals:
        what = {
            "params-10k": "`zero-opt --zero-pipeline=\"stage=3 world-size=8\"`"
                          ", 10,000 parameter tensors",
            "ops-20k": "`zero-compile --stage 3 --world-size 8` to an "
                       "executable (pipeline, plan, verifier, lowering, LLVM "
                       "code generation, link)",
            "bucket-1": "`zero-verify-schedule` after `zero-plan-memory`, "
                        "one gradient element per bucket"}
        out += ["", "Cases with a goal (best of three runs, wall seconds; "
                "for the verifier, its own time from `--mlir-timing`):",
                "", "| case | step | ops in the step | seconds | goal | met |",
                "|---|---|---:|---:|---:|---|"]
        for g in goals:
            goal = g.get("goal_seconds")
            out.append("| %s | `%s` | %d | %.3f | %s | %s |" % (
                what.get(g["case"], g["case"]), g["args"], g["step_ops"],
                g["seconds"], "%g s" % goal if goal else "O(n log n)",
                ok(goal, g["seconds"]) if goal else "-"))
    return "\n".join(out)


def sec_kernels(r):
    doc = load(r, "kernels.json")
    if not doc:
        return None
    k = {e["name"]: e for e in doc["kernels"]}
    desc = {
        "triad": ("STREAM triad `a = b + s*c` (reference)", "12 B/element"),
        "copy": ("`zrt_copy` (parallel memcpy)", "8 B/element"),
        "adam_bf16": ("`zrt_adam` bf16 gradients and copies", "28 B/param"),
        "adam_f32": ("`zrt_adam` f32, copy = master", "28 B/param"),
        "overflow_bf16": ("`zrt_check_overflow` bf16", "2 B/param"),
        "overflow_f16": ("`zrt_check_overflow` f16", "2 B/param"),
        "overflow_f32": ("`zrt_check_overflow` f32", "4 B/param"),
        "swiglu_bf16": ("`zrt_swiglu` bf16", "6 B/element"),
        "swiglu_grad_bf16": ("`zrt_swiglu_grad` bf16", "10 B/element"),
        "rope_bf16": ("`zrt_rope` bf16, head_dim 128", "4 B/element"),
        "rope_f32": ("`zrt_rope` f32, head_dim 128", "8 B/element"),
        "read_f32": ("fp32 sum of squares, `omp simd` (read reference)",
                     "4 B/element"),
        "rms_norm_bf16": ("`zrt_rms_norm` bf16, 4096 columns",
                          "4 B/element"),
        "rms_norm_f32": ("`zrt_rms_norm` f32, 4096 columns", "8 B/element"),
        "rms_norm_grad_bf16": ("`zrt_rms_norm_grad` bf16, 4096 columns",
                               "6 B/element"),
    }
    goals = {"adam_bf16", "overflow_bf16"}
    one = load(r, "kernels_1t.json")
    k1 = {e["name"]: e for e in one["kernels"]} if one else {}
    out = ["%d OpenMP threads (all cores), %d M elements per array, %d "
           "interleaved rounds%s; ratio = the kernel's bytes/s over the "
           "triad's bytes/s of the same round, median [quartiles] over rounds."
           " The last column is the same benchmark run with one thread (triad "
           "on one thread too)." % (
               doc["threads"], doc["params"] >> 20, doc["rounds"],
               ", medians of %d processes" % doc["runs"] if "runs" in doc
               else ""), "",
           "| kernel | bytes counted | GB/s (median) | / triad | goal >= %.1f "
           "| 1 thread: / triad |" % GOAL_BANDWIDTH,
           "|---|---|---:|---:|---|---:|"]
    for name in ["triad", "copy", "adam_bf16", "adam_f32", "overflow_bf16",
                 "overflow_f16", "overflow_f32", "swiglu_bf16",
                 "swiglu_grad_bf16", "rope_bf16", "rope_f32", "rms_norm_bf16",
                 "rms_norm_f32", "rms_norm_grad_bf16", "read_f32"]:
        if name not in k:
            continue
        e = k[name]
        what, bytes_ = desc[name]
        goal = ok(e["ratio_to_triad_median"], GOAL_BANDWIDTH) \
            if name in goals else ""
        out.append("| %s | %s | %.1f | %.3f [%.3f, %.3f] | %s | %s |" % (
            what, bytes_, e["gbps_median"], e["ratio_to_triad_median"],
            e["ratio_q1"], e["ratio_q3"], goal,
            "%.3f" % k1[name]["ratio_to_triad_median"] if name in k1
            else ""))
    before = load(r, "kernels_before.json")
    if before:
        b = {e["name"]: e for e in before["kernels"]}
        rows = [n for n in ["adam_bf16", "adam_f32", "overflow_bf16",
                            "overflow_f16", "overflow_f32"]
                if n in b and n in k]
        if rows:
            out += ["", "Before/after the optimization of "
                    "`runtime/src/Optimizer/Optimizer.cpp`: the same benchmark linked "
                    "with the previous runtime (`BASELINE_BUILD`), its "
                    "processes alternated with the ones above (medians of "
                    "%d processes each):" % before.get("runs", 1), "",
                    "| kernel | before: / triad | after: / triad |",
                    "|---|---:|---:|"]
            for n in rows:
                out.append("| %s | %.3f | %.3f |" % (
                    desc[n][0], b[n]["ratio_to_triad_median"],
                    k[n]["ratio_to_triad_median"]))
    return "\n".join(out)


def comm_table(doc):
    out = ["%d ranks, full array of %d M elements (%s), %d interleaved "
           "rounds; a sample is the slowest rank's time. Ratio = baseline "
           "time / runtime time (= runtime bandwidth / baseline bandwidth)."
           % (doc["ranks"], doc["count"] >> 20,
              "32 MiB f32, 16 MiB bf16" if doc["count"] == 8 << 20 else
              "%d MiB f32" % (doc["count"] * 4 >> 20), doc["rounds"]), "",
           "| collective | dtype | runtime ms | runtime busbw GB/s | "
           "baseline | baseline ms | ratio | goal >= %.2f |" % GOAL_COMM,
           "|---|---|---:|---:|---|---:|---:|---|"]
    names = {
        "mpi_blocking": "blocking MPI",
        "mpi_nonblocking": "MPI_I* + MPI_Wait",
        "mpi_nonblocking_yield": "**MPI_I* + the runtime's wait**",
        "mpi_blocking_plain_op": "blocking MPI, plain bf16 op",
        "mpi_nonblocking_plain_op": "MPI_I* + MPI_Wait, plain bf16 op",
        "mpi_nonblocking_yield_plain_op":
            "**MPI_I* + the runtime's wait, plain bf16 op**",
        "mpi_nonblocking_yield_u16_sum":
            "MPI_I* + the runtime's wait, uint16 MPI_SUM (floor)",
    }
    # The goal applies to the bare MPI calls the runtime makes, waited the
    # way it waits (with a plain bf16 op for bf16 reductions).
    goal_rows = {"mpi_nonblocking_yield", "mpi_nonblocking_yield_plain_op"}
    for c in doc["cases"]:
        first = True
        for b in c["baselines"]:
            goal = ok(b["ratio"], GOAL_COMM) if b["name"] in goal_rows else ""
            out.append("| %s | %s | %s | %s | %s | %.2f | %.3f | %s |" % (
                ("`zrt_%s`" % c["op"]) if first else "",
                c["dtype"] if first else "",
                ("%.2f" % c["zrt_ms"]) if first else "",
                ("%.2f" % c["zrt_busbw_gbps"]) if first else "",
                names.get(b["name"], b["name"]), b["ms"], b["ratio"], goal))
            first = False
    return "\n".join(out)


def sec_comm(r):
    parts = []
    goal = []
    for n in (2, 4):
        doc = load(r, "comm_np%d.json" % n)
        if doc:
            parts.append(comm_table(doc))
            goal += [b["ratio"] for c in doc["cases"] for b in c["baselines"]
                     if b["name"] in ("mpi_nonblocking_yield",
                                      "mpi_nonblocking_yield_plain_op")]
    if not parts:
        return None
    if goal:
        geo = math.exp(sum(math.log(x) for x in goal) / len(goal))
        parts.append(
            "Over the %d comparisons with the same MPI calls (bold): median "
            "%.3f, geometric mean %.3f, range %.3f-%.3f; %d of %d at or "
            "above %.2f." % (len(goal), statistics.median(goal), geo,
                              min(goal), max(goal),
                              sum(x >= GOAL_COMM for x in goal), len(goal),
                              GOAL_COMM))
    return "\n\n".join(parts)


def pct(x):
    return "n/a" if x is None else "%.0f%%" % (100 * x)


def sec_e2e(r):
    doc = load(r, "e2e.json")
    if not doc:
        return None
    res = {(e["model"], e["stage"], e["world"]): e for e in doc["results"]}
    refs = {(e["model"], e["for_world"]): e for e in doc.get("references", [])}
    out = ["`--steps %d --threads %d`, median `step_ms` of steps %d-%d, "
           "median over %d rounds; every round runs every configuration once, "
           "stage 0, stage 3 and the communication-free reference of a world "
           "size back to back. Ratios are medians of the per-round ratios." % (
               doc["steps"], doc.get("threads_per_rank", 0),
               doc["warmup"] + 1, doc["steps"], doc["rounds"]), "",
           "| model | ranks | stage 0 ms | stage 3 ms | **stage 3 / stage 0** "
           "| reference ms | exposed comm, stage 0 | exposed comm, stage 3 "
           "| trace waits, stage 0 | trace waits, stage 3 |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for ratio in doc["stage_ratios"]:
        m, w = ratio["model"], ratio["world"]
        s0, s3 = res.get((m, 0, w)), res.get((m, 3, w))
        if not s0 or not s3 or w == 1:
            continue
        ref = refs.get((m, w))
        out.append("| %s | %d | %.2f | %.2f | **%.2f** | %s | %s | %s | %s | %s |"
                   % (m, w, s0["measured_step_ms"], s3["measured_step_ms"],
                      ratio["stage3_over_stage0"],
                      "%.2f" % ref["measured_step_ms"] if ref else "n/a",
                      pct(s0.get("exposed_estimate_share")),
                      pct(s3.get("exposed_estimate_share")),
                      pct(s0.get("wait_share")), pct(s3.get("wait_share"))))
    return "\n".join(out)


def sec_calibration(r):
    parts = []
    for n in (1, 2, 4):
        doc = load(r, "calibration_np%d.json" % n)
        if doc:
            link = n > 1
            att = doc.get("attention_flops")
            activ = doc.get("activation_elements")
            parts.append(
                "| %d | %.1f | %s | %s | %.2f | %.3f | %s | %s | %s | %s |" % (
                    n, doc["gemm_flops"] / 1e9,
                    "%.1f" % (att / 1e9) if att else "",
                    "%.0f" % (activ / 1e6) if activ else "",
                    doc["memory_bandwidth"] / 1e9,
                    doc["kernel_overhead_s"] * 1e6,
                    "%.3f" % (doc["link_bandwidth"] / 1e9) if link else "",
                    "%.3f / %.3f" % (doc["reduce_scatter_bandwidth"] / 1e9,
                                     doc["all_gather_bandwidth"] / 1e9)
                    if link and "reduce_scatter_bandwidth" in doc else "",
                    "%.2f" % (doc["collective_latency_s"] * 1e6)
                    if link else "",
                    ("%.0f" % (doc["sync_latency_s"] * 1e6) +
                     (" (after %.2f ms)" % (doc["sync_compute_s"] * 1e3)
                      if doc.get("sync_compute_s") else ""))
                    if link else ""))
    if not parts:
        return None
    return "\n".join([
        "| ranks | GEMM GFLOP/s | attention GFLOP/s "
        "| GELU / layer-norm backward M elements/s | streaming GB/s "
        "| kernel overhead us "
        "| all-reduce busbw GB/s | reduce-scatter / all-gather busbw GB/s "
        "| latency us / ring step, back to back "
        "| latency us / ring step, after compute |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"] + parts)


def sec_cost_model(r):
    doc = load(r, "e2e.json")
    if not doc:
        return None
    lo, hi = GOAL_MODEL
    out = ["| model | stage | ranks | predicted ms | measured ms | "
           "**predicted / measured** | within %.2f-%.2f | predicted exposed ms "
           "| measured exposed ms (estimate) |" % (lo, hi),
           "|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    inside = 0
    for e in doc["results"]:
        q = e["predicted_over_measured"]
        inside += lo <= q <= hi
        est = e.get("exposed_estimate_ms")
        out.append("| %s | %d | %d | %.2f | %.2f | **%.2f** | %s | %.2f | %s |"
                   % (e["model"], e["stage"], e["world"],
                      e["predicted_step_ms"], e["measured_step_ms"], q,
                      ok(q, lo, hi), e["predicted_exposed_comm_ms"],
                      "%.2f" % est if est is not None else "n/a"))
    qs = [e["predicted_over_measured"] for e in doc["results"]]
    out += ["", "%d of %d configurations within the goal; predicted / "
            "measured ranges from %.2f to %.2f (median %.2f)." % (
                inside, len(qs), min(qs), max(qs), statistics.median(qs))]
    return "\n".join(out)


def sec_tune(r):
    doc = load(r, "tune.json")
    if not doc:
        return None
    m = doc.get("machine", {})
    loads = ["/".join(l) for l in [doc["loadavg"]] + doc["loadavg_rounds"]]
    out = ["Machine: %s cores, `%s` (lscpu model name)." % (
               m.get("nproc", "?"), m.get("cpu", "unknown")), "",
           "`zero-tune --hardware cpu --memory-budget %s` (and for gpt2-tiny "
           "`--remat selective`, `--remat layer`), %d configurations per "
           "model and world size: the tuner's top 3 and others spread over "
           "the order of predicted steps; each compiled from its ds_config "
           "and trained with `--threads %d`, %d rounds in shuffled order, "
           "each run at least %d measured steps (the same number for every "
           "configuration of a set, more where its predictions are short: "
           "column steps below). Measured: the minimum `step_ms` over the "
           "steps after %d warm-up steps of every round; the median (over rounds of each "
           "round's median) beside it. Run of %s UTC, %.0f minutes; load "
           "average (1/5/15 min) at the start and after each round: %s." % (
               doc["budget"], doc["configs"], doc["threads_per_rank"],
               doc["rounds"], doc["steps"], doc["warmup"],
               doc["date"], doc["minutes"], "; ".join(loads)), "",
           "| model | ranks | source (tuner's rank) | configuration | peak "
           "bytes | predicted ms | measured ms (min) | median ms | per-round "
           "minima ms |",
           "|---|---:|---|---|---:|---:|---:|---:|---|"]
    for res in doc["results"]:
        fastest = min(x["measured_step_ms"] for x in res["rows"])
        for x in res["rows"]:
            best = x["measured_step_ms"] == fastest
            out.append("| %s | %d | %s | %s | %d | %.2f | %s | %.2f | %s |" % (
                res["model"], res["world"], x["source"], x["config"],
                x["peak_bytes"], x["predicted_step_ms"],
                ("**%.2f**" if best else "%.2f") % x["measured_step_ms"],
                x["median_step_ms"],
                " ".join("%.1f" % v for v in x["round_min_ms"])))
    out += ["", "| model | ranks | configurations (of) | steps | predicted max/min | "
            "median neighbour gap | median round scatter | Spearman (min) | "
            "goal >= 0.8 | Spearman (median) | measured fastest | among the "
            "tuner's top 3 |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---|"]
    for res in doc["results"]:
        rank = res["measured_best_rank"]
        out.append("| %s | %d | %d (%d) | %d | %.2f | %.3f | %.2f | %.2f | %s | "
                   "%.2f | %s | %s |" % (
                       res["model"], res["world"], len(res["rows"]),
                       res["candidates"], res["steps"],
                       res["predicted_spread"],
                       res["neighbour_gap"], res["round_scatter"],
                       res["spearman"], ok(res["spearman"], 0.8),
                       res["spearman_median"], res["measured_best_source"],
                       "yes" if rank and rank <= 3 else "**no**"))
    out += ["", "The tuner's own run time (wall clock, this machine) on "
            "Llama-3-70B-shaped steps (`zero-model-gen llama --preset "
            "llama-3-70b --seq S --batch B --dtype bf16`), the budget the "
            "preset's 80 GB:", "",
            "| ranks | sequence | global batch | hardware | configurations "
            "searched | seconds | result |",
            "|---:|---:|---:|---|---:|---:|---|"]
    for l in doc["llama"]:
        if l["best"]:
            b = l["best"]
            what = ("stage %d, accumulation %d, remat %s, peak %.1f GiB, "
                    "predicted step %.0f ms" % (
                        b["stage"], b["gradient_accumulation_steps"],
                        b.get("remat", "none"), b["peak_bytes"] / 2**30,
                        b["predicted_step_ms"]))
        else:
            m = re.search(r"smallest peak found, (.*), is (\d+) bytes.*"
                          r"largest item is (\w+): (\d+) bytes",
                          l["message"])
            what = ("nothing fits; the smallest peak (%s) is %.1f GiB, "
                    "%s %.1f GiB of it" % (m.group(1),
                                           int(m.group(2)) / 2**30,
                                           m.group(3),
                                           int(m.group(4)) / 2**30)
                    if m else l["message"])
        out.append("| %d | %d | %d | %s | %s | %.2f | %s |" % (
            l["world"], l["seq"], l["batch"], l["hardware"],
            l.get("evaluated", "?"), l["seconds"], what))
    return "\n".join(out)


GPU_DTYPES = ("bf16", "fp32")


def sec_gpu(r):
    """The GPU run of bench/gpu/run.sh: the CUDA optimizer kernels against a
    device copy, and a GPT-2 step in PyTorch eager and from zero-mlir."""
    kern = load(r, "gpu_kernels.json")
    runs = [(dt, load(r, "gpu_gpt2_torch_%s.json" % dt),
             load(r, "gpu_gpt2_zero_%s.json" % dt)) for dt in GPU_DTYPES]
    machine = load(r, "gpu_machine.json")
    parts = [d for d in [kern] + [x for _, t, z in runs for x in (t, z)] if d]
    if not parts:
        return None
    if all("skipped" in d for d in parts):
        return "GPU: unmeasured (%s)." % "; ".join(d["skipped"] for d in parts)
    out = []
    if kern and "skipped" not in kern:
        m, c = kern["machine"], kern["copy"]
        out += ["%s (%d SMs, compute capability %s, %.0f GiB, %.0f GB/s "
                "theoretical from the memory clock and bus width)%s. "
                "Reference: `cudaMemcpyAsync` device to device of %d MiB, "
                "%.0f GB/s counting read + write (%.0f%% of theoretical). "
                "Medians of %d runs of back-to-back launches (about 2 ms "
                "each) after %d warm-up launches and at least 50 ms of "
                "warm-up work, CUDA events; ratio = the kernel's GB/s over "
                "the copy's." % (
                    m["device"], m["sms"], m["compute_capability"],
                    m["memory_bytes"] / 2.0**30, m["theoretical_gbps"],
                    ", measured %s" % machine["date"] if machine else "",
                    c["bytes"] >> 20, c["gbps"],
                    100 * c["fraction_of_theoretical"], kern["reps"],
                    kern["warmup"]), "",
                "| kernel | params | bytes/param | ms | G params/s | GB/s | "
                "/ copy |", "|---|---:|---:|---:|---:|---:|---:|"]
        for e in kern["kernels"]:
            if "skipped" in e:
                out.append("| `%s` | 2^%d | %d | not run (%s) | | | |" % (
                    e["name"], e["log2_params"], e["bytes_per_param"],
                    e["skipped"]))
                continue
            out.append("| `%s` | 2^%d | %d | %.3f | %.1f | %.0f | %.3f |" % (
                e["name"], e["log2_params"], e["bytes_per_param"],
                e["ms_median"], e["params_per_s"] / 1e9, e["gbps"],
                e["ratio_to_copy"]))
    elif kern:
        out.append("Kernels: not measured (%s)." % kern["skipped"])
    rows, ratios = [], []
    for dt, torch, zero in runs:
        for label, d in (("PyTorch eager (`bench/gpu/gpt2_torch.py`)", torch),
                         ("zero-mlir `--target cuda`", zero)):
            if not d:
                continue
            if "skipped" in d:
                rows.append("| %s | %s | not measured: %s | | | | |" % (
                    label, dt, d["skipped"]))
                continue
            rows.append("| %s | %s | %d x %d | %.2f | %.0f | %.3f -> %.3f |"
                        % (label, d["dtype"], d["batch"], d["seq"],
                           d["step_ms_median"], d["tokens_per_s"],
                           d["loss_first"], d["loss_last"]))
        if torch and zero and "skipped" not in torch and "skipped" not in zero:
            ratios.append("%s %.3f" % (dt, zero["step_ms_median"] /
                                       torch["step_ms_median"]))
    if rows:
        if out:
            out.append("")
        out += ["GPT-2 124M (12 layers, 768 wide, 12 heads, vocab 50257), "
                "one training step with AdamW on the same tokens (the bytes "
                "of this repository's docs and sources), median of the timed "
                "steps after the warm-up:", "",
                "| implementation | dtype | batch x seq | step ms | tokens/s "
                "| loss, first -> last timed step |",
                "|---|---|---|---:|---:|---|"] + rows
        if ratios:
            out += ["", "zero-mlir step time / PyTorch step time: %s." %
                    ", ".join(ratios)]
    return "\n".join(out)


def sec_gpu_profile(r):
    """bench/gpu/kernel_table.py's per-step kernel times of both GPT-2
    steps, by kind of kernel, and zero-mlir's largest kernels."""
    doc = load(r, "gpu_profile.json")
    if not doc:
        return None
    out = []
    for dt, e in doc["dtypes"].items():
        z, t = e["zero"], e.get("torch")
        kinds = list(z["kinds"])
        if t:
            kinds += [k for k in t["kinds"] if k not in kinds]
        out += ["%s, GPU time per step (ms; Nsight Compute for zero-mlir, "
                "torch.profiler for PyTorch, each over %d steps):" % (
                    dt, doc["steps_profiled"]), "",
                "| kind of kernel | zero-mlir | PyTorch |",
                "|---|---:|---:|"]
        for k in kinds:
            out.append("| %s | %.2f | %s |" % (
                k, z["kinds"].get(k, 0.0),
                "%.2f" % t["kinds"].get(k, 0.0) if t else "n/a"))
        out.append("| **all kernels** (launches) | **%.2f** (%d) | %s |" % (
            z["total_ms"], z["launches"],
            "**%.2f** (%d)" % (t["total_ms"], t["launches"]) if t else "n/a"))
        out += ["", "zero-mlir's largest kernels, %s:" % dt, "",
                "| kernel | kind | launches per step | ms per step |",
                "|---|---|---:|---:|"]
        for k in z["top"]:
            out.append("| `%s` | %s | %g | %.2f |" % (
                k["kernel"][:90], k["kind"], k["calls"], k["ms"]))
        out.append("")
    return "\n".join(out).rstrip()


def sec_gpu_offload(r):
    """bench/gpu/offload_capacity.py: the largest GPT-2 per offload mode on
    one GPU, its plan, and (from a GPU run) its step time; without a GPU
    run, the plan alone (gpu_offload_plan.json, its plan command's output)."""
    doc = load(r, "gpu_offload.json")
    measured = doc is not None and "modes" in doc
    if not measured:
        doc = load(r, "gpu_offload_plan.json")
        if not doc:
            return None
        doc = dict(doc, modes={m["mode"]: m for m in doc["modes"]})
    f, b, mem, res = doc["family"], doc["budgets"], doc["memory"], \
        doc["reserve"]
    gib = lambda x: x / 2.0**30
    machine = load(r, "gpu_machine.json") if measured else None
    out = ["GPT-2 at hidden %d, %d heads, vocab %d, seq %d, batch %d, %s, "
           "stage %d on one rank, remat %s; layers grown until the plan "
           "(zero-opt's report) no longer fits: device %.2f GiB (%.2f - "
           "%.2f reserve), pinned host %.2f GiB (%.2f - %.2f), swap files "
           "%.2f GiB (%.2f - %.2f). The next layer up exceeds the budget "
           "named in the last column.%s" % (
               f["hidden"], f["heads"], f["vocab"], f["seq"], f["batch"],
               f["dtype"], f["stage"], f["remat"], gib(b["device"]),
               gib(mem["device"]), gib(res["device"]), gib(b["host"]),
               gib(mem["host"]), gib(res["host"]), gib(b["nvme"]),
               gib(mem["nvme"]), gib(res["nvme"]),
               (" Measured on %s, %s; median of %d steps after %d warm-up."
                % (machine["gpu"], machine["date"], doc["steps"],
                   doc["warmup"]) if machine else
                (" Step times: %d steps after %d warm-up." % (
                    doc["steps"], doc["warmup"]) if measured else
                 " Step times unmeasured: no GPU lent (`bench/gpu/run.sh` "
                 "with ONLY=offload on one fills them)."))), "",
           "| offload | layers | params | device GiB | host GiB | swap GiB | "
           "step ms | tokens/s | measured == planned | next size exceeds |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for mode in ("none", "opt_cpu", "opt_nvme", "both_cpu", "both_nvme"):
        e = doc["modes"].get(mode)
        if not e:
            continue
        label = {"none": "none", "opt_cpu": "optimizer cpu",
                 "opt_nvme": "optimizer nvme",
                 "both_cpu": "params + optimizer cpu",
                 "both_nvme": "params + optimizer nvme"}[mode]
        if not e.get("layers"):
            out.append("| %s | none fits | | | | | | | | |" % label)
            continue
        if "step_ms_median" in e:
            step = ("%.1f" % e["step_ms_median"], "%.0f" % e["tokens_per_s"],
                    "yes" if e["all_equal_planned"] else "**no**")
        else:
            why = e.get("skipped") or e.get("failed") or "unmeasured"
            step = ("", "", why[:80].replace("|", "/"))
        nxt = e.get("next", {}).get("exceeds")
        out.append("| %s | %d | %.2fB | %.2f | %.2f | %.2f | %s | %s | %s | "
                   "%s |" % ((label, e["layers"], e["param_count"] / 1e9,
                              gib(e["peak_bytes"]), gib(e["host_peak_bytes"]),
                              gib(e["nvme_bytes"])) + step +
                             (", ".join(nxt) if nxt else "",)))
    return "\n".join(out)


def sec_transfer(r):
    """zrt-bench-transfer: the runtime's device-host copy against memcpy."""
    doc = load(r, "transfer.json")
    if not doc:
        return None
    m = doc.get("machine", {})
    out = ["Machine: %s cores, `%s` (lscpu model name); %s backend. Run of "
           "%s UTC, load average (1/5/15 min) %s at the start, %s at the "
           "end. %d interleaved rounds; ratio = the transfer's bytes/s over "
           "memcpy's of the same round, median [quartiles] over rounds; "
           "at least 256 MiB copied per sample." % (
               m.get("nproc", "?"), m.get("cpu", "unknown"), doc["backend"],
               doc["date"], "/".join(doc["loadavg"]),
               "/".join(doc["loadavg_end"]), doc["rounds"]), "",
           "| size | direction | memcpy GB/s | transfer GB/s | transfer / "
           "memcpy |", "|---:|---|---:|---:|---:|"]
    for e in doc["sizes"]:
        size = ("%d GiB" % (e["mib"] >> 10) if e["mib"] >= 1024
                else "%d MiB" % e["mib"])
        out.append("| %s | %s | %.2f | %.2f | %.3f [%.3f, %.3f] |" % (
            size, e["direction"].replace("_", " "), e["memcpy_gbps_median"],
            e["transfer_gbps_median"], e["ratio_median"], e["ratio_q1"],
            e["ratio_q3"]))
    ratios = [e["ratio_median"] for e in doc["sizes"]]
    out += ["", "Median over all sizes and both directions: %.3f (range "
            "%.3f-%.3f)." % (statistics.median(ratios), min(ratios),
                             max(ratios))]
    return "\n".join(out)


def sec_offload(r):
    """bench/offload.py: the exposed transfer share of gpt2-tiny steps."""
    doc = load(r, "offload.json")
    if not doc:
        return None
    m = doc.get("machine", {})
    out = ["Machine: %s cores, `%s` (lscpu model name). Run of %s UTC, load "
           "average (1/5/15 min) %s at the start, %s at the end. gpt2-tiny "
           "(fp32), `--offload-optimizer cpu` at stages 1-3 and "
           "`--offload-param cpu` or `nvme` (the optimizer on the device) at "
           "stage 3, `--threads %d`, %d steps of "
           "which %d warm-up, %d rounds; the same stage without offload "
           "ran next to each in every round. Measured: per step span of "
           "each rank's trace, the copy spans (`copy to host`/`copy to "
           "device`, `copy params to ...`, the swap-file submissions `read "
           "params from nvme`/`write params to nvme`) and the waits for them, "
           "`wait disk ...` the time blocked on a parameter swap file, "
           "in "
           "it; medians over steps and ranks, then over rounds. Predicted: "
           "`zero-report` (cpu preset) of the same pipeline." % (
               m.get("nproc", "?"), m.get("cpu", "unknown"), doc["date"],
               "/".join(doc["loadavg"]), "/".join(doc["loadavg_end"]),
               doc["threads_per_rank"], doc["steps"], doc["warmup"],
               doc["rounds"]), "",
           "| stage | ranks | offload | host peak bytes | step ms (no offload) | "
           "offload / none | measured transfers ms | share of the step | "
           "predicted copying ms | predicted exposed ms | predicted share | "
           "measured / predicted exposed |",
           "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for e in doc["results"]:
        ratio = e["measured_over_predicted"]
        out.append("| %d | %d | %s | %d | %.1f (%.1f) | %.3f | %.3f | "
                   "%.2f%% | %.3f | %.3f | %.2f%% | %s |" % (
                       e["stage"], e["world"],
                       e.get("offload", "optimizer cpu"),
                       e["host_peak_bytes"],
                       e["measured_step_ms"],
                       e["measured_step_ms_no_offload"],
                       e["offload_over_no_offload"], e["transfer_ms"],
                       100 * e["transfer_share"], e["predicted_copying_ms"],
                       e["predicted_exposed_transfer_ms"],
                       100 * e["predicted_share"],
                       "%.2f" % ratio if ratio is not None else "n/a"))
    return "\n".join(out)


# What a section without results says when the doc holds no measured table
# yet (results are not committed: a table measured once stays until new
# results replace it).
UNMEASURED = {
    "gpu": "GPU: unmeasured. No GPU was lent to the sessions that ran the "
           "benchmarks; `bench/gpu/run.sh` on a machine with an NVIDIA GPU "
           "writes `bench/results/gpu_*.json` and fills this section.",
}

def sec_nvme(r):
    doc = load(r, "nvme.json")
    if not doc:
        return None
    m = doc["machine"]
    s = doc["summary"]
    mode = "O_DIRECT" if doc["direct"] else "buffered (the file system " \
        "refuses O_DIRECT)"
    out = ["Measured on %s: %d cores (`%s`), kernel %s, the directory on "
           "%s, load average %s at the start. A %d MiB file, written then "
           "read sequentially in %d KiB transfers, %d in flight, %s; dd with "
           "the same block size (`oflag=direct conv=fsync`, "
           "`iflag=direct`). Medians over %d rounds, the three in a shuffled "
           "order each round; the ratio is of each round's two figures." % (
               m["date"], m["nproc"], m["cpu"], m["kernel"], m["filesystem"],
               m["loadavg"], doc["bytes"] >> 20, doc["chunk"] >> 10,
               doc["buffers"], mode, len(doc["rounds"])), "",
           "| I/O | write GB/s | read GB/s | write / dd | read / dd |",
           "|---|---:|---:|---:|---:|"]
    for key, label in [("io_uring", "runtime, %s" % s["io_uring"]["engine"]),
                       ("thread pool", "runtime, thread pool (pread/pwrite)"),
                       ("dd", "dd")]:
        e = s[key]
        ratio = lambda k: "%.2f" % e[k] if k in e else "1"
        out.append("| %s | %.2f | %.2f | %s | %s |" % (
            label, e["write_gbs"], e["read_gbs"], ratio("write_ratio"),
            ratio("read_ratio")))
    return "\n".join(out)


def sec_gather_once(r):
    doc = load(r, "gather_once.json")
    if not doc:
        return None
    out = ["`%s`, stage 3 on %d ranks, %d micro steps per optimizer step, "
           "`--steps %d --threads 1`: median `step_ms` (slowest rank) of "
           "steps %d-%d, median over %d rounds, the two policies back to "
           "back in each; the ratio is the median of the per-round ratios." %
           (doc["model"], doc["world"], doc["accumulation"], doc["steps"],
            doc["warmup"] + 1, doc["steps"], doc["rounds"]), "",
           "| frozen-gather | all-gathers per step (report = trace) | bytes "
           "sent per rank per step | peak bytes (measured = planned) | "
           "predicted step ms (cpu preset) | measured step ms |",
           "|---|---:|---:|---:|---:|---:|"]
    for name in ("per-use", "once"):
        e = doc["policies"][name]
        same = e["all_gathers"] == e["traced_gathers_per_step"]
        peak = e["peak_bytes"] == e["planned_peak_bytes"]
        out.append("| %s | %d%s | %d | %d%s | %.2f | %.2f |" % (
            name, e["all_gathers"], "" if same else " (traced %d)" %
            e["traced_gathers_per_step"], e["bytes_per_rank"],
            e["peak_bytes"], "" if peak else " (planned %d)" %
            e["planned_peak_bytes"], e["predicted_step_ms"], e["step_ms"]))
    out += ["", "**once / per-use, measured step: %.3f**" %
            doc["ratio_once_over_per_use"]]
    return "\n".join(out)


def sec_quant(r):
    """zrt-bench-quantize: ZeRO++'s quantization kernels against memcpy."""
    doc = load(r, "quant.json")
    if not doc:
        return None
    m = doc.get("machine", {})
    out = ["Machine: %s cores, `%s` (lscpu model name), CPU backend, %d "
           "OpenMP thread(s). Run of %s UTC, load average (1/5/15 min) %s at "
           "the start, %s at the end. %d MiB of values (normal, std 0.02) "
           "per case, blocks of %d elements for INT8 and %s for INT4; each "
           "kernel timed next to a "
           "`memcpy` of the values' bytes, %d interleaved rounds; GB/s count "
           "the values' bytes, ratio = memcpy's time over the kernel's "
           "(medians)." % (
               m.get("nproc", "?"), m.get("cpu", "unknown"), doc["threads"],
               doc["date"], "/".join(doc["loadavg"]),
               "/".join(doc["loadavg_end"]), doc["mib"], doc["block"],
               doc.get("block_int4", doc["block"]), doc["rounds"]), "",
           "| values | bits | memcpy GB/s | quantize GB/s | quantize / "
           "memcpy | dequantize GB/s | dequantize / memcpy |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for e in doc["cases"]:
        out.append("| %s | %d | %.2f | %.2f | %.3f | %.2f | %.3f |" % (
            e["dtype"], e["bits"], e["memcpy_gbps"], e["quantize_gbps"],
            e["quantize_ratio"], e["dequantize_gbps"],
            e["dequantize_ratio"]))
    return "\n".join(out)


# Must-show targets of issue 37.
GOAL_PEERS_DS3_LARGEST = 0.5
GOAL_PEERS_DS3_TINY = 0.3
GOAL_PEERS_COMPILE = 0.6
GOAL_PEERS_RSS = 0.5
GOAL_ROOFLINE = 1.25


def sec_peers(r):
    """bench/peers/peers.py: ours against DeepSpeed and PyTorch, and the
    roofline of our step."""
    doc = load(r, "peers.json")
    if not doc or doc.get("dry"):
        return None
    m, v = doc["machine"], doc["versions"]
    mib = lambda b: b / 2.0**20
    out = ["Machine: %s cores, `%s` (lscpu model name), %s. Run of %s UTC, "
           "load average (1/5/15 min) %s at the start, %s at the end. Peers: "
           "torch %s, DeepSpeed %s, transformers %s, numpy %s, Python %s "
           "(`bench/peers/requirements.txt`); ours at commit %s. %d ranks "
           "with 1 thread each (ours, DeepSpeed: gloo, CPU accelerator), or "
           "one process with %d threads (torch; OpenMP wait policy %s). "
           "fp32, AdamW, %d steps per run of which %d warm-up, %d rounds, "
           "every system once per round (the order reversed every other "
           "round). Step: median over the steps after the warm-up (of ranks: "
           "the slowest), then over rounds; ratios are medians of per-round "
           "ratios. First step: wall seconds from launch to the end of the "
           "first step, compilation included (ours: zero-compile, then the "
           "run; torch.compile: its first step). Loss: the largest relative "
           "difference of a step's loss from ours at the same stage (torch: "
           "from ours at ZeRO-3); above %g the system's speed is not "
           "compared." % (
               m["nproc"], m["cpu"], m["mpi"], m["date"],
               "/".join(m["loadavg"]), "/".join(doc["loadavg_end"]),
               v.get("torch", "?"), v.get("deepspeed", "?"),
               v.get("transformers", "?"), v.get("numpy", "?"),
               v.get("python", "?"), v["ours"], doc["world"], doc["world"],
               doc.get("torch_omp_wait_policy", "default").lower(),
               doc["steps"], doc["warmup"], doc["rounds"], doc["rtol"])]
    flags = {k: v for k, v in doc.get("ours_flags", {}).items() if v}
    if flags:
        out[0] += " zero-compile options beyond `--stage S --world-size %d`, " \
            "as DeepSpeed's defaults for a config that gives only the " \
            "stage: %s." % (doc["world"], "; ".join(
                "ZeRO-%s `%s`" % (k, " ".join(v))
                for k, v in sorted(flags.items())))
    label = lambda s: s["system"] + ("" if s["stage"] is None else
                                     " ZeRO-%d" % s["stage"])
    for size in doc["sizes"]:
        sz = size["size"]
        ours = {s["stage"]: s for s in size["systems"]
                if s["system"] == "ours"}
        last = max(ours)
        out += ["", "**%s**: %d layers, hidden %d, %d heads, vocabulary %d, "
                "sequence %d, global batch %d, %.2fM parameters (`%s`)." % (
                    size["name"], sz["layers"], sz["hidden"], sz["heads"],
                    sz["vocab"], sz["seq"], sz["batch"],
                    size["params"] / 1e6, size["model_gen"]), "",
                "| system | step ms | ours / it | peak RSS MiB per rank | "
                "ours / it | first step s | loss: max relative difference |",
                "|---|---:|---:|---:|---:|---:|---:|"]
        for s in size["systems"]:
            ref = ours[s["stage"] if s["stage"] is not None else last]
            mine = s["system"] == "ours"
            key = "ours ZeRO-%d / %s" % (ref["stage"], label(s))
            if not s["agrees"]:
                step, ratio = "losses disagree", "-"
            else:
                step = "%.2f" % s["step_ms"]
                ratio = "" if mine else "%.3f" % size["ratios"][key]
            out.append("| %s | %s | %s | %.1f | %s | %.1f | %s |" % (
                label(s), step, ratio, mib(s["peak_rss_bytes_per_rank"]),
                "" if mine else "%.3f" % (ref["peak_rss_bytes_per_rank"] /
                                          s["peak_rss_bytes_per_rank"]),
                s["first_step_s"],
                "(reference)" if mine and s["stage"] == last else
                "%.2g" % s["loss_max_rel_diff"] + ("" if s["agrees"]
                                                   else " **> %g**" %
                                                   doc["rtol"])))
    # The must-show targets.
    sizes = doc["sizes"]
    by = {s["name"]: s for s in sizes}
    largest = max(sizes, key=lambda s: s["params"])
    smallest = min(sizes, key=lambda s: s["params"])

    def ratio(size, system):
        stage = max(s["stage"] for s in size["systems"]
                    if s["system"] == "ours")
        key = "ours ZeRO-%d / %s" % (stage, system)
        agree = all(s["agrees"] for s in size["systems"]
                    if label(s) in (system, "ours ZeRO-%d" % stage))
        return size["ratios"].get(key), agree

    rows = []
    for size, goal in ((largest, GOAL_PEERS_DS3_LARGEST),
                       (smallest, GOAL_PEERS_DS3_TINY)):
        x, agree = ratio(size, "deepspeed ZeRO-3")
        if x is not None:
            rows.append(("ours / DeepSpeed ZeRO-3 step, %s" % size["name"],
                         "%.3f" % x, "<= %g" % goal,
                         ok(goal, x) if agree else "**no** (losses)"))
    for size in sizes:
        x, agree = ratio(size, "torch.compile")
        if x is not None:
            rows.append(("ours / torch.compile step, %s" % size["name"],
                         "%.3f" % x, "<= %g" % GOAL_PEERS_COMPILE,
                         ok(GOAL_PEERS_COMPILE, x) if agree
                         else "**no** (losses)"))
    for size in sizes:
        o = [s for s in size["systems"] if s["system"] == "ours"]
        d = [s for s in size["systems"] if s["system"] == "deepspeed"]
        if o and d:
            x = max(s["peak_rss_bytes_per_rank"] for s in o) / \
                min(s["peak_rss_bytes_per_rank"] for s in d)
            rows.append(("ours / DeepSpeed peak RSS per rank (largest of "
                         "ours, smallest of DeepSpeed), %s" % size["name"],
                         "%.3f" % x, "< %g" % GOAL_PEERS_RSS,
                         ok(GOAL_PEERS_RSS, x)))
    worst = max(s["loss_max_rel_diff"] for size in sizes
                for s in size["systems"])
    rows.append(("largest relative loss difference, every system and step",
                 "%.2g" % worst, "<= %g" % doc["rtol"],
                 ok(doc["rtol"], worst)))
    if "roofline" in largest:
        x = largest["roofline"]["measured_over_bound"]
        rows.append(("ours measured step / calibrated bound, %s" %
                     largest["name"], "%.3f" % x, "<= %g" % GOAL_ROOFLINE,
                     ok(GOAL_ROOFLINE, x)))
    out += ["", "Targets (issue 37):", "",
            "| what | measured | target | met |", "|---|---:|---:|---|"]
    out += ["| %s | %s | %s | %s |" % row for row in rows]
    # The roofline, per family.
    roof = [s for s in sizes if "roofline" in s]
    if roof:
        cals = [s["roofline"]["calibration"] for s in roof]
        per_size = any("gemm_shapes" in c for c in cals)
        stage = max(s["stage"] for s in roof[0]["systems"]
                    if s["system"] == "ours")
        if per_size:
            rates = ("its FLOPs at the GEMM rate zrt-bench-calibrate measured "
                     "in this run, before the size's rounds, on that size's "
                     "own matmuls (`--gemm-shapes`: every product of the "
                     "step, as often as the step runs it; %d ranks at once, "
                     "1 thread each), or its bytes at the streaming "
                     "bandwidth of the same calibration (rows below the "
                     "step)" % doc["world"])
        else:
            cal = cals[0]
            rates = ("its FLOPs at %.1f GFLOP/s (GEMM) or its bytes at %.2f "
                     "GB/s (triad), per rank of %d; rates: %s" % (
                         cal["gemm_flops"] / 1e9,
                         cal["memory_bandwidth"] / 1e9, doc["world"],
                         cal["source"].replace(
                             "the cpu preset (the last calibration)",
                             "the cpu preset's row, the last calibration")))
        out += ["", "Roofline of our ZeRO-%d step, per rank: the bound of an "
                "op is %s. FLOPs and bytes from the cost model's timeline, "
                "measured from one `--trace` run (mean over ranks and the "
                "steps after the warm-up). Cells: measured ms / bound ms "
                "(measured over bound)." % (stage, rates), "",
                "| family | " + " | ".join(s["name"] for s in roof) + " |",
                "|---|" + "---:|" * len(roof)]
        fams = []
        for s in roof:
            for f in s["roofline"]["families"]:
                if f["family"] not in fams:
                    fams.append(f["family"])
        for fam in fams:
            cells = []
            for s in roof:
                f = [x for x in s["roofline"]["families"]
                     if x["family"] == fam]
                if not f:
                    cells.append("")
                    continue
                f = f[0]
                cells.append("%.2f / %.2f (%s)" % (
                    f["measured_ms"], f["bound_ms"],
                    "%.2f" % f["measured_over_bound"]
                    if f["measured_over_bound"] is not None else "no bound"))
            out.append("| %s | %s |" % (fam, " | ".join(cells)))
        out.append("| **step** (timed rounds) | %s |" % " | ".join(
            "**%.2f / %.2f (%.2f)**" % (
                s["roofline"]["step_ms"], s["roofline"]["bound_ms"],
                s["roofline"]["measured_over_bound"]) for s in roof))
        if per_size:
            out.append("| GEMM rate, GFLOP/s (the size's matmuls) | %s |" %
                       " | ".join("%.1f" % (c["gemm_flops"] / 1e9)
                                  for c in cals))
            out.append("| streaming bandwidth, GB/s | %s |" % " | ".join(
                "%.2f" % (c["memory_bandwidth"] / 1e9) for c in cals))
        if all("at_fma_peak" in s["roofline"] for s in roof):
            out.append("| FMA ceiling, GFLOP/s (register-only FMAs, best "
                       "round) | %s |" % " | ".join(
                           "%.1f" % (c["fma_peak_flops"] / 1e9)
                           for c in cals))
            out.append("| step / bound with every FLOP at the FMA ceiling "
                       "| %s |" % " | ".join(
                           "%.2f / %.2f (%.2f)" % (
                               s["roofline"]["step_ms"],
                               s["roofline"]["at_fma_peak"]["bound_ms"],
                               s["roofline"]["at_fma_peak"][
                                   "measured_over_bound"]) for s in roof))
        out += ["", "Largest gaps (measured minus bound, ms per step):"]
        for s in roof:
            gaps = sorted(s["roofline"]["families"],
                          key=lambda f: -f["excess_ms"])[:4]
            out.append("- %s: %s." % (s["name"], ", ".join(
                "%s %.2f" % (f["family"], f["excess_ms"]) for f in gaps)))
    return "\n".join(out)


def sec_zeropp(r):
    """bench/zeropp.py: ZeRO++ and MiCS step times on 2 x 2 CPU ranks."""
    doc = load(r, "zeropp.json")
    if not doc:
        return None
    m = doc["machine"]
    out = ["Machine: %d cores, `%s` (lscpu model name), CPU backend. Run of "
           "%s UTC, load average (1/5/15 min) %s at the start, %s at the "
           "end. `%s` with `%s`, 4 ranks as 2 nodes of 2 (`--ranks-per-node "
           "2`, `--threads 1`), `--steps %d`: median `step_ms` (slowest "
           "rank) of steps %d-%d, median over %d rounds, the options in a "
           "rotating order each round; the ratio is the median of each "
           "round's ratio to ZeRO-3. Bytes per rank and step: the plan's "
           "(zero-report) and rank 0's measured." % (
               m["nproc"], m["cpu"], doc["date"], "/".join(doc["loadavg"]),
               "/".join(doc["loadavg_end"]), doc["model"], doc["common"],
               doc["steps"], doc["warmup"] + 1, doc["steps"], doc["rounds"]),
           "",
           "| option | flags | step ms | / ZeRO-3 | bytes within the node "
           "(planned = measured) | bytes across nodes (planned = measured) | "
           "peak bytes (planned = measured) |",
           "|---|---|---:|---:|---:|---:|---:|"]

    def same(planned, measured):
        return "%d" % planned if planned == measured else \
            "%d (measured %d)" % (planned, measured)

    for e in doc["options"]:
        out.append("| %s | `%s` | %.2f | %.3f | %s | %s | %s |" % (
            e["name"], e["flags"] or "-", e["step_ms"], e["ratio_to_zero3"],
            same(e["planned_intra_node_bytes"],
                 e["measured_intra_node_bytes"]),
            same(e["planned_inter_node_bytes"],
                 e["measured_inter_node_bytes"]),
            same(e["planned_peak_bytes"], e["peak_bytes"])))
    return "\n".join(out)


def sec_long_context(r):
    """bench/long_context.py: sequence parallelism and the chunked loss on
    2 CPU ranks."""
    doc = load(r, "long_context.json")
    if not doc:
        return None
    m = doc["machine"]
    out = ["Machine: %d cores, `%s` (lscpu model name), CPU backend. Run of "
           "%s UTC, load average (1/5/15 min) %s at the start, %s at the "
           "end. `%s` with the model flags below, 2 ranks (`--threads 1`), "
           "`--steps %d`: median `step_ms` (slowest rank) of steps %d-%d, "
           "median over %d rounds, the executables in a rotating order "
           "each round; the ratio is the median of each round's ratio to "
           "the first row of its table. Peak bytes are rank 0's, planned "
           "and measured." % (
               m["nproc"], m["cpu"], doc["date"], "/".join(doc["loadavg"]),
               "/".join(doc["loadavg_end"]), doc["model"], doc["steps"],
               doc["warmup"] + 1, doc["steps"], doc["rounds"])]

    def same(planned, measured):
        return "%d" % planned if planned == measured else \
            "%d (measured %d)" % (planned, measured)

    titles = {"sp": "Ulysses SP 2 against DP 2 at the same global tokens",
              "loss": "The chunked loss against the whole logits"}
    for group, rows in doc["groups"].items():
        out += ["", "%s:" % titles.get(group, group), "",
                "| run | model flags | zero-compile flags | tokens a step | "
                "step ms | ratio | peak bytes (planned = measured) | loss "
                "after the last step |",
                "|---|---|---|---:|---:|---:|---:|---:|"]
        for e in rows:
            out.append("| %s | `%s` | `%s` | %d | %.1f | %.3f | %s | %.6f |" % (
                e["name"], e["model_flags"], e["flags"], e["tokens_per_step"],
                e["step_ms"], e["ratio"],
                same(e["planned_peak_bytes"], e["peak_bytes"]), e["loss"]))
    return "\n".join(out)


SECTIONS = {
    "machine": sec_machine,
    "compile_time": sec_compile_time,
    "kernels": sec_kernels,
    "comm": sec_comm,
    "e2e": sec_e2e,
    "calibration": sec_calibration,
    "cost_model": sec_cost_model,
    "tune": sec_tune,
    "transfer": sec_transfer,
    "offload": sec_offload,
    "gpu": sec_gpu,
    "gpu_profile": sec_gpu_profile,
    "gpu_offload": sec_gpu_offload,
    "nvme": sec_nvme,
    "gather_once": sec_gather_once,
    "quant": sec_quant,
    "peers": sec_peers,
    "zeropp": sec_zeropp,
    "long_context": sec_long_context,
}


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--results", default=os.path.join(HERE, "results"))
    p.add_argument("--doc", default=os.path.join(ROOT, "docs",
                                                 "benchmarks.md"))
    p.add_argument("--only", help="comma-separated sections to render "
                   "(default: all), e.g. gpu from a GPU machine's results")
    args = p.parse_args()
    only = set(args.only.split(",")) if args.only else set(SECTIONS)
    with open(args.doc) as f:
        text = f.read()
    for name, fn in SECTIONS.items():
        if name not in only:
            continue
        pattern = re.compile(r"(<!-- bench:%s -->\n)(.*?)(<!-- /bench:%s -->)"
                             % (name, name), re.S)
        if not pattern.search(text):
            print("update_docs: no markers for '%s' in %s" % (name, args.doc),
                  file=sys.stderr)
            continue
        body = fn(args.results)
        if body is None and name in UNMEASURED and \
                "|" not in pattern.search(text).group(2):
            body = UNMEASURED[name]
        if body is None:
            print("update_docs: no results for '%s'; left as is" % name,
                  file=sys.stderr)
            continue
        text = pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(3),
                           text)
    with open(args.doc, "w") as f:
        f.write(text)
    print("updated " + args.doc)


if __name__ == "__main__":
    main()
