"""The sections of update_docs.py that compare with other frameworks: the
peers' tables, ZeRO++ and long context."""

from update_docs_common import load, ok


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


def run_line(doc):
    """The machine and the load of a CPU benchmark's run, the first words of
    its section."""
    m = doc["machine"]
    return ("Machine: %d cores, `%s` (lscpu model name), CPU backend. Run of "
            "%s UTC, load average (1/5/15 min) %s at the start, %s at the "
            "end. " % (m["nproc"], m["cpu"], doc["date"],
                       "/".join(doc["loadavg"]), "/".join(doc["loadavg_end"])))


def sec_zeropp(r):
    """bench/zeropp.py: ZeRO++ and MiCS step times on 2 x 2 CPU ranks."""
    doc = load(r, "zeropp.json")
    if not doc:
        return None
    out = [run_line(doc) +
           "`%s` with `%s`, 4 ranks as 2 nodes of 2 (`--ranks-per-node "
           "2`, `--threads 1`), `--steps %d`: median `step_ms` (slowest "
           "rank) of steps %d-%d, median over %d rounds, the options in a "
           "rotating order each round; the ratio is the median of each "
           "round's ratio to ZeRO-3. Bytes per rank and step: the plan's "
           "(zero-report) and rank 0's measured." % (
               doc["model"], doc["common"],
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
    out = [run_line(doc) +
           "`%s` with the model flags below, 2 ranks (`--threads 1`), "
           "`--steps %d`: median `step_ms` (slowest rank) of steps %d-%d, "
           "median over %d rounds, the executables in a rotating order "
           "each round; the ratio is the median of each round's ratio to "
           "the first row of its table. Peak bytes are rank 0's, planned "
           "and measured." % (
               doc["model"], doc["steps"],
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


def sec_packing(r):
    """bench/packing.py: packed rows against one document a padded row on 2
    CPU ranks."""
    doc = load(r, "packing.json")
    if not doc:
        return None
    out = [run_line(doc) +
           "%d source files of this repository as documents, rows of "
           "%d tokens; %s, 2 ranks (`--threads 1`), `--steps %d`: the time "
           "a row over steps %d-%d, median over %d rounds; the rate is the "
           "same documents' tokens over the time all their rows take at "
           "that pace, the ratio the median of each round's ratio." % (
               doc["documents"], doc["seq"],
               doc["model"], doc["steps"], doc["warmup"] + 1, doc["steps"],
               doc["rounds"]),
           "",
           "| rows | rows of %d | tokens | fill | tokens/s | ratio |" %
           doc["seq"],
           "|---|---:|---:|---:|---:|---:|"]
    names = {"packed": "packed (`zero-data --pack`)",
             "padded": "one document a row (`--pack-window 1`)"}
    for name in ("padded", "packed"):
        l = doc["layouts"][name]
        out.append("| %s | %d | %d | %.1f%% | %.0f | %s |" % (
            names[name], l["rows"], l["tokens"], 100 * l["fill"],
            l["tokens_per_s"], "%.2f" % doc["ratio"] if name == "packed"
            else "1"))
    return "\n".join(out)


def sec_streaming(r):
    """bench/streaming.py: a 124M model's weights streamed out of a session
    on 2 CPU ranks."""
    doc = load(r, "streaming.json")
    if not doc:
        return None
    out = [run_line(doc) +
           "%s: %d bytes of fp32 parameters, each pass after a step and a "
           "warm-up pass, median over %d rounds (rank 0's time, the "
           "collectives' end). The gathers go through host memory: the "
           "device peak stayed the plan's (%d measured, %d planned); "
           "\"held\" is the most bytes of gathered tensors the stream kept "
           "at once (engine.stream_peak_bytes)." % (
               doc["model"], doc["parameter_bytes"], doc["rounds"],
               doc["device_peak_bytes"], doc["planned_peak_bytes"]),
           "",
           "| named_parameters | held (bytes) | seconds | GB/s |",
           "|---|---:|---:|---:|"]
    for c in doc["cases"]:
        out.append("| %s | %d | %.3f | %.2f |" % (
            c["case"], c["held_bytes"], c["seconds"], c["gb_per_s"]))
    return "\n".join(out)
