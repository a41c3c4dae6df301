#!/usr/bin/env python3
"""Regenerates docs/CostModel.md, the cost model's validation table, from
bench/published-runs.json and the built tools, or checks that it is current
(--check: prints a unified diff and exits 1 when it is not).

For each run the script writes the model with zero-model-gen (no weights:
the generator writes shapes only), schedules it with zero-opt's
zero-pipeline on the run's ranks and ranks per node, and reads the JSON
report of `--zero-report` on the run's hardware preset: the predicted step,
the tokens per second per GPU it implies (global batch x sequence / GPUs /
step) and the peak memory per rank. The page is the whole output: every
number on it comes from the data file or from a tool.
"""

import argparse
import difflib
import json
import os
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DOC = os.path.join(ROOT, "docs", "CostModel.md")
DATA = os.path.join(ROOT, "bench", "published-runs.json")
BANDS = os.path.join(ROOT, "lib", "Dialect", "Zero", "Analysis",
                     "ValidationBands.inc")
# A prediction within this factor of the published throughput counts as
# matching it (issue 52's bar).
BAND = 0.20
# Each row's ratio before the peer options, the foreach AdamW, the 500 W
# preset and the A100's measured rates (the page as the eager profile left
# it), for "What the peer options and the 500 W preset changed".
BEFORE = {
    "titan-8b-h100x8": 1.22, "titan-8b-h100x8-compile": 1.35,
    "titan-8b-h100x128": 1.19, "titan-8b-h100x128-compile": 1.29,
    "titan-8b-a100x64": 0.76, "titan-70b-a100x64": 0.77,
    "foundry-mpt7b-h100x8": 1.23, "foundry-mpt7b-h100x128": 1.10,
    "foundry-mpt13b-h100x8": 1.19, "foundry-mpt7b-a100x8": 1.06,
    "fms-llama2-7b-a100x128": 0.75, "fms-llama2-7b-h100x96": 0.85,
    "tinyllama-1.1b-a100-40gbx8": 1.13, "olmo-core-llama-8b-h100x8": 1.15,
    "blog-llama2-7b-a100x128": 0.92, "blog-llama2-70b-h100x96": 0.84,
    "blog-llama2-70b-a100x128": 0.74, "xtuner-llama2-7b-a100x8": 1.14,
    "xtuner-llama2-70b-a100x32": 1.31,
}


class Failure(Exception):
    pass


def commands(run):
    """The zero-model-gen and zero-opt command lines of one run."""
    model = run["id"] + ".mlir"
    gen = ["zero-model-gen"] + run["model_gen"] + ["-o", model]
    pipeline = "%s world-size=%d" % (run["pipeline"], run["gpus"])
    if run["gpus_per_node"] < run["gpus"]:
        pipeline += " ranks-per-node=%d" % run["gpus_per_node"]
    report = "format=json hardware=%s" % run["preset"]
    if run.get("report"):
        report += " " + run["report"]
    opt = ["zero-opt", model, "--zero-pipeline=" + pipeline,
           "--zero-report=" + report, "-o", "/dev/null"]
    return gen, opt


def shell(argv):
    """A command line as one would type it: --opt="a b" for options."""
    words = []
    for a in argv:
        key, eq, value = a.partition("=")
        if eq and key.startswith("--") and " " in value and '"' not in value:
            words.append('%s="%s"' % (key, value))
        else:
            words.append(shlex.quote(a))
    return " ".join(words)


def predict(run, tools, workdir, pipeline=None, report=None, trace=None):
    """The prediction of `run`, or of its setup under another `pipeline` or
    with more report options (`report`, as a row's `what_if` lists them);
    with `trace`, also its time by kind of kernel from that timeline file."""
    if pipeline is not None:
        run = dict(run, pipeline=pipeline)
    if trace is not None:
        report = " ".join(filter(None, [report, "trace=" + trace]))
    if report is not None:
        run = dict(run, report=" ".join(filter(None, [run.get("report"),
                                                      report])))
    gen, opt = commands(run)
    for argv in (gen, opt):
        tool = os.path.join(tools, argv[0])
        if not os.access(tool, os.X_OK):
            raise Failure("'%s' is not a tool in %s" % (argv[0], tools))
        done = subprocess.run([tool] + argv[1:], cwd=workdir,
                              capture_output=True, text=True)
        if done.returncode:
            raise Failure("%s: `%s` failed:\n%s" % (run["id"], shell(argv),
                                                   done.stderr))
    report = json.loads(done.stdout)
    kernels = None
    if trace:
        kernels = kernel_ms(os.path.join(workdir, trace))
    step_s = report["predicted_step_ms"] / 1e3
    tokens = run["global_batch"] * run["seq"] / run["gpus"]
    return {"step_ms": report["predicted_step_ms"],
            "tps": tokens / step_s,
            "peak_gib": report["peak_bytes"] / 2**30,
            "exposed_ms": report["exposed_comm_ms"],
            "recompute_ms": report["recompute_ms"],
            "fits": report["fit"]["fits"] if report["fit"] else None,
            "kernels": kernels}


