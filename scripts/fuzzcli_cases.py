"""The cases fuzz-cli.py runs: a valid-looking command line and input
files for each surface (the generators), then mutated: hostile option
values, JSON trees and bytes."""

import base64
import copy
import json


HOSTILE_VALUES = ["0", "-1", "1.5", "1e30", "nan", "inf", "-inf", "", "x",
                  "x" * 5000, "\u00e9" * 300, "9223372036854775807",
                  "9223372036854775808", "-9223372036854775809",
                  "18446744073709551616", "0x10", " 1", "1 ", "\uff12",
                  "-", "true", "false", "1,2", "1e-30", "\udcff", "a=b",
                  "..", "/", "1KiB", "-1GiB", "1e30GiB"]
BOOL_VALUES = ["yes", "2", "", "true", "false", "0", "1", "TRUE", "x"]


def mutate_argv(rng, argv, names, pool):
    """1-3 of: drop, duplicate, swap, replace a value, another option's
    name, a flag given a value, a missing value at the end, --a=b split or
    joined, a misspelled option. Insertions go between options, so that
    most mutants differ from a valid line in one place."""
    argv = list(argv)
    for _ in range(rng.choice((1, 1, 1, 1, 2, 2, 3))):
        op = rng.randrange(11)
        n = len(argv)
        i = rng.randrange(n) if n else 0
        # Where an option starts (or the end): a place to insert at.
        b = rng.choice([j for j in range(n) if argv[j].startswith("-")] +
                       [n])
        if op == 0 and n:
            # Drop an element, or an option with its value.
            k = 2 if argv[i].startswith("-") and i + 1 < n and \
                not argv[i + 1].startswith("-") and rng.random() < 0.5 else 1
            del argv[i:i + k]
        elif op == 1 and b < n:
            k = 2 if b + 1 < n and not argv[b + 1].startswith("-") else 1
            argv[b:b] = argv[b:b + k]
        elif op == 2 and n > 1:
            j = rng.randrange(n)
            argv[i], argv[j] = argv[j], argv[i]
        elif op in (3, 4) and n:
            values = [j for j, a in enumerate(argv) if not a.startswith("-")
                      or "=" in a]
            if values:
                j = rng.choice(values)
                v = rng.choice(HOSTILE_VALUES if rng.random() < 0.6 else pool)
                argv[j] = argv[j].split("=", 1)[0] + "=" + v \
                    if argv[j].startswith("-") else v
        elif op == 5:
            extra = [rng.choice(names)]
            if rng.random() < 0.6:
                extra.append(rng.choice(pool + HOSTILE_VALUES))
            argv[b:b] = extra
        elif op == 6:
            name = rng.choice(names)
            v = rng.choice(BOOL_VALUES)
            argv[b:b] = [name + "=" + v] if rng.random() < 0.5 else [name, v]
        elif op == 7:
            argv.append(rng.choice(names))
        elif op == 8 and n:
            a = argv[i]
            if a.startswith("-") and "=" in a:
                argv[i:i + 1] = a.split("=", 1)
            elif a.startswith("-") and i + 1 < n:
                argv[i:i + 2] = [a + "=" + argv[i + 1]]
        elif op == 9 and n and argv[i].startswith("--"):
            a = argv[i]
            argv[i] = rng.choice((a[1:], "-" + a, a.upper(), a[:-1], a + "=",
                                  a + "x"))
        elif op == 10 and n:
            # Another option's name where a name or a value was.
            argv[i] = rng.choice(names)
    return argv


