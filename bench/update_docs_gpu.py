"""The sections of update_docs.py of a GPU and of the offloads: the GPU's
steps, profile and offload capacity, device-host transfers, CPU and NVMe
offload, gather-once and quantisation."""

import statistics

from update_docs_common import GOAL_BANDWIDTH, load, ok


GPU_DTYPES = ("bf16", "fp32")

# FlashAttention-2's forward + backward rate on an H100, the goal of the
# CUDA attention at causal head dims 64 and 128 (TFLOP/s).
GOAL_ATTENTION_TFLOPS = 190


def sec_gpu(r):
    """The GPU run of bench/gpu/run.sh: the CUDA optimizer, attention and
    memory-bound kernels (zrt-cuda-bench), and a GPT-2 step in PyTorch eager
    and from zero-mlir."""
    kern = load(r, "gpu_kernels.json")
    runs = [(dt, load(r, "gpu_gpt2_torch_%s.json" % dt),
             load(r, "gpu_gpt2_torch_compile_%s.json" % dt),
             load(r, "gpu_gpt2_zero_%s.json" % dt),
             load(r, "gpu_gpt2_zero_%s_p16.json" % dt),
             load(r, "gpu_gpt2_zero_%s_p16_graphs.json" % dt))
            for dt in GPU_DTYPES]
    llama = [load(r, "gpu_llama_%s.json" % k)
             for k in ("torch_eager", "torch_compile", "zero")]
    machine = load(r, "gpu_machine.json")
    parts = [d for d in [kern] + [x for run in runs for x in run[1:]] + llama
             if d]
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
                    kern["warmup"])]
        if kern["kernels"]:
            out += ["", "| kernel | params | bytes/param | ms | G params/s | "
                    "GB/s | / copy |", "|---|---:|---:|---:|---:|---:|---:|"]
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
        out += attention_table(kern) + memory_table(kern)
    elif kern:
        out.append("Kernels: not measured (%s)." % kern["skipped"])
    rows, ratios = [], []
    for dt, torch, compiled, zero, zero16, graphs in runs:
        for label, d in (("PyTorch eager (`bench/gpu/gpt2_torch.py`)", torch),
                         ("PyTorch `torch.compile` (`--compile`)", compiled),
                         ("zero-mlir `--target cuda`", zero),
                         ("zero-mlir `--target cuda`, `--attention-precision "
                          "16bit`", zero16),
                         ("zero-mlir `--target cuda`, `--attention-precision "
                          "16bit --cuda-graphs`", graphs)):
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
        if compiled and zero and "skipped" not in compiled and \
                "skipped" not in zero:
            ratios.append("%s %.3f of torch.compile's" % (
                dt, zero["step_ms_median"] / compiled["step_ms_median"]))
        for what, d in (("16-bit attention probabilities", zero16),
                        ("those and CUDA graphs", graphs)):
            if compiled and d and "skipped" not in compiled and \
                    "skipped" not in d:
                ratios.append("%s with %s %.3f of torch.compile's" % (
                    dt, what, d["step_ms_median"] /
                    compiled["step_ms_median"]))
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
    out += llama_table(llama, bool(out))
    return "\n".join(out)


def not_measured(what, part):
    """The line of a zrt-cuda-bench part that the results do not hold."""
    return ["", "%s (`zrt-cuda-bench --only %s`): not measured yet." % (what,
                                                                       part)]


