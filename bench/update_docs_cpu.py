"""The sections of update_docs.py measured on the CPU machine: the machine,
compile time, kernels, communication, end to end, the cost model's
calibration and accuracy, and the tuner."""

import math
import re
import statistics

from update_docs_common import (GOAL_BANDWIDTH, GOAL_COMM, GOAL_MODEL, load,
                                machine_line, ok)


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
            "params-20k": "the same, 20,000 parameter tensors",
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
            if g.get("goal_ratio"):
                # Linearity: a time against another case's, not a budget.
                target = "%gx %s" % (g["goal_ratio"], g["ratio_to"])
                met = "%s (%.2fx)" % (ok(g["goal_ratio"], g["ratio"]),
                                      g["ratio"])
            else:
                target = "%g s" % goal if goal else "O(n log n)"
                met = ok(goal, g["seconds"]) if goal else "-"
            out.append("| %s | `%s` | %d | %.3f | %s | %s |" % (
                what.get(g["case"], g["case"]), g["args"], g["step_ops"],
                g["seconds"], target, met))
    return "\n".join(out)


def sec_kernels(r):
    doc = load(r, "kernels.json")
    if not doc:
        return None
    k = {e["name"]: e for e in doc["kernels"]}
    desc = {
        "triad": ("STREAM triad `a = b + s*c` (reference)", "12 B/element"),
        "copy": ("`zrt_copy` (parallel memcpy)", "8 B/element"),
        "adam_bf16": ("`zrt_optimizer_step` AdamW, bf16 gradients and copies",
                      "28 B/param"),
        "adam_f32": ("`zrt_optimizer_step` AdamW, f32, copy = master",
                     "28 B/param"),
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