def hostile_json_value(rng, old):
    # A copy: `old` may be an ancestor of where the value goes.
    old = copy.deepcopy(old)
    kind = rng.randrange(10)
    if kind == 0:
        return rng.choice(("x", "", "1", "true", "null", "auto", "nan",
                           "\u00e9", "\udcff"))
    if kind == 1:
        return rng.choice((1.5, -0.0, 0.5, 1e-30, float("nan"),
                           float("inf"), -float("inf")))
    if kind == 2:
        return rng.choice((True, False))
    if kind == 3:
        return None
    if kind == 4:
        return rng.choice(([], [old], [old, old], [[]]))
    if kind == 5:
        return rng.choice(({}, {"x": old}))
    if kind == 6:
        return rng.choice((0, -1, -2, -2 ** 31, -2 ** 63, -2 ** 64))
    if kind == 7:
        return rng.choice((2 ** 31, 2 ** 32, 2 ** 63 - 1, 2 ** 63, 2 ** 64,
                           10 ** 12, 10 ** 30, 1e30, 1e308))
    if isinstance(old, bool):
        return not old
    if isinstance(old, (int, float)):
        return rng.choice((old + 1, old - 1, -old, old * 2 ** 20, old * 1000,
                           old / 2 if isinstance(old, float) else old // 2))
    if isinstance(old, str):
        return rng.choice((old.upper(), old + "x", old[:-1], old * 100))
    return old


def json_nodes(tree, path=()):
    yield path, tree
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from json_nodes(v, path + (k,))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from json_nodes(v, path + (i,))


def json_keys(tree):
    return sorted({k for p, _ in json_nodes(tree) for k in p
                   if isinstance(k, str)})


def mutate_json(rng, tree, extra_keys=()):
    """1-3 of: a value of another type, a negative, zero or huge number,
    a deleted key, an unknown (or misplaced) key, a subtree grafted
    elsewhere."""
    tree = copy.deepcopy(tree)
    keys = json_keys(tree) + list(extra_keys) + ["x", "zero_mlir_x", ""]
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
        nodes = list(json_nodes(tree))
        path, value = rng.choice(nodes)
        op = rng.randrange(4)
        if not path:
            if op == 0 and isinstance(tree, dict):
                tree[rng.choice(keys)] = hostile_json_value(rng, 1)
            continue
        parent = tree
        for k in path[:-1]:
            parent = parent[k]
        last = path[-1]
        if op == 0 and isinstance(parent, dict):
            del parent[last]
        elif op == 1 and any(isinstance(v, dict) for _, v in nodes):
            dicts = [v for _, v in nodes if isinstance(v, dict)]
            rng.choice(dicts)[rng.choice(keys)] = \
                copy.deepcopy(rng.choice(nodes)[1]) if rng.random() < 0.3 \
                else hostile_json_value(rng, value)
        elif op == 2:
            parent[last] = copy.deepcopy(rng.choice(nodes)[1])
        else:
            parent[last] = hostile_json_value(rng, value)
    return tree


def mutate_bytes(rng, data):
    """A text-level mutation of a file: truncated, invalid UTF-8, deep
    nesting, a byte order mark, trailing garbage, empty, CRLF."""
    op = rng.randrange(8)
    n = len(data)
    i = rng.randrange(n + 1)
    if op == 0:
        return data[:i]
    if op == 1:
        # Inside a string where there is one: a name or value, not syntax.
        q = data.find(b'"', i)
        j = q + 1 if q >= 0 else i
        return data[:j] + rng.choice((b"\xff", b"\xc3", b"\xed\xa0\x80",
                                      b"\xc0\xaf", b"\x00")) + data[j:]
    if op == 2:
        depth = rng.choice((100, 1000, 5000, 100000))
        nest = b"[" * depth + b"]" * depth if rng.random() < 0.5 else \
            b'{"a":' * depth + b"1" + b"}" * depth
        j = data.find(b":", i)
        if j < 0:
            return data[:i] + nest + data[i:]
        end = j + 1
        while end < n and data[end:end + 1] not in b",}\n":
            end += 1
        return data[:j + 1] + b" " + nest + data[end:]
    if op == 3:
        return b"\xef\xbb\xbf" + data
    if op == 4:
        return data + rng.choice((b"}", b"]", b"x", b"\n{}", b",", b"\x00"))
    if op == 5:
        return b""
    if op == 6:
        return data.replace(b"\n", b"\r\n")
    return data[:i] + data[i:i + 50] + data[i:]


def dump_json(rng, tree):
    try:
        return json.dumps(tree, indent=rng.choice((None, 2))).encode(
            "utf-8", "surrogateescape")
    except (ValueError, RecursionError):
        return b"{}"


def file_spec(data):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


# ----------------------------------------------------------------------------
# Generators: a valid-looking case of each surface, then mutated
# ----------------------------------------------------------------------------

GPT2 = {"copy": "%src/examples/gpt2-tiny.mlir"}
MOE = {"copy": "%src/test/E2E/Inputs/moe_model.mlir"}
SPEC_LLAMA = {"model_gen": ["llama", "--layers", "2", "--hidden", "64",
                            "--heads", "4", "--kv-heads", "2", "--ffn", "128",
                            "--vocab", "256", "--seq", "64", "--batch", "1",
                            "--record-spec"]}

DS_CONFIGS = [
    {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
     "gradient_accumulation_steps": 2, "gradient_clipping": 1.0,
     "fp16": {"enabled": True, "initial_scale_power": 12,
              "loss_scale_window": 500, "hysteresis": 3, "min_loss_scale": 1},
     "optimizer": {"type": "AdamW", "params": {
         "lr": 3e-4, "betas": [0.9, 0.95], "eps": 1e-8,
         "weight_decay": 0.1}},
     "zero_optimization": {
         "stage": 2, "reduce_bucket_size": 1e5, "allgather_bucket_size": 2e5,
         "overlap_comm": True, "reduce_scatter": False,
         "contiguous_gradients": True,
         "offload_optimizer": {"device": "none", "pin_memory": True}}},
    {"bf16": {"enabled": "auto"},
     "optimizer": {"type": "AdamW", "params": {
         "lr": "auto", "betas": "auto", "eps": "auto",
         "weight_decay": "auto"}},
     "scheduler": {"type": "WarmupLR", "params": {
         "warmup_min_lr": "auto", "warmup_max_lr": "auto",
         "warmup_num_steps": "auto"}},
     "zero_optimization": {
         "stage": 3, "offload_optimizer": {"device": "cpu",
                                           "pin_memory": True},
         "offload_param": {"device": "none"}, "overlap_comm": True,
         "sub_group_size": 1e9, "reduce_bucket_size": "auto",
         "stage3_prefetch_bucket_size": "auto",
         "stage3_param_persistence_threshold": "auto",
         "stage3_max_live_parameters": 1e9,
         "stage3_max_reuse_distance": 1e9,
         "zero_hpz_partition_size": 1, "mics_shard_size": -1},
     "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
     "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
     "activation_checkpointing": {"partition_activations": False,
                                  "cpu_checkpointing": False},
     "wall_clock_breakdown": False},
    {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
     "bf16": {"enabled": True, "bf16_master_weights_and_grads": False},
     "optimizer": {"type": "Adam", "params": {"lr": 1e-3}},
     "scheduler": {"type": "WarmupDecayLR", "params": {
         "warmup_num_steps": 10, "total_num_steps": 100}},
     "zero_optimization": {"stage": 1, "overlap_comm": False},
     "expert_parallel": {"enabled": True, "autoep_size": 2},
     "sequence_parallel_size": 1,
     "zero_mlir_optimizer_states": "bf16", "zero_mlir_loss_chunk": 0,
     "zero_mlir_tiled_mlp": 0, "zero_mlir_frozen_gather": "once",
     "tensorboard": {"enabled": False}, "prescale_gradients": False},
]

COMPILE_OPTIONS = [
    ["--overlap-comm"], ["--reduce-bucket-size", "1000"],
    ["--gradient-accumulation-steps", "2"],
    ["--remat", ("none", "layer", "selective", "op", "auto")],
    ["--memory-budget", ("64MiB", "1GiB", "100KiB")],
    ["--offload-optimizer", ("cpu", "none")], ["--loss-chunk", "64"],
    ["--pad-vocab", "64"], ["--dtype", ("bf16", "fp16", "auto")],
    ["--optimizer-states", ("bf16", "int8")],
    ["--lr-schedule", ("WarmupLR:warmup_num_steps=10", "none")],
    ["--hardware", ("h100-sxm", "cpu")], ["--verify"],
    ["--ranks-per-node", "2"], ["--fuse-bias-activation"],
    ["--tiled-mlp", "2"], ["--sp-size", "2"], ["--hpz-partition-size", "2"],
    ["--quantized-weights"], ["--quantized-gradients"],
    ["--mics-shard-size", "2"], ["--prefetch-bucket-size", "1000"],
    ["--param-persistence-threshold", "100"],
    ["--offload-param", ("cpu", "none")], ["--gradient-clipping", "1.0"],
    ["--bias-correction", "false"], ["--no-decay-bias-norm"],
    ["--no-decay-embeddings"], ["--elastic-micro-batch", "2"],
    ["--frozen-gather", "once"], ["--alignment", "8"],
    ["--allgather-bucket-size", "1000"], ["--max-live-parameters", "1000"],
    ["--max-reuse-distance", "1000"], ["--inter-node-bandwidth", "400"],
    ["--offload-activations", ("cpu", "auto")], ["--contiguous-gradients"],
    ["--reduce-scatter=false"], ["--bf16-masters", "true"],
]
MOE_OPTIONS = [["--ep-size", ("2", "4")], ["--moe-capacity-factor", "1.5"],
               ["--moe-drop-tokens"], ["--ep-placement", "strided"]]
TUNE_OPTIONS = [
    ["--remat", ("auto", "none", "selective", "layer")],
    ["--loss-chunk", ("auto", "0", "64")], ["--sp-size", ("auto", "2")],
    ["--tiled-mlp", ("auto", "0", "2")],
    ["--offload-activations", ("auto", "none", "cpu")],
    ["--offload", ("cpu", "none")], ["--offload", "nvme", "--nvme-path", "sw"],
    ["--host-budget", "1GiB"], ["--top", ("1", "3")],
    ["--format", ("json", "text")], ["-o", "best.json"],
    ["--optimizer-states", ("int8", "bf16")], ["--ranks-per-node", "2"],
    ["--zeropp"], ["--within-band", "false"],
    ["--inter-node-bandwidth", "400Gb/s"],
]
ESTIMATE_OPTIONS = [
    ["--cpu-offload"], ["--cpu-offload-params"],
    ["--dtype", ("bf16", "fp16", "fp32")],
    ["--format", ("json", "text")], ["--hardware", ("h100-sxm", "cpu")],
    ["--device-memory", "24GiB"], ["--nodes", "2"],
    ["--gpus-per-node", ("8", "2")], ["--zero-init"], ["--no-zero-init"],
    ["--additional-buffer-factor", ("2.0", "2")], ["--overlap-comm"],
    ["--reduce-bucket-size", "1000"], ["--prefetch-bucket-size", "0"],
    ["--alignment", "8"], ["--inter-node-bandwidth", "400"],
    ["--allgather-bucket-size", "1000"],
]
NUMBER_ESTIMATE_OPTIONS = [["--optimizer", ("adam", "muon", "lion", "sgd",
                                            "adafactor")], ["--bf16-masters"]]
POOL = ["0", "1", "2", "3", "4", "8", "1000", "auto", "none", "cpu", "nvme",
        "layer", "selective", "json", "text", "64MiB", "1GiB", "h100-sxm",
        "bf16", "fp16", "f32", "int8", "true", "false", "once", "strided",
        "ds.json", "model.mlir", "out.mlir", "best.json", "out.npy",
        "ids.npy", "a.txt", "p.jsonl", "tok", "m"]


def pick_options(rng, table, k):
    argv = []
    for opt in rng.sample(table, min(k, len(table))):
        for a in opt:
            argv.append(rng.choice(a) if isinstance(a, tuple) else a)
    return argv


def gen_compile(rng, names):
    moe = rng.random() < 0.4
    files = {"model.mlir": MOE if moe else GPT2}
    argv = ["model.mlir", "--stage", str(rng.randrange(4)),
            "--world-size", rng.choice(("1", "2", "4", "2"))]
    table = COMPILE_OPTIONS + (MOE_OPTIONS * 3 if moe else [])
    argv += pick_options(rng, table, rng.randrange(5))
    if rng.random() < 0.5:
        ds = rng.choice(DS_CONFIGS)
        data = dump_json(rng, mutate_json(rng, ds) if rng.random() < 0.8
                         else ds)
        if rng.random() < 0.15:
            data = mutate_bytes(rng, data)
        files["ds.json"] = file_spec(data)
        argv += ["--config", "ds.json"]
    argv += ["-o", "out.mlir"]
    if rng.random() < 0.7:
        argv = mutate_argv(rng, argv, names, POOL)
    # --emit mlir first, never mutated: nothing is linked.
    return {"surface": "compile", "argv": ["--emit", "mlir"] + argv,
            "files": files}


def gen_tune(rng, names):
    which = rng.choice(("gpt2", "gpt2", "moe", "spec"))
    files = {"model.mlir": {"gpt2": GPT2, "moe": MOE,
                            "spec": SPEC_LLAMA}[which]}
    argv = ["model.mlir", "--world-size", rng.choice(("1", "2", "4")),
            "--hardware", rng.choice(("cpu", "h100-sxm", "a100-40gb")),
            "--memory-budget", rng.choice(("64MiB", "1GiB", "16MiB"))]
    table = TUNE_OPTIONS + ([["--ep-size", ("auto", "2")]] if which == "moe"
                            else [])
    if which == "spec":
        argv[2], argv[4], argv[6] = "1", "cpu", "16MiB"
        argv += ["--max-seq", "--seq-multiple", "64"]
        table = [t for t in table if t[0] not in ("--zeropp", "--offload")]
    argv += pick_options(rng, table, rng.randrange(4))
    if rng.random() < 0.7:
        argv = mutate_argv(rng, argv, names, POOL)
    return {"surface": "tune", "argv": argv, "files": files}


def gen_estimate(rng, names):
    files = {}
    if rng.random() < 0.5:
        moe = rng.random() < 0.4
        files["model.mlir"] = MOE if moe else GPT2
        argv = ["model.mlir", "--stage", str(rng.randrange(4))]
        table = ESTIMATE_OPTIONS + [["--zeropp"], ["--nodes", "2",
                                                   "--gpus-per-node", "2"]] \
            + ([["--ep-size", "2"]] if moe else [])
    else:
        argv = ["--params", rng.choice(("1000000", "7000000000")),
                "--stage", str(rng.randrange(4)),
                "--largest-layer-params", "1000"]
        table = ESTIMATE_OPTIONS + NUMBER_ESTIMATE_OPTIONS
    argv += pick_options(rng, table, rng.randrange(5))
    if rng.random() < 0.7:
        argv = mutate_argv(rng, argv, names, POOL)
    return {"surface": "estimate", "argv": argv, "files": files}


DATA_ROWS = {
    "p.jsonl": [{"prompt": "hi", "response": "hello"},
                {"prompt": "how are you", "response": "fine"}],
    "c.jsonl": [{"messages": [{"role": "user", "content": "hi"},
                              {"role": "assistant", "content": "hello"}]}],
    "t.jsonl": [{"text": "the cat sat on the mat"}, {"text": "a dog"}],
}


def gen_data(rng, names, tok_config):
    files = {"tok": {"copy": "%tok"}, "a.txt": "the cat sat\n"}
    for name, rows in DATA_ROWS.items():
        files[name] = "".join(json.dumps(r) + "\n" for r in rows)
    if rng.random() < 0.5:
        argv = ["tokens", "--tokenizer", "tok", "a.txt", "t.jsonl",
                "-o", "out.npy"] + (["--text-field", "text"]
                                    if rng.random() < 0.3 else [])
    else:
        argv = ["sft", "--tokenizer", "tok",
                rng.choice(("p.jsonl", "c.jsonl")), "--seq",
                rng.choice(("4", "16", "32"))]
        argv += pick_options(rng, [["--truncate"], ["--ids", "i.npy"],
                                   ["--labels", "l.npy"],
                                   ["--prompt-field", "prompt"],
                                   ["--messages-field", "messages"]],
                             rng.randrange(3))
    # The input files' contents, rows as JSON or as bytes.
    for name in rng.sample(sorted(DATA_ROWS) + ["a.txt"], rng.randrange(3)):
        if name in DATA_ROWS and rng.random() < 0.7:
            rows = mutate_json(rng, DATA_ROWS[name])
            rows = rows if isinstance(rows, list) else [rows]
            files[name] = file_spec(b"".join(dump_json(rng, r).replace(
                b"\n", b"") + b"\n" for r in rows))
        else:
            data = files[name].encode()
            files[name] = file_spec(mutate_bytes(rng, data))
    if tok_config and rng.random() < 0.1:
        # The tokenizer's own config, as a hostile download would have it.
        files["tok/tokenizer_config.json"] = file_spec(
            dump_json(rng, mutate_json(rng, tok_config)))
    if rng.random() < 0.7:
        argv = mutate_argv(rng, argv, names, POOL)
    return {"surface": "data", "argv": argv, "files": files}


# The counts the import loops over: a deeper model, or one with more
# experts, only takes longer (128 layers pass the timeout on a loaded
# machine), so the generator keeps them small.
LOOP_COUNTS = {"num_hidden_layers": 4, "n_layer": 4, "num_local_experts": 16,
               "num_experts": 16, "n_routed_experts": 16}


def gen_import(rng, names, configs):
    family = rng.choice(sorted(configs))
    config = configs[family]
    files = {}
    if rng.random() < 0.9:
        other = [k for c in configs.values() for k in c]
        config = mutate_json(rng, config, other)
        for key, most in LOOP_COUNTS.items():
            v = config.get(key) if isinstance(config, dict) else None
            if isinstance(v, int) and not isinstance(v, bool) and v > most:
                config[key] = most
        data = dump_json(rng, config)
        if rng.random() < 0.15:
            data = mutate_bytes(rng, data)
        files["m/config.json"] = file_spec(data)
    else:
        files["m/config.json"] = {"config": family}
    argv = ["--hf", "m", "--batch", rng.choice(("1", "2")), "--seq",
            rng.choice(("8", "16")), "-o", "m.mlir"]
    # Weights only for small sizes: from_config allocates them.
    if rng.random() < 0.8:
        argv.append("--no-weights")
    if rng.random() < 0.15:
        ds = rng.choice(DS_CONFIGS)
        files["ds.json"] = file_spec(dump_json(rng, mutate_json(rng, ds)))
        argv += ["--config", "ds.json"]
    if rng.random() < 0.3:
        argv = mutate_argv(rng, argv, names, POOL)
    return {"surface": "import", "argv": argv, "files": files}