def kernel_ms(path):
    """Rank 0's compute-stream time by kind of kernel in a predicted
    timeline (zero-report's trace=): matrix products, attention and the
    other nn kernels (elementwise, normalization, layout, loss)."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    out = {"matmul": 0.0, "attention": 0.0, "other": 0.0}
    for e in events:
        if e.get("ph") != "X" or e.get("pid") != 0 or e.get("tid") != 0:
            continue
        op = e["name"].split()[0]
        if not op.startswith("nn."):
            continue
        kind = ("matmul" if op == "nn.matmul" else
                "attention" if op.startswith("nn.attention") else "other")
        out[kind] += e["dur"] / 1e3
    return out


def n(x):
    return "{:,}".format(int(round(x)))


def source(run):
    src = run["source"]
    text = "%s `%s`" % (src["repo"], src["path"])
    if src.get("commit"):
        text += " @ `%s`" % src["commit"][:12]
    return text + ", " + src["where"]


def mfu_range(runs):
    mfus = [r["published"]["mfu"] for r in runs if "mfu" in r["published"]]
    return "%.0f-%.0f%%" % (100 * min(mfus), 100 * max(mfus))


def within(ratio):
    return abs(ratio - 1) <= BAND


def gpu_of(run):
    """The GPU a run's rows are grouped by: its preset's family."""
    return "A100" if run["preset"].startswith("a100") else "H100"


PEER_RUNTIMES = ("runtime=eager", "runtime=compiled")


def is_eager(run):
    """Whether the run is priced with the eager runtime profile, whole or
    outside its compiled blocks."""
    return any(w in PEER_RUNTIMES for w in (run.get("report") or "").split())


def fused(run):
    """The run priced with the default (fused) runtime."""
    words = [w for w in (run.get("report") or "").split()
             if w not in PEER_RUNTIMES]
    return dict(run, report=" ".join(words))


def ratios_of(data, predictions, suffix=""):
    """Each run's predicted over published throughput; with `suffix`
    "/fused", of its fused prediction where it is priced eager."""
    return {run["id"]: predictions.get(run["id"] + suffix,
                                       predictions[run["id"]])["tps"] /
            run["published"]["tokens_per_s_per_gpu"] for run in data["runs"]}


def bands(data, predictions):
    """Per GPU: the presets its runs used, the run count and the smallest
    and largest ratio of predicted to published throughput, of the default
    (fused) predictions: the band is printed beside those."""
    ratios = ratios_of(data, predictions, "/fused")
    out = {}
    for run in data["runs"]:
        b = out.setdefault(gpu_of(run), {"presets": set(), "ratios": []})
        b["presets"].add(run["preset"])
        b["ratios"].append(ratios[run["id"]])
    return out


def render_bands(data, predictions):
    """ValidationBands.inc: each validated preset's band, for the report and
    zero-tune (lookupValidationBand)."""
    out = ["// The validation band of each preset a published run was compared "
           "on,",
           "// generated by scripts/update-costmodel-doc.py from "
           "docs/CostModel.md's rows",
           "// (the runs of the preset's GPU). Do not edit by hand."]
    for gpu, b in sorted(bands(data, predictions).items()):
        for preset in sorted(b["presets"]):
            out.append('    {"%s", {"%s", /*runs=*/%d, /*minRatio=*/%.4f, '
                       "/*maxRatio=*/%.4f}}," % (
                           preset, gpu, len(b["ratios"]), min(b["ratios"]),
                           max(b["ratios"])))
    return "\n".join(out) + "\n"


def breakdown_ids(data):
    """The runs whose step the page splits by kind of kernel: the
    single-node torchtitan rows on their 500 W H100s."""
    return [r["id"] for r in data["runs"]
            if r["preset"] == "h100-sxm-96gb" and r["gpus"] <= r["gpus_per_node"]]


def render(data, predictions):
    runs, own = data["runs"], data["own"]
    out = []
    w = out.append
    w("# The cost model against published training runs")
    w("")
    w("<!-- Generated by scripts/update-costmodel-doc.py from "
      "bench/published-runs.json; do not edit. -->")
    w("")
    w("`zero-opt --zero-report=\"hardware=NAME\"` predicts the time of a "
      "step (docs/Report.md, docs/HardwarePresets.md). This page sets that "
      "prediction beside published data-parallel training runs (FSDP, "
      "FSDP2, HSDP, DeepSpeed ZeRO-3: ZeRO-3 and MiCS in our terms; no "
      "tensor or pipeline parallelism), each rebuilt from its published setup: the same "
      "model shapes, GPUs, GPUs per node, batch, sequence, precision, "
      "recomputation and sharding. `scripts/update-costmodel-doc.py` "
      "writes the page from `bench/published-runs.json` (each run's setup "
      "and published figures, with the file, commit and table they were "
      "read from) and the built tools; `--check` only compares, and "
      "test/Docs/costmodel-doc.test runs it.")
    w("")
    w("## What a prediction assumes")
    w("")
    w("The predicted step is the cost model's timeline of our own schedule "
      "of the step (the same collectives, buckets, prefetch and "
      "recomputation a `zero-compile` of it would run) on the preset's "
      "rates by kernel family (docs/HardwarePresets.md, \"Rates by kernel "
      "family\", where every rate names its source): matrix products at "
      "the best measured matmul rate (0.8 of the dense peak; on A100 its "
      "own measured 0.859) times the "
      "share of the device their output tiles fill in waves, 16-bit "
      "products with a dimension that is not a multiple of 8 at the rate "
      "measured for such products on an H100; fused attention at the rate "
      "FlashAttention-2 reaches by direction, head dimension, query length "
      "and causality (the FlashAttention-3 paper's measurements on an "
      "H100); elementwise, norm and optimizer kernels at the STREAM "
      "bandwidth; 3.3 us of launch and gap a kernel (PyTorch eager on an "
      "H100); NCCL ring all-gathers and reduce-scatters within an A100, "
      "H100 or H200 node at the bus bandwidth nccl-tests publishes for "
      "their message size, every other collective at one bus bandwidth "
      "(docs/HardwarePresets.md, \"Collectives by message size\"). Those "
      "are the rates of well-tuned kernels, one kernel "
      "an op, so the default prediction (`runtime=fused`) is that of a "
      "well-tuned or compiled peer running our schedule: it is not "
      "corrected by any runtime's measured efficiency, ours included. "
      "`runtime=eager` prices instead the ops an eager PyTorch peer runs as "
      "chains of unfused kernels as those chains (below, \"The eager "
      "runtime profile\"); the rows whose peer's modules were read to run "
      "so are priced with it, and say so, and `runtime=compiled` prices "
      "a peer that compiles each transformer block and runs the rest "
      "eager. `reduce-dtype=f32` prices the gradient reduce-scatters as a "
      "peer that reduces in fp32 moves them, 4 bytes an element (FSDP2's "
      "and Composer's `reduce_dtype`; our schedule reduces in the compute "
      "type): a choice of the peer's schedule that moves no planned byte, "
      "given where the row's source sets it. The published runs are PyTorch "
      "eager (torchtitan, "
      "llm-foundry's Composer, TinyLlama's Lightning Fabric, the PyTorch "
      "blog's FSDP runs, XTuner's DeepSpeed) or `torch.compile` (IBM's "
      "fms-fsdp, OLMo-core, "
      "the torchtitan rows so marked), as the table says.")
    w("")
    w("Attention over packed rows (a step imported with `zero-import "
      "--packed`, whose attention reads document ids) is priced as full "
      "rows unless the report is given the documents' lengths "
      "(`doc-lengths=FILE`, which `zero-data --pack --doc-lengths` "
      "writes; `zero-tune --doc-lengths`): then its FLOPs are a full row's "
      "times the fraction of query-key pairs the documents' masks keep, "
      "averaged over the rows (each document's square, halved when causal, "
      "`w (L - w) + w^2 / 2` with a window `w` shorter than the document), "
      "at the rate of the full row's length; the padding after a row's last "
      "document is left out. The memory plan does not change: the shapes "
      "are static.")
    w("")
    eager_runs = [r for r in runs if is_eager(r)]
    w("## The eager runtime profile")
    w("")
    w("`zero-opt --zero-report=\"runtime=eager\"` prices each op whose "
      "eager PyTorch decomposition differs from our fused kernel as the "
      "chain of kernels an eager peer launches for it, each reading and "
      "writing whole tensors at the preset's STREAM bandwidth and paying "
      "the preset's launch and gap; every other op, and every FLOP, is "
      "priced as under `runtime=fused`. The chains are those of "
      "torchtitan's Llama (pytorch/torchtitan at `d4c86e3758a8`, the "
      "release of the H100 rows, and `4d88a8a44fe4`, that of the A100 "
      "rows: the same modules), and their backward that of PyTorch's "
      "autograd formulas (`tools/autograd/derivatives.yaml`: `pow`, "
      "`rsqrt`, `mean`, `mul`, `to`, `silu`, `log_softmax`, `nll_loss`). "
      "Each op's kernel model states its chain "
      "(`lib/Conversion/ZeroToRuntime/KernelModels.cpp`, `eagerBytes` and "
      "`eagerLaunches` of its cost), and "
      "`test/Dialect/Zero/Analysis/cost-model-eager.mlir` checks the time "
      "of each. Bytes are per element of the op's 16-bit operand "
      "(the chains compute in fp32), row statistics and tables left out. "
      "The profile also has the peer's runtime, FSDP2 (`fully_shard`), "
      "gather each layer into a buffer of its own and copy the parameters "
      "out of it once gathered, on the compute stream "
      "(`foreach_all_gather_copy_out`), and copy the gradients into a "
      "buffer to reduce-scatter, on the reduce-scatter's stream before it "
      "(`foreach_reduce_scatter_copy_in`; both in PyTorch's "
      "`torch/distributed/_composable/fsdp/_fsdp_collectives.py`): a pass "
      "over the full array each, read and written; the same test checks "
      "them. Our schedule gathers into and reduces from the flat "
      "buffers the kernels use, with no copy. Last, the profile has the "
      "peer's optimizer: torchtitan's default AdamW is PyTorch's foreach "
      "implementation (`torchtitan/optimizer.py`: `foreach` unless "
      "`--optimizer.fused`) after foreach gradient clipping (`train.py`, "
      "`max_norm = 1.0` in the train config), on fp32 sharded parameters, "
      "gradients and moments: `_foreach_norm` and `_foreach_mul_` of the "
      "clipping, then `_foreach_mul_` (weight decay), `_foreach_lerp_`, "
      "`_foreach_mul_`, `_foreach_addcmul_`, `_foreach_sqrt`, "
      "`_foreach_div_`, `_foreach_add_` and `_foreach_addcdiv_` "
      "(`torch/optim/adamw.py`, `_multi_tensor_adamw`), each a pass over "
      "the owned elements: 24 fp32 reads and writes an element, 96 bytes, "
      "against the 30 of our fused Adam (a bf16 copy of the parameters "
      "included), in 10 launches per 320 chunks of 65,536 elements "
      "(`multi_tensor_apply`); an Adam or AdamW step under the profile is "
      "priced so, and the same test checks it.\n\n"
      "`runtime=compiled` is that peer with each transformer block "
      "compiled, as torchtitan's `apply_compile` "
      "(`torchtitan/parallelisms/parallelize_llama.py`) compiles them: the "
      "ops in the blocks fused, the loss, which is outside them, FSDP2's "
      "copies and the foreach AdamW eager. The final norm is outside the "
      "blocks too but priced fused (at 8,192 tokens a sequence its chain "
      "is about 4 ms of a 2 s step).")
    w("")
    w("| op | the peer's code | eager kernels | bytes an element | fused: kernels, bytes |")
    w("|---|---|---|---:|---|")
    w("| `nn.rms_norm` | `RMSNorm.forward` (`torchtitan/models/norms.py`; "
      "`norm_type = \"rmsnorm\"` in `train_configs/llama3_8b.toml`) | 8: "
      "`x.float()`, `pow(2)`, `mean(-1)`, `+ eps`, `rsqrt`, `x * rsqrt`, "
      "`type_as(x)`, `* weight` | 36 | 1, 4 |")
    w("| `nn.rms_norm_grad` | autograd's backward of that chain | 16 | 92 "
      "| 1, 6 |")
    w("| `nn.rope` (and its inverse, the backward) | `apply_rotary_emb` "
      "(`torchtitan/models/llama/model.py`) | 3: "
      "`view_as_complex(x.float())`, `* freqs_cis`, `type_as(x)` | 20 | "
      "1, 4 |")
    w("| `nn.swiglu` | `FeedForward.forward`: `F.silu(w1(x)) * w3(x)` | 2 "
      "| 10 | 1, 6 |")
    w("| `nn.swiglu_grad` | `mul`'s backward twice, `silu_backward` | 3 | "
      "18 | 1, 10 |")
    w("| `nn.softmax_cross_entropy` | `loss_fn` (`train.py`): "
      "`cross_entropy(pred.float(), labels)`: the fp32 copy, "
      "`log_softmax`, `nll_loss` | 3 | 14 | 1, 2 |")
    w("| `nn.softmax_cross_entropy_grad` | `nll_loss`'s zeroed gradient "
      "and scatter, `log_softmax`'s backward, the copy's backward | 4 | "
      "22 | 1, 4 |")
    w("")
    w("Not in the profile:")
    w("")
    w("- Ops the peer runs as one kernel like ours: matrix products "
      "(cuBLAS), SDPA's flash attention, residual adds, the embedding, "
      "and in other models LayerNorm and GELU (one ATen kernel each).")
    w("- The layout copies around attention: our schedule copies the "
      "query, key and value into heads and the output back; torchtitan "
      "passes strided views of the query to SDPA but copies the key and "
      "value to all query heads (`repeat_kv`, expand and reshape) and the "
      "output back (`transpose(1, 2).contiguous()`): going in, 2.5 times "
      "a query's bytes against our 3 (with a quarter as many key/value "
      "heads as query heads), coming out the same. They are left as our "
      "schedule prices them.")
    w("- torchtitan's fp32 gradient reduction (`mixed_precision_reduce` "
      "defaults to `float32`, its only choice, in "
      "`torchtitan/config_manager.py`): a choice of the peer's schedule, "
      "not of its runtime, so it is an option of its own, "
      "`reduce-dtype=f32`, which doubles the bytes of the reduce-scatters "
      "and the completion's add, and under the profile makes the copy-in "
      "read the bf16 gradients and write fp32; the rows whose source "
      "reduces in fp32 take it, the torchtitan, llm-foundry and OLMo-core "
      "rows.")
    w("")
    compiled_runs = [r for r in runs
                     if "runtime=compiled" in (r.get("report") or "")]
    eager_runs_only = [r for r in eager_runs if r not in compiled_runs]
    w("Which rows use it: the torchtitan rows run without `torch.compile` "
      "(%s), and those with it under `runtime=compiled` (%s). The other "
      "eager rows are priced fused: llm-foundry's MPT "
      "runs LayerNorm and GELU (one kernel each) and TinyLlama fused "
      "RMSNorm, RoPE, SwiGLU and loss kernels, and the Llama modules of "
      "the PyTorch blog's, fms-fsdp's and XTuner's runs (IBM's fms, "
      "Hugging Face's) were not read for this page." % (
          ", ".join("`%s`" % r["id"] for r in eager_runs_only),
          ", ".join("`%s`" % r["id"] for r in compiled_runs)))
    w("")
    w("Our own runtime's efficiency is a separate question, measured only "
      "on one H100 so far (docs/benchmarks.md, the last table below).")
    w("")
    w("## Published runs")
    w("")
    w("tokens/s are per GPU; ratio = predicted / published throughput "
      "(above 1: we predict faster than was measured). Memory: our "
      "planned peak per rank against the published reading (torch's "
      "allocator figure, which includes its cache; not given by every "
      "source).")
    w("")
    w("| run | model | GPU (preset) | GPUs (per node) | batch: global / micro x seq | recompute | sharding | runtime | predicted step (ms) | predicted tokens/s | published tokens/s | ratio | predicted peak (GiB) | published memory (GiB) |")
    w("|---|---|---|---:|---|---|---|---|---:|---:|---:|---:|---:|---:|")
    ratios = {}
    for run in runs:
        p = predictions[run["id"]]
        pub = run["published"]
        ratio = p["tps"] / pub["tokens_per_s_per_gpu"]
        ratios[run["id"]] = ratio
        mem = pub.get("memory_gib")
        w("| `%s` | %s | %s (`%s`) | %d (%d) | %d / %d x %d%s | %s | %s | %s | %s | %s | %s | %.2f%s | %.1f | %s |" % (
            run["id"], run["model"], run["gpu"], run["preset"], run["gpus"],
            run["gpus_per_node"], run["global_batch"], run["micro_batch"],
            run["seq"],
            ", %d micro steps" % run["grad_accum"] if run["grad_accum"] > 1
            else "",
            run["recompute"], run["sharding"], run["runtime"],
            n(p["step_ms"]), n(p["tps"]), n(pub["tokens_per_s_per_gpu"]),
            ratio, "" if within(ratio) else " (off)", p["peak_gib"],
            "%.1f" % mem if mem is not None else "not given"))
    w("")
    good = [r for r in runs if within(ratios[r["id"]])]
    w("**%d of %d runs are within ±%d%% of their published throughput.**" % (
        len(good), len(runs), round(BAND * 100)))
    w("")
    groups = {}
    for run in runs:
        kind = gpu_of(run)
        groups.setdefault(kind, []).append(ratios[run["id"]])
    for kind in sorted(groups):
        rs = groups[kind]
        w("- %s runs: ratios %.2f to %.2f (%d runs, %d within the band)." % (
            kind, min(rs), max(rs), len(rs), sum(within(r) for r in rs)))
    w("")
    w("What the misses point to:")
    w("")
    h100 = [r for r in runs if not r["preset"].startswith("a100")]
    a100 = [r for r in runs if r["preset"].startswith("a100")]
    titan = [r for r in runs if r["preset"] == "h100-sxm-96gb"]
    w("- The torchtitan Llama 3.1 8B rows (ratios %.2f to %.2f, %d of %d "
      "within the band) are priced as torchtitan runs them, each part "
      "from its source: the op-level recomputation (`remat=op`), the "
      "eager chains of the eager rows and the eager loss of the compiled "
      "ones, FSDP2's copies, the foreach AdamW, the fp32 gradient "
      "reduction (`reduce-dtype=f32`), and the 500 W part's peak "
      "(`h100-sxm-96gb`). With the eager profile alone, before the "
      "compiled profile, the foreach AdamW, the fp32 reduction and the "
      "500 W peak, they were at 1.19-1.35 (\"What the peer options and "
      "the 500 W preset changed\", below)." % (
          min(ratios[r["id"]] for r in titan),
          max(ratios[r["id"]] for r in titan),
          sum(within(ratios[r["id"]]) for r in titan), len(titan)))
    op_runs = [r for r in runs if "remat=op" in r["pipeline"]]
    w("  - The recomputation: the torchtitan rows run "
      "torchtitan's own op-level policy, `remat=op` (its `_custom_policy` "
      "in `models/llama/parallelize_llama.py` saves the outputs of "
      "attention and of every second matrix product of a block and "
      "recomputes the rest; zero-remat's `policy=op` does the same). "
      "Against Megatron's `remat=selective` it recomputes three of a "
      "Llama block's seven matrix products instead of its attention, "
      "which at 8,192 tokens a sequence costs about the same: %s." % "; ".join(
          "`%s` %.1f ms a step under `remat=op` against %.1f under "
          "`remat=selective` (peak %.2f against %.2f GiB)" % (
              r["id"], predictions[r["id"]]["step_ms"],
              predictions[r["id"] + "/selective"]["step_ms"],
              predictions[r["id"]]["peak_gib"],
              predictions[r["id"] + "/selective"]["peak_gib"])
          for r in op_runs if r["gpus"] <= r["gpus_per_node"]
          and r["runtime"] == "eager"))
    for rid in breakdown_ids(data):
        run = [r for r in runs if r["id"] == rid][0]
        p, k = predictions[rid], predictions[rid + "/kernels"]["kernels"]
        f = predictions[rid + "/fused-kernels"]["kernels"]
        published_ms = (run["global_batch"] * run["seq"] / run["gpus"] /
                        run["published"]["tokens_per_s_per_gpu"] * 1e3)
        w("  - `%s` (%s) by kind of kernel (rank 0's compute stream in its "
          "predicted timeline): matrix products %.0f ms, attention %.0f "
          "ms, the other kernels %.0f ms (%.0f fused) of the %.0f ms step, "
          "against a published step of %.0f ms." % (
              rid, run["runtime"], k["matmul"], k["attention"], k["other"],
              f["other"], p["step_ms"], published_ms))
    w("  - The torchtitan H100s were 96 GB HBM2e parts capped at 500 W. "
      "No source gives their peak (torchtitan's footnote: between the "
      "SXM's 989 and the NVL's 835 TFLOP/s); `h100-sxm-96gb` takes 886, "
      "on the line between the SXM at 700 W and the NVL at 400 W "
      "(docs/HardwarePresets.md, \"The torchtitan hosts\"), which errs "
      "slow, and between the footnote's ends the rows' matrix products "
      "and attention would move by at most 989 / 835 = 1.18.")
    fast = [r for r in h100 if r not in titan and ratios[r["id"]] > 1]
    w("- The other H100 rows come out at %.2f to %.2f (%d of %d within "
      "the band; the published H100 runs report %s MFU)." % (
          min(ratios[r["id"]] for r in h100 if r not in titan),
          max(ratios[r["id"]] for r in h100 if r not in titan),
          sum(within(ratios[r["id"]]) for r in h100 if r not in titan),
          len([r for r in h100 if r not in titan]), mfu_range(h100)))
    w("- On A100 the matrix products run at the A100's own measured rate, "
      "267.9 of 312 TFLOP/s (before, the H100's 0.8 of the peak), and "
      "streaming kernels at its measured STREAM triad. The rows across "
      "nodes are dominated by communication exposed over the fabric: "
      "where the source does not state it (the torchtitan A100 rows, "
      "XTuner's 70B) the rows rerun the prediction at other rates, and "
      "where it does (fms-fsdp and the PyTorch blog at 400 Gb/s a node) "
      "the published step is close to the compute the prediction leaves, "
      "so the peers hid communication our schedule exposes there; each "
      "row's notes (\"Each run\", below) say which.")
    w("")
    w("## The band a report prints")
    w("")
    w("`zero-opt --zero-report` prints, beside a step predicted on a preset "
      "of a GPU in the table above, the step the published runs on that "
      "GPU would lead one to expect: the prediction times the smallest and "
      "the largest of their ratios (ratio = published step / predicted "
      "step). `zero-tune` calls a top candidate and the fastest within the "
      "band of each other when each one's predicted step lies within the "
      "other's band (the slower's predicted step is at most the fastest's "
      "times the largest ratio, and its predicted step times the smallest "
      "ratio at most the fastest's: within the last column's factor of the "
      "fastest), and then picks the one of them with the smallest peak. "
      "The script "
      "writes the bands to `lib/Dialect/Zero/Analysis/ValidationBands.inc` "
      "with this page; presets of other GPUs have none. The bands are "
      "those of the fused predictions, which a report prints by default: "
      "for the rows priced eager or compiled they take the fused ratio "
      "(\"What the eager profile changed\", below), not the table's, and "
      "a report under `runtime=eager` or `runtime=compiled` prints no "
      "band. A row's `reduce-dtype=f32` stays in its fused prediction: it "
      "is the peer's schedule, not its runtime.")
    w("")
    w("| GPU | presets | runs | smallest ratio | largest ratio | "
      "zero-tune's ties: within this factor of the fastest |")
    w("|---|---|---:|---:|---:|---:|")
    for gpu, b in sorted(bands(data, predictions).items()):
        lo, hi = min(b["ratios"]), max(b["ratios"])
        w("| %s | %s | %d | %.2f | %.2f | %.2f |" % (
            gpu, ", ".join("`%s`" % p for p in sorted(b["presets"])),
            len(b["ratios"]), lo, hi, min(hi, 1 / lo) if lo > 0 else hi))
    w("")
    w("## Our own runtime")
    w("")
    w("| run | model | GPU (preset) | batch x seq | runtime | predicted step (ms) | measured step (ms) | ratio: predicted / measured throughput | peer | peer step (ms) | ratio: predicted / peer throughput |")
    w("|---|---|---|---|---|---:|---:|---:|---|---:|---:|")
    for run in own:
        p = predictions[run["id"]]
        pub, peer = run["published"], run["peer"]
        w("| `%s` | %s | %s (`%s`) | %d x %d | %s | %.2f | %.2f | %.2f | %s | %.2f | %.2f |" % (
            run["id"], run["model"], run["gpu"], run["preset"],
            run["global_batch"], run["seq"], run["runtime"], p["step_ms"],
            pub["step_ms"], pub["step_ms"] / p["step_ms"], peer["runtime"],
            peer["step_ms"], peer["step_ms"] / p["step_ms"]))
    w("")
    for run in own:
        p = predictions[run["id"]]
        w("The one whole step of our own runtime measured on a GPU takes "
          "%.2f times the predicted step, and PyTorch eager's %.2f times. "
          "The rates by kernel family come largely from this step's own "
          "profile (the unaligned LM-head GEMMs over the 50,257-word "
          "vocabulary, the launch gap) and from FlashAttention-2's "
          "published rates, so this row checks them less than the others "
          "do; what remains is PyTorch's unfused elementwise kernels "
          "(above) and, for our runtime, its attention kernels, 1.9 times "
          "FlashAttention-2's time (docs/benchmarks.md)." % (
              run["published"]["step_ms"] / p["step_ms"],
              run["peer"]["step_ms"] / p["step_ms"]))
        w("")
    w("## What the rates by kernel family changed")
    w("")
    w("Against the flat 0.8 of the peak for every matrix product and for "
      "attention: attention now runs at 0.13-0.37 of the H100's peak "
      "instead of 0.8, which lengthens long-sequence steps most (the "
      "torchtitan rows at 8,192 tokens a sequence by about a quarter); "
      "small and unaligned GEMMs lose most of their rate (GPT-2 124M's "
      "step doubled); the A100 rows moved least. No byte and no CPU "
      "prediction moved. In docs/Report.md one `zero-tune` pick changed: "
      "Llama-3 70B on 64 H100s at 100 Gb/s links picks qgZ alone instead "
      "of hpZ 8 + qwZ + qgZ, because the longer compute of each rank's "
      "sequence now hides the parameter gathers that hpZ and qwZ shrink, "
      "while qwZ's quantizing passes still cost compute-stream time and "
      "hpZ's secondary copy memory (36.65 GiB a rank instead of 51.81); "
      "on 512 ranks the same links keep hpZ 8 + qwZ + qgZ. The other "
      "picks (stage, recomputation, offload, MiCS) are unchanged.")
    w("")
    w("## What the band changed in docs/Report.md")
    w("")
    w("With the band, `zero-tune` on `h100-sxm` no longer picks the fastest "
      "candidate where another within the band needs less memory. Of the "
      "picks in docs/Report.md (all on `h100-sxm`; the `l4` ones have no "
      "band and did not move), five changed, each to a plan whose step is "
      "within a few percent of the fastest's, far inside the band, and "
      "whose peak is smaller: GPT-2 1.5B on 8 GPUs takes stage 2 instead "
      "of stage 3 (its peak a fraction of a GiB smaller; stage 3 hid its "
      "gathers better); Llama-3 8B at 4,096 tokens takes 4 micro steps of "
      "one sequence instead of 2 of two (20 GiB less); the LoRA Llama-3 8B "
      "takes stage 2 instead of stage 0 (the adapters' optimizer states "
      "sharded); the LoRA Llama-3 70B takes 4 micro steps instead of one "
      "(about half the peak); and Llama-3 70B on 512 ranks at 100 Gb/s "
      "links takes qwZ + qgZ instead of hpZ 8 + qwZ + qgZ (no hpZ copy). "
      "The torchtitan rows' `remat=op` changed no pick: `zero-tune` "
      "searches none, selective and layer only. No byte of any plan moved, "
      "nor any predicted step: the band only reorders the ranking.")
    w("")
    w("## What the collectives by message size changed")
    w("")
    w("All-gathers and reduce-scatters within a node now move at the bus "
      "bandwidth nccl-tests published for their size on 8 GPUs "
      "(docs/HardwarePresets.md, \"Collectives by message size\") instead "
      "of the flat ring rate plus a latency a ring step. Against the flat "
      "model, one of a few KiB to a few tens of MiB now takes up to 1.65 "
      "times as long on H100 (the sweep is below what latency and plateau "
      "predict there), and one above about 64 MiB slightly less (no "
      "latency term on top of the plateau). The published runs gather and "
      "reduce whole layers of 1-70B models, tens to hundreds of MiB, so "
      "their steps moved little: on `h100-sxm` and `h100-sxm-96gb` they "
      "shortened by 0.04-0.26% (`titan-8b-h100x8` 1816.8 to 1815.2 ms, its "
      "exposed communication 109.8 to 108.3 ms); on A100 the sweep's "
      "plateau, 231.6 GB/s, is below the flat 0.81 x 300 = 243 GB/s, so "
      "those steps lengthened by 0.33-0.83% (`titan-8b-a100x64` 3284.7 to "
      "3304.3 ms). No row crossed the band's edge, and the bands moved by "
      "at most 0.005. All-reduces, all-to-alls, the level across nodes, "
      "the presets without a sweep and every CPU prediction are unchanged, "
      "and no byte moved. In docs/Report.md no `zero-tune` pick and no "
      "byte moved; the steps that moved most are those of one ring over "
      "many ranks with no node size (GPT-2 1.5B on 64 ranks at stage 3, "
      "65.9 to 76.8 ms; Llama-3 8B and 70B on 512 ranks, 1052 to 1123 and "
      "7373 to 7618 ms): a ring of n members sends chunks of 1/n of each "
      "array, which at 64 or 512 members fall where the sweep is "
      "latency-bound and below the flat model. The runs over nodes of 8 "
      "(\"Many nodes\") moved by under 0.1%.")
    w("")
    w("## What the eager profile changed")
    w("")
    w("The rows priced with `runtime=eager` or `runtime=compiled`, against "
      "their fused prediction (the default, and what the band and "
      "`zero-tune` use; both with the row's `reduce-dtype`):")
    w("")
    w("| run | runtime | fused step (ms) | eager or compiled step (ms) | ratio of steps | ratio, fused | ratio, eager or compiled |")
    w("|---|---|---:|---:|---:|---:|---:|")
    for run in eager_runs:
        p, q = predictions[run["id"]], predictions[run["id"] + "/fused"]
        pub = run["published"]["tokens_per_s_per_gpu"]
        w("| `%s` | %s | %s | %s | %.3f | %.2f%s | %.2f%s |" % (
            run["id"], run["runtime"], n(q["step_ms"]), n(p["step_ms"]),
            p["step_ms"] / q["step_ms"], q["tps"] / pub,
            "" if within(q["tps"] / pub) else " (off)", p["tps"] / pub,
            "" if within(p["tps"] / pub) else " (off)"))
    w("")
    w("Each eager row moved by the unfused chains of its blocks' two "
      "RMSNorms, two RoPEs and SwiGLU, forward, backward and recomputed, "
      "of the final norm and the fp32 loss over the 128,256-word "
      "vocabulary, by FSDP2's copies of each layer's parameters and "
      "gradients and by the foreach AdamW; each compiled row by the loss, "
      "the copies and the AdamW alone. They are bandwidth-bound kernels, "
      "which weigh less beside the A100's matrix products, so the A100 "
      "rows moved less. The exposed communication and the recomputation "
      "of each row are in \"Each run\" below. No byte, no memory peak and "
      "no CPU prediction moved.")
    w("")
    w("## What the peer options and the 500 W preset changed")
    w("")
    w("Since the eager profile alone, four changes, each from its source "
      "(docs/HardwarePresets.md and the rows' notes): the fp32 gradient "
      "reduction of the torchtitan, llm-foundry and OLMo-core rows "
      "(`reduce-dtype=f32`); the foreach AdamW and gradient clipping in "
      "the eager profile, and `runtime=compiled` for the torchtitan "
      "`torch.compile` rows, which before were priced fused whole; the "
      "500 W part's peak for `h100-sxm-96gb` (886 TFLOP/s for the 989 of "
      "the SXM); and the A100's own measured matmul rate and STREAM "
      "triad for the A100 presets. Ratios before (the page as it was, "
      "with the eager profile) and now:")
    w("")
    w("| run | ratio before | ratio now |")
    w("|---|---:|---:|")
    for run in runs:
        before = BEFORE.get(run["id"])
        w("| `%s` | %s | %.2f%s |" % (
            run["id"], "%.2f%s" % (before, "" if within(before) else
                                   " (off)") if before else "-",
            ratios[run["id"]], "" if within(ratios[run["id"]]) else " (off)"))
    w("")
    w("%d of %d rows were within the band, %d are now. The torchtitan "
      "Llama 3.1 8B rows on H100 moved most: the 500 W peak lengthens "
      "their matrix products and attention by 989 / 886 = 1.116; the fp32 "
      "reduction adds exposed communication (on `titan-8b-h100x8` 124 to "
      "170 ms, the last reduce-scatters of the backward and their "
      "copy-in, which nothing hides); the foreach AdamW 31 ms a step on 8 "
      "ranks. The A100 rows moved the other way where communication "
      "dominates: the fp32 reduction doubles their reduce-scatters over "
      "the assumed 4 x 100 Gb/s a node, while the measured matmul rate "
      "shortened every A100 compute step by up to 7%%. The bands moved "
      "with the fused ratios (\"The band a report prints\"): H100 0.84 "
      "to 1.57 before, A100 0.74 to 1.31." % (
          sum(within(b) for b in BEFORE.values()), len(BEFORE),
          sum(within(ratios[r["id"]]) for r in runs)))
    w("")
    hb = bands(data, predictions)["H100"]["ratios"]
    w("In docs/Report.md, whose predicted steps are all on `h100-sxm` and "
      "`l4` (no rate of either moved; its one `a100-40gb` report is read "
      "for its fit verdict only), no predicted step, no byte and no "
      "`zero-tune` pick changed; only the H100 band printed beside each "
      "prediction "
      "did, from 0.84-1.57 to %.2f-%.2f. `zero-tune`'s picks were "
      "re-examined by regenerating the page: its ties are within the "
      "smaller of the largest ratio and the inverse of the smallest, 1 / "
      "0.84 = 1.19 before and %.2f now, since the smallest, that of "
      "`blog-llama2-70b-h100x96` on `h100-sxm`, did not move, and the "
      "largest, the fused prediction of `titan-8b-h100x8`, stayed above "
      "it." % (min(hb), max(hb), min(max(hb), 1 / min(hb))))
    w("")
    w("## Each run")
    w("")
    w("The commands the generator runs (in a scratch directory), the "
      "predicted exposed communication and recomputation, and where every "
      "published figure was read.")
    w("")
    for run in runs + own:
        p = predictions[run["id"]]
        gen, opt = commands(run)
        w("### `%s`" % run["id"])
        w("")
        w("```sh")
        w(shell(gen))
        w(shell(opt))
        w("```")
        w("")
        extra = []
        if "mfu" in run["published"]:
            extra.append("published MFU %.1f%%" %
                         (100 * run["published"]["mfu"]))
        w("- Predicted: step %.1f ms, of it %.1f ms exposed communication "
          "and %.1f ms recomputation; peak %.2f GiB per rank%s." % (
              p["step_ms"], p["exposed_ms"], p["recompute_ms"],
              p["peak_gib"],
              "" if p["fits"] is None else
              (", fits" if p["fits"] else ", does not fit") +
              " the preset's memory"))
        w("- Published: %s tokens/s per GPU%s; precision %s." % (
            n(run["published"]["tokens_per_s_per_gpu"]),
            "".join("; " + e for e in extra), run["precision"]))
        for option in run.get("what_if", []):
            q = predictions[run["id"] + "/" + option]
            w("- With `%s` (an assumption the source leaves open): step "
              "%.1f ms, of it %.1f ms exposed communication; %s tokens/s "
              "per GPU, ratio %.2f." % (
                  option, q["step_ms"], q["exposed_ms"], n(q["tps"]),
                  q["tps"] / run["published"]["tokens_per_s_per_gpu"]))
        w("- Source: %s." % source(run))
        w("- Notes: %s." % run["notes"])
        w("")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true",
                   help="change nothing; exit 1 with a diff if the page is "
                   "stale")
    p.add_argument("--tools", default=os.path.join(ROOT, "build", "bin"),
                   help="directory of zero-model-gen and zero-opt")
    p.add_argument("--doc", default=DOC, help="the page (docs/CostModel.md)")
    p.add_argument("--bands", default=BANDS,
                   help="the report's validation bands "
                   "(lib/Dialect/Zero/Analysis/ValidationBands.inc)")
    p.add_argument("--data", default=DATA,
                   help="the runs (bench/published-runs.json)")
    p.add_argument("--workdir", help="scratch directory for the models "
                   "(default: a temporary one)")
    args = p.parse_args()
    with open(args.data) as f:
        data = json.load(f)
    workdir = args.workdir or tempfile.mkdtemp(prefix="costmodel-doc-")
    os.makedirs(workdir, exist_ok=True)
    try:
        predictions = {run["id"]: predict(run, args.tools, workdir)
                       for run in data["runs"] + data["own"]}
        for run in data["runs"]:
            if is_eager(run):
                predictions[run["id"] + "/fused"] = predict(
                    fused(run), args.tools, workdir)
            if run["id"] in breakdown_ids(data):
                predictions[run["id"] + "/kernels"] = predict(
                    run, args.tools, workdir, trace=run["id"] + ".trace.json")
                if is_eager(run):
                    predictions[run["id"] + "/fused-kernels"] = predict(
                        fused(run), args.tools, workdir,
                        trace=run["id"] + ".fused.trace.json")
            for option in run.get("what_if", []):
                predictions[run["id"] + "/" + option] = predict(
                    run, args.tools, workdir, report=option)
        # The op-policy rows under Megatron's selective policy, which the
        # page compares them with.
        for run in data["runs"]:
            if "remat=op" in run["pipeline"]:
                predictions[run["id"] + "/selective"] = predict(
                    run, args.tools, workdir,
                    run["pipeline"].replace("remat=op", "remat=selective"))
    except Failure as e:
        print("error: %s" % e, file=sys.stderr)
        return 2
    stale = 0
    for path, text, default, flag in (
            (args.doc, render(data, predictions) + "\n", DOC, "--doc"),
            (args.bands, render_bands(data, predictions), BANDS, "--bands")):
        old = open(path).read() if os.path.exists(path) else ""
        if text == old:
            continue
        if args.check:
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), text.splitlines(True), path,
                "regenerated"))
            print("%s differs from the tools' output; regenerate it with\n"
                  "python3 scripts/update-costmodel-doc.py%s (from the "
                  "repository root)" % (
                      path, "" if os.path.abspath(path) == default else
                      " %s %s" % (flag, path)))
            stale = 1
            continue
        with open(path, "w") as f:
            f.write(text)
    return stale


if __name__ == "__main__":
    sys.exit(main())