def attention_table(kern):
    """zrt-cuda-bench's attention part: the CUDA backend's fused attention,
    forward and backward, in TFLOP/s as FlashAttention's benchmark counts
    them."""
    cases = kern.get("attention")
    if cases is None:
        return not_measured("Attention", "attention")
    out = ["", "Attention, `cuda::attentionForward` and `attentionBackward`, "
           "bf16, causal, batch x heads for 16384 tokens of a 2048-wide model "
           "(heads = 2048 / head dim). FLOPs as FlashAttention's benchmark "
           "counts them: forward 4 x batch x heads x seq^2 x head dim, "
           "halved for causal, backward 2.5x the forward; the backward's "
           "time includes the log-sum-exp it recomputes (the forward keeps "
           "none). Goal: %d TFLOP/s forward + backward (FlashAttention-2's "
           "rate), at 2K tokens and across 1K-8K:" % GOAL_ATTENTION_TFLOPS,
           "", "Precision fp32 keeps P and dS to fp32's bits (two 16-bit "
           "products each), 16bit rounds them to one as FlashAttention "
           "does (`train --attention-precision`).",
           "", "| precision | head dim | seq | batch x heads | fwd ms | bwd ms "
           "| fwd TFLOP/s | bwd TFLOP/s | fwd+bwd TFLOP/s | goal %d |" %
           GOAL_ATTENTION_TFLOPS, "|---|---:|---:|---|---:|---:|---:|---:|"
           "---:|---|"]
    for e in cases:
        head = "| %s | %d | %d | %d x %d |" % (
            e.get("precision", "fp32"), e["head_dim"], e["seq"], e["batch"],
            e["heads"])
        if "skipped" in e:
            out.append("%s not run (%s) | | | | | |" % (head, e["skipped"]))
            continue
        out.append("%s %.3f | %.3f | %.1f | %.1f | %.1f | %s |" % (
            head, e["fwd_ms_median"], e["bwd_ms_median"], e["fwd_tflops"],
            e["bwd_tflops"], e["total_tflops"],
            ok(e["total_tflops"], GOAL_ATTENTION_TFLOPS)))
    return out


def memory_table(kern):
    """zrt-cuda-bench's memory part: the memory-bound kernels of a GPT-2
    124M step against the device copy."""
    cases = kern.get("memory_kernels")
    if cases is None:
        return not_measured("Memory-bound kernels", "memory")
    out = ["", "Memory-bound kernels at GPT-2 124M's shapes, bf16, 8 x 1024 "
           "tokens (hidden 768, 12 heads of 64, vocabulary 50257, padded to "
           "50304 columns); bytes = each input read once and each output "
           "written once (not a padded row's padding columns, nor the norm "
           "gradients' per-row statistics). Goal: %.1f of the copy's GB/s:"
           % GOAL_BANDWIDTH, "",
           "| kernel | zrt kernel | shape | MB | ms | GB/s | / copy | goal "
           "%.1f |" % GOAL_BANDWIDTH, "|---|---|---|---:|---:|---:|---:|---|"]
    for e in cases:
        head = "| `%s` | `%s` | %s | %.1f |" % (e["name"], e["kernel"],
                                                e["shape"], e["bytes"] / 1e6)
        if "skipped" in e:
            out.append("%s not run (%s) | | | |" % (head, e["skipped"]))
            continue
        out.append("%s %.4f | %.0f | %.3f | %s |" % (
            head, e["ms_median"], e["gbps"], e["ratio_to_copy"],
            ok(e["ratio_to_copy"], GOAL_BANDWIDTH)))
    return out


def llama_table(runs, after):
    """bench/gpu/run.sh's llama part: the same Llama-3.2-1B-shaped step in
    PyTorch eager, torch.compile and zero-mlir, each at its largest micro
    batch."""
    labels = ("PyTorch eager", "PyTorch `torch.compile` (fused AdamW, flash "
              "attention)", "zero-mlir `--target cuda`")
    rows = []
    for label, d in zip(labels, runs):
        if not d:
            continue
        if d.get("attention_precision") == "16bit":
            label += ", `--attention-precision 16bit`"
        if "skipped" in d:
            rows.append("| %s | not measured: %s | | | |" % (label,
                                                             d["skipped"]))
            continue
        mfu = d.get("mfu")
        rows.append("| %s | %d x %d | %.1f | %.0f | %s |" % (
            label, d["batch"], d["seq"], d["step_ms_median"],
            d["tokens_per_s"], "%.1f%%" % (100 * mfu) if mfu else "?"))
    if not rows:
        return []
    out = ([""] if after else []) + [
        "A Llama-3.2-1B-shaped model (16 layers, hidden 2048, 32 heads and 8 "
        "KV heads, MLP 8192, vocabulary 128256, tied), bf16 at sequence "
        "2048, AdamW, each at the largest micro batch that fits the GPU "
        "(PyTorch's by running out of memory, zero-mlir's by its plan); "
        "MFU counts 6 x parameters + 12 x layers x hidden x sequence FLOPs "
        "a token:", "",
        "| implementation | batch x seq | step ms | tokens/s | MFU |",
        "|---|---|---:|---:|---:|"] + rows
    compiled, zero = runs[1], runs[2]
    if compiled and zero and "skipped" not in compiled and \
            "skipped" not in zero:
        out += ["", "zero-mlir tokens/s / torch.compile's: %.3f." % (
            zero["tokens_per_s"] / compiled["tokens_per_s"])]
    return out


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
