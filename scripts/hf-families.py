#!/usr/bin/env python3
"""Transformers' causal language model families: which train here exactly,
which the importer refuses and with what (the table of docs/Tutorial.md,
section 6).

Each entry of transformers' own list, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, is
built by transformers' class from a tiny config (tiny_config: its default
config with vocabulary 256, width 64, 2 layers, 4 heads, 2 key/value heads,
feed-forward 128, 128 positions, dropout 0, no cache, under the config's
own attribute names; OVERRIDES says where a family needs more), seeded,
saved by save_pretrained and imported as `zero-import --hf DIR --batch 4
--seq 32` does, in this one process. The importer's own error
(ImportFailure) is a refusal, which the table quotes; any other exception
is a crash, a bug of the importer. The category comes from the config and
the modules built (classify).

  hf-families.py [--only F,...]        print the survey as the table
  hf-families.py --write DOC           rewrite DOC's table (between the
                                       hf-families markers)
  hf-families.py --check DOC           exit 1 with a diff when DOC's table
                                       is not what the importer does now
  hf-families.py --train [--only F,...] [--write DOC]
                                       also train each family that imports:
                                       stage 0 on one rank and stage 3 on
                                       two, its losses against transformers'
                                       own, the --export-hf directory
                                       loaded back (train_one)
  --json FILE / --survey FILE          write the survey's rows / read them
                                       instead of surveying again
  --survey FILE --train --only F,... --write DOC
                                       retrain these families only; the
                                       other rows keep DOC's verdicts

A row's "trains exactly" is what the last --train run found; --write
without --train keeps it while the family still imports, and says
"imports (training not checked)" for one that newly imports. --check
compares what the survey can see: imports, refused (the message), crash.

Run it with the project's Python (.venv/bin/python, or ZERO_PYTHON): it
needs torch and transformers, and for --train the built tools (--tools,
default build/bin) and mpirun.
"""

import argparse
import contextlib
import dataclasses
import difflib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DOC = os.path.join(ROOT, "docs", "Tutorial.md")
BEGIN = ("<!-- hf-families:begin (scripts/hf-families.py --write "
         "docs/Tutorial.md) -->")
END = "<!-- hf-families:end -->"

BATCH, SEQ = 4, 32

# The tiny sizes, each under the names configs give it (through their
# attribute_map where they have one).
SIZES = [
    (256, ("vocab_size",)),
    (64, ("hidden_size", "n_embd", "d_model", "dim", "embed_dim")),
    (2, ("num_hidden_layers", "n_layer", "n_layers", "num_layers",
         "decoder_layers")),
    (4, ("num_attention_heads", "n_head", "n_heads", "num_heads",
         "decoder_attention_heads")),
    (2, ("num_key_value_heads", "num_kv_heads", "n_kv_heads")),
    (128, ("intermediate_size", "n_inner", "ffn_dim", "dff", "d_ff",
           "decoder_ffn_dim", "ffn_hidden_size")),
    (128, ("max_position_embeddings", "n_positions", "n_ctx",
           "max_seq_len", "seq_length")),
    (16, ("head_dim",)),
]
WINDOWS = ("sliding_window", "window_size", "attention_window_size",
           "sliding_window_size")
# Mixture-of-experts sizes, so that MoE families build in a moment.
EXPERTS = ("num_experts", "num_local_experts", "n_routed_experts",
           "moe_num_experts")
EXPERTS_PER_TOKEN = ("num_experts_per_tok", "moe_topk", "moe_k",
                     "top_k_experts")

# Per-family settings beyond the generic ones, each with why.
ROPE = {"rope_type": "default", "rope_theta": 10000.0}
# A sliding window of 8 of the 32 tokens, so that it cuts.
WINDOW = ({"sliding_window": 8}, "a sliding window shorter than the "
          "sequence")
# Gemma 4's full-attention layers' own head size (a constructor argument,
# not a config field, so not among SIZES), tiny like the others: its
# default 512 gives those layers 8 times the width of the rest.
GEMMA4 = ({"global_head_dim": 32}, "the full-attention layers' head tiny "
          "too (default 512)")
# Granite-SWA: its full-attention layer without rotary embedding (NoPE,
# rope_theta 0), its sliding one windowed within the sequence.
GRANITE_SWA = ({"sliding_window": 8, "layer_rope_theta": [0.0, 10000.0]},
               "a NoPE layer and a sliding window shorter than the "
               "sequence, which its default lacks")
OVERRIDES = {
    "cohere_compass_text": (
        {"rope_parameters": {"full_attention": ROPE}},
        "rotary parameters per layer kind, which its default config lacks"),
    "codegen": ({"rotary_dim": 4}, "rotary on a quarter of each head, as its "
                "default 64 of 256"),
    "dbrx": ({"attn_config": {"kv_n_heads": 2, "rope_theta": 10000.0,
                              "clip_qkv": 8.0},
              "ffn_config": {"ffn_hidden_size": 32, "moe_num_experts": 4,
                             "moe_top_k": 2}},
             "its sizes are in sub-configs; the attention's lacks the "
             "rope_theta the model reads, and clamps with no bound"),
    "dots1": ({"n_shared_experts": 1}, "its default has no shared expert "
              "count (None), which the model multiplies"),
    "dots3_note_text": ({"num_key_value_heads": 4},
                        "its config requires as many key/value heads as "
                        "query heads"),
    "flint": ({"mlp_only_layers": [0]},
              "its first two layers are dense by default: one of two here"),
    "gemma2": WINDOW,
    "gemma3_text": WINDOW,
    "gemma4_text": GEMMA4,
    "gemma4_unified_text": GEMMA4,
    "gemma3n_text": ({"num_kv_shared_layers": 0},
                     "the default shares the key/value cache of 15 layers"),
    "gpt_neo": ({"attention_types": [[["global", "local"], 1]],
                 "window_size": 8},
                "its layer kinds, given as a pattern of 24 layers; a local "
                "window shorter than the sequence"),
    "gptj": ({"rotary_dim": 4}, "rotary on a quarter of each head, as its "
             "default 64 of 256"),
    "granite_swa": GRANITE_SWA,
    "granitemoe_swa": GRANITE_SWA,
    "lfm2": ({"layer_types": ["conv", "full_attention"]},
             "its default config has attention layers only; LFM2 checkpoints "
             "mix short-convolution and attention layers"),
    "lfm2_moe": ({"layer_types": ["conv", "full_attention"]},
                 "its default config has no layer kinds"),
    "mamba2": ({"num_heads": 8},
               "heads x head_dim must be the width x expand (128)"),
    "mistral": WINDOW,
    "qwen4_exp_text": ({"indexer_n_heads": 2, "indexer_kv_heads": 1,
                        "indexer_head_dim": 16, "indexer_budget": 16,
                        "indexer_compress_ratio": 4,
                        "ngram_vocab_size_base": 256, "hc_lowrank": 16,
                        "split_ngram_parts": 4},
                       "its indexer has no default sizes; its n-gram table "
                       "20 million rows by default"),
    "reformer": ({"is_decoder": True, "attn_layers": ["local", "lsh"],
                  "axial_pos_shape": [4, 8], "axial_pos_embds_dim": [32, 32],
                  "local_attn_chunk_length": 8, "lsh_attn_chunk_length": 8},
                 "a causal LM only as a decoder; its axial positions "
                 "factor the sequence (4 x 8 = 32) and split the width"),
    "vaultgemma": WINDOW,
    "xlm": ({"causal": True}, "a causal LM only with causal attention"),
    "zamba": ({"num_hidden_layers": 3,
               "layers_block_type": ["mamba", "hybrid", "hybrid"]},
              "its shared attention block is tied across hybrid layers: "
              "two of them"),
    "zaya": ({"num_experts_per_tok": 1},
             "its config takes one expert per token only"),
}

# Categories the config and modules cannot tell apart by themselves.
CATEGORY_OVERRIDES = {
    "blt": ("other", "a byte latent transformer: an entropy patcher and "
            "local byte encoder/decoder around a global model"),
    "fuyu": ("multimodal", "image patches projected into the decoder"),
    "gemma4_assistant": ("other", "a speculative-decoding drafter that "
                         "reads its target model's hidden states"),
    "gemma4_unified_assistant": ("other", "a speculative-decoding drafter "
                                 "that reads its target model's hidden "
                                 "states"),
    "trocr": ("decoder of an encoder-decoder", "the text decoder of an "
              "image encoder-decoder"),
    "xlnet": ("other", "a permutation language model (two-stream "
              "attention), not left-to-right"),
}

DECODER = "decoder"
MOE = "MoE decoder"
MIXER = "state-space/conv/recurrent mixer"
ENCDEC = "decoder of an encoder-decoder"
ENCODER = "encoder as a decoder"
MULTIMODAL = "multimodal"
OTHER = "other"


def setup_paths():
    sys.path.insert(0, os.path.join(ROOT, "python"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    warnings.filterwarnings("ignore")
    # Tiny models: threads would only wait for each other.
    import torch
    torch.set_num_threads(1)
    import transformers
    transformers.logging.set_verbosity_error()


def families():
    """[(model_type, class name)] of transformers' causal LM list."""
    from transformers.models.auto.modeling_auto import \
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    return list(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items())


def config_class(model_type):
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    return CONFIG_MAPPING[model_type]


def window_fields(cls):
    """The config's sliding-window sizes that its default sets."""
    return [f.name for f in dataclasses.fields(cls) if f.name in WINDOWS
            and isinstance(f.default, int) and not isinstance(f.default,
                                                              bool)]


def tiny_config(model_type, window=None):
    """The family's config with the tiny sizes and its OVERRIDES; with
    `window`, its sliding windows that long."""
    cls = config_class(model_type)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    amap = getattr(cls, "attribute_map", {}) or {}
    kw = {}
    for value, names in SIZES:
        for name in names:
            name = amap.get(name, name)
            if name in fields:
                kw[name] = value
    # Multi-head latent attention: its head sizes are its own, and it has
    # as many key/value heads as query heads. Its default ranks and heads
    # are full-size (Youtu's query rank 1536, heads of 192), where float32
    # itself moves the third step's loss by 5e-5 (PyTorch's in float32
    # against float64): tiny ones, values narrower than queries and keys
    # (16 against 16 + 8) as in the real models; its rotary embedding's
    # head_dim is the rotated part's.
    if "kv_lora_rank" in fields:
        kw.pop("head_dim", None)
        if "head_dim" in fields:
            kw["head_dim"] = 8
        for name in ("num_key_value_heads", "num_kv_heads"):
            if name in kw:
                kw[name] = 4
        kw.update(kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8,
                  v_head_dim=16)
        if fields.get("q_lora_rank") and fields["q_lora_rank"].default:
            kw["q_lora_rank"] = 48
    # The default windows are longer than the sequence, where a sliding
    # window's mask is the causal one; `window` makes them bite.
    if window is not None:
        for name in window_fields(cls):
            kw[name] = window
    # Encoders are causal LMs as decoders (their ForCausalLM warns without).
    if "is_decoder" in fields and "add_cross_attention" in fields:
        kw["is_decoder"] = True
    for name, f in fields.items():
        d = f.default
        if ("dropout" in name or "pdrop" in name) and isinstance(d, float):
            kw[name] = 0.0
        if not isinstance(d, int) or isinstance(d, bool) or name in kw:
            continue
        if name.endswith("token_id") and d >= 256:
            kw[name] = 0
        elif "intermediate" in name or name == "expert_ffn_hidden_size":
            kw[name] = 32
        elif name.startswith("vocab_size") and d > 256:
            kw[name] = 256
    for name, f in fields.items():
        if f.default is None or (isinstance(f.default, int) and
                                 not isinstance(f.default, bool)):
            if name in EXPERTS:
                kw[name] = 4
            elif name in EXPERTS_PER_TOKEN:
                kw[name] = 2
    # Expert groups (DeepSeek-V3's router picks groups, then experts in
    # them): two of two experts, one kept, so that the choice is limited.
    for name in ("n_group", "num_group", "topk_group"):
        if name in fields:
            kw[name] = 1 if name == "topk_group" else 2
    # The first layers of some MoE families are dense: one of two here.
    if "first_k_dense_replace" in fields:
        kw["first_k_dense_replace"] = 1
    if "use_cache" in fields:
        kw["use_cache"] = False
    # Per-layer kinds (sliding and full attention, attention and mixers,
    # dense and MoE feed-forwards): the two layers are the first two kinds
    # of the default config's list, so that both appear.
    kinds = [name for name in fields if name.endswith("layer_types") or
             name == amap.get("layer_types")]
    if kinds:
        try:
            default = cls()
        except Exception:  # a config without usable defaults: no pattern
            default = None
        for name in kinds:
            types = getattr(default, name, None)
            if isinstance(types, (list, tuple)) and types:
                seen = list(dict.fromkeys(map(str, types)))
                kw[name] = (seen + seen)[:2] if len(seen) > 1 else \
                    [types[0]] * 2
    kw.update(OVERRIDES.get(model_type, ({}, ""))[0])
    return cls(**kw)


MIXERS = [  # (module class name pattern, what the table calls the mixer)
    (re.compile(r"Mamba|Mixer$"), "Mamba"),
    (re.compile(r"DeltaNet|DeltaAttention"), "gated delta net"),
    (re.compile(r"Lightning"), "lightning (linear) attention"),
    (re.compile(r"Rwkv"), "RWKV"),
    (re.compile(r"xLSTM"), "xLSTM"),
    (re.compile(r"Rglru|RecurrentBlock"), "RG-LRU"),
    (re.compile(r"ShortConv|^Conv1d$"), "short convolution"),
]
EXPERT_MODULES = re.compile(r"Experts|Router|TopKGating|Moe$|MoE$|MoA$")
COMPOSITE = re.compile(r"vision|audio|vq|image|patcher|encoder")


def classify(model_type, text_rows):
    """(category, why) of a family from its config class alone, or None
    when the built model must tell (classify_model)."""
    if model_type in CATEGORY_OVERRIDES:
        return CATEGORY_OVERRIDES[model_type]
    cls = config_class(model_type)
    subs = list(getattr(cls, "sub_configs", {}) or {})
    parts = [s for s in subs if COMPOSITE.search(s)]
    if parts:
        text = model_type + "_text"
        why = "with %s" % ", ".join(s.replace("_config", "") for s in parts)
        if text in text_rows:
            why += "; its text model is `%s`" % text
        return MULTIMODAL, why
    fields = {f.name: f.default for f in dataclasses.fields(cls)}
    if fields.get("is_encoder_decoder") is True:
        return ENCDEC, "cross-attention to an encoder's states"
    if "is_decoder" in fields and "add_cross_attention" in fields:
        return ENCODER, "causal with is_decoder=True"
    if model_type == "xlm":
        return ENCODER, "causal with causal=True"
    return None


def classify_model(model):
    """(category, why) of a decoder-only model from its modules."""
    import torch.nn as nn
    names = [type(m).__name__ for m in model.modules()]
    mixers = []
    for rx, what in MIXERS:
        if any(rx.search(n) for n in names) and what not in mixers:
            mixers.append(what)
    if "short convolution" in mixers and len(mixers) > 1:
        mixers.remove("short convolution")  # a part of the other mixer
    moe = any(isinstance(getattr(m, "experts", None), nn.Module)
              for m in model.modules()) or \
        any(EXPERT_MODULES.search(n) for n in names)
    if mixers:
        return (MIXER + (", MoE" if moe else ""),
                ", ".join(mixers) + (" with experts" if moe else ""))
    if moe:
        return MOE, "experts chosen per token"
    return DECODER, ""


def render_failure(e, workdir):
    """The importer's refusal as the table quotes it: its message (the
    scratch directory as DIR) and where."""
    text = e.message.replace(workdir + os.sep, "").replace(workdir, "DIR")
    text = " ".join(text.split())
    where = []
    if e.op:
        where.append("`%s`" % e.op)
    if e.path:
        where.append("in `%s`" % e.path)
    # A failure of torch.fx names no block: the line it failed on does.
    if text.startswith("tracing ") and e.source:
        where.append("at `%s`" % e.source.split(": ", 1)[-1].strip())
    return text + (" (%s)" % ", ".join(where) if where else "")


def build(model_type, window=None):
    """transformers' model of the family's tiny config, seeded, after one
    step of its own (a config transformers cannot run is not the
    importer's to refuse)."""
    import torch
    import transformers
    config = tiny_config(model_type, window)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(
        config, dtype=torch.float32)
    ids = torch.randint(0, 256, (2, SEQ))
    with torch.no_grad():
        model(input_ids=ids, labels=ids)
    return model


def try_import(model, directory, workdir):
    """(outcome, detail) of `zero-import --hf` of the model saved in
    `directory`."""
    from zero_import import importer
    from zero_import.errors import ImportFailure
    model.save_pretrained(directory)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            importer.import_hf(directory, BATCH, SEQ)
        return "imports", ""
    except ImportFailure as e:
        return "refused", render_failure(e, workdir)
    except Exception as e:  # the importer's bug, not a refusal
        return "crash", "%s: %s" % (type(e).__name__,
                                    " ".join(str(e).split())[:200])
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def survey_one(model_type, class_name, text_rows, workdir):
    """One row: {family, class, category, why, outcome, detail, window}."""
    row = {"family": model_type, "class": class_name, "window": ""}
    fixed = classify(model_type, text_rows)
    if fixed and fixed[0] in (MULTIMODAL, OTHER):
        row.update(category=fixed[0], why=fixed[1], outcome="not tried",
                   detail="")
        return row
    try:
        model = build(model_type)
    except Exception as e:  # transformers' own: the family is not built
        category, why = fixed or (OTHER, "")
        row.update(category=category, why=why, outcome="not built",
                   detail="%s: %s" % (type(e).__name__,
                                      " ".join(str(e).split())[:160]))
        return row
    category, why = fixed or classify_model(model)
    row.update(category=category, why=why)
    directory = os.path.join(workdir, model_type)
    outcome, detail = try_import(model, directory, workdir)
    row.update(outcome=outcome, detail=detail)
    del model
    # Sliding windows: the default ones are longer than the sequence; a
    # window shorter than it is tried as well.
    if outcome == "imports" and window_fields(config_class(model_type)):
        outcome, detail = try_import(build(model_type, SEQ // 2), directory,
                                     workdir)
        if outcome != "imports":
            row["window"] = "%s: %s" % (outcome, detail)
    return row


def survey(only=None, verbose=False):
    rows = []
    entries = families()
    text_rows = {mt for mt, _ in entries}
    with tempfile.TemporaryDirectory(prefix="hf-families-") as workdir:
        for model_type, class_name in entries:
            if only and model_type not in only:
                continue
            start = time.time()
            row = survey_one(model_type, class_name, text_rows, workdir)
            row["seconds"] = round(time.time() - start, 2)
            rows.append(row)
            if verbose:
                print("%-26s %-32s %-7.2f %-10s %s" % (
                    model_type, row["category"], row["seconds"],
                    row["outcome"], row["detail"][:150]),
                    file=sys.stderr, flush=True)
    return rows


# --- the training check ------------------------------------------------

STEPS = 3
# The exported weights against PyTorch's after STEPS steps at lr 3e-3:
# where a gradient is near zero, AdamW turns a difference in its last bits
# into a step the size of the learning rate, so a few elements of a tensor
# may differ by up to 2e-3 (gemma3_text: 2 of 2048, an RMS of 2.6e-5); a
# wrong export (a transposed or missing tensor) is off by its weights'
# scale, 2e-2.
EXPORT_RMS = 1e-4
# Tensors whose gradient is zero in exact arithmetic, so that rounding
# noise alone moves them (Adam scales it to steps of lr = 3e-3): compared
# within 2 lr per step, which still catches a transposed or missing tensor.
# Persimmon's k LayerNorm bias is added to every key of a row alike, a shift
# of the row's scores that the softmax removes.
EXPORT_NOISE = {"persimmon": [r"\.k_layernorm\.bias$"]}
INPUTS = os.path.join(ROOT, "test", "Import", "Inputs")


def run(argv, cwd, log):
    """Runs a command; its output goes to `log`. Raises Failed on a non-zero
    exit, naming the command."""
    with open(log, "a") as f:
        f.write("$ %s\n" % " ".join(argv))
        f.flush()
        r = subprocess.run(argv, cwd=cwd, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode:
        # The first error line says what failed; the log (a temporary
        # directory's, unless --keep) has the rest.
        with open(log, errors="replace") as f:
            errors = [line.strip() for line in f if "error:" in line]
        raise Failed("%s exited %d%s" % (
            os.path.basename(argv[0]), r.returncode,
            ": " + errors[0] if errors else ""))


class Failed(Exception):
    pass


def in_process(module, argv, log):
    """main() of one of the tests' Python helpers, in this process: its
    output to `log`; a non-zero exit raises Failed with its last line."""
    out = io.StringIO()
    saved = sys.argv
    sys.argv = [module.__file__] + argv
    code = 0
    try:
        with contextlib.redirect_stdout(out):
            module.main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (1 if e.code else 0)
        if isinstance(e.code, str):
            out.write(e.code + "\n")
    finally:
        sys.argv = saved
    with open(log, "a") as f:
        f.write("$ %s %s\n%s" % (os.path.basename(module.__file__),
                                 " ".join(argv), out.getvalue()))
    if code:
        lines = out.getvalue().strip().splitlines()
        raise Failed(lines[-1] if lines else "%s failed" %
                     os.path.basename(module.__file__))
    return out.getvalue()


def helpers():
    """The tests' own references: torch_train.py (each step's loss as
    transformers computes it, trained by torch.optim.AdamW on the same
    batches) and hf_export_check.py (from_pretrained of --export-hf's
    directory against the weights torch trained)."""
    import importlib.util
    mods = []
    for name in ("torch_train", "hf_export_check"):
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(INPUTS, name + ".py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mods.append(mod)
    return mods


def train_one(model_type, tools, workdir, tokens, mpirun, keep):
    """Trains the family's tiny model as test/Import/hf-export.test trains
    a Llama: `zero-import --hf`, stage 0 on one rank and stage 3 on two,
    STEPS steps each, every loss within 1e-5 relative of transformers'
    own, and the stage-3 run's --export-hf directory loaded back by
    from_pretrained within EXPORT_RMS of the weights torch trained. None, or
    what failed."""
    from zero_import.__main__ import main as zero_import
    torch_train, export_check = helpers()
    d = os.path.join(workdir, model_type)
    os.makedirs(d, exist_ok=True)
    log = os.path.join(d, "log.txt")
    hf = os.path.join(d, "hf")
    try:
        build(model_type).save_pretrained(hf)
        with contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()) as err:
            rc = zero_import(["--hf", hf, "--batch", str(BATCH), "--seq",
                              str(SEQ), "-o", os.path.join(d, "model.mlir"),
                              "--lr", "3e-3"])
        if rc:
            raise Failed("zero-import: " + err.getvalue().strip())
        compile_ = os.path.join(tools, "zero-compile")
        run([compile_, "model.mlir", "--stage", "0", "--world-size", "1",
             "-o", "s0"], d, log)
        run([compile_, "model.mlir", "--stage", "3", "--world-size", "2",
             "-o", "s3"], d, log)
        common = ["--data", tokens, "--steps", str(STEPS), "--quiet"]
        run(["./s0", "--init-from", "model.safetensors", "--log-json",
             "s0.json"] + common, d, log)
        run(mpirun + ["-np", "2", "./s3", "--init-from", "hf", "--log-json",
                      "s3.json", "--export-hf", "out"] + common, d, log)
        ref = ["--hf", hf, "--model", os.path.join(d, "model.mlir"),
               "--tokens", tokens]
        in_process(torch_train, ref + ["--log", os.path.join(d, "s0.json")],
                   log)
        in_process(torch_train, ref + ["--log", os.path.join(d, "s3.json"),
                                       "--save-state",
                                       os.path.join(d, "ref.pt")], log)
        loose = []
        for pattern in EXPORT_NOISE.get(model_type, []):
            loose += ["--loose", pattern, str(2 * 3e-3 * STEPS)]
        in_process(export_check, [os.path.join(d, "out"),
                                  os.path.join(d, "ref.pt"), "--rms",
                                  str(EXPORT_RMS)] + loose, log)
    except Failed as e:
        return str(e)
    if not keep:
        shutil.rmtree(d, ignore_errors=True)
    return None


def train(rows, tools, keep, verbose):
    """{family: None or what failed} of the rows that import."""
    mpirun = [shutil.which("mpirun") or "mpirun", "--oversubscribe"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        mpirun.append("--allow-run-as-root")
    workdir = keep or tempfile.mkdtemp(prefix="hf-families-train-")
    os.makedirs(workdir, exist_ok=True)
    tokens = os.path.join(workdir, "tokens.bin")
    subprocess.run([sys.executable, os.path.join(
        ROOT, "test", "E2E", "Inputs", "zrt_e2e.py"), "tokens", tokens,
        os.path.join(ROOT, "test", "Inputs", "training-text.md"), "--vocab", "256"],
        check=True, stdout=subprocess.DEVNULL)
    verdicts = {}
    for row in rows:
        if row["outcome"] != "imports":
            continue
        start = time.time()
        verdicts[row["family"]] = train_one(row["family"], tools, workdir,
                                            tokens, mpirun, keep)
        row["train_seconds"] = round(time.time() - start, 1)
        if verbose:
            print("train %-24s %5.1f s  %s" % (
                row["family"], row["train_seconds"],
                verdicts[row["family"]] or "trains exactly"),
                file=sys.stderr, flush=True)
    if not keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return verdicts


# --- the table -----------------------------------------------------------

EXACT = "trains exactly"
UNCHECKED = "imports (training not checked)"
DIFFERS = "imports, but trains differently: "


def cell(text):
    return text.replace("|", "\\|")


def category_text(row):
    if row["category"] == MOE or not row["why"]:
        return row["category"]
    return "%s (%s)" % (row["category"], row["why"])


def outcome_text(row, verdict):
    """What happens, as the table says it. `verdict`: the training check's
    (None: trains exactly, a string: what failed), or the table's previous
    word, or absent (not checked)."""
    o = row["outcome"]
    if o == "imports":
        if verdict is None:
            text = EXACT
        elif verdict == UNCHECKED or verdict is ...:
            text = UNCHECKED
        else:
            text = DIFFERS + verdict
        if row["window"]:
            text += ("; with a sliding window shorter than the sequence "
                     "(%d of %d tokens here): %s" % (SEQ // 2, SEQ,
                                                     row["window"]))
        return text
    if o == "refused":
        # A message quoting a tensor's values (whisper's index) would fill
        # the cell with numbers: the table says "a tensor" instead.
        return "refused: " + re.sub(r"tensor\(\[[\d\s,.\[\]-]*\]?\)?",
                                    "a tensor", row["detail"])
    if o == "crash":
        return "**crash** (a bug of the importer): " + row["detail"]
    if o == "not built":
        return "not tried: transformers' own step fails on the tiny " \
            "config: " + row["detail"]
    return "not tried"


def previous_verdicts(block):
    """{family: verdict} of an existing table: None for "trains exactly",
    the failure for "trains differently"."""
    out = {}
    for line in block.splitlines():
        m = re.match(r"\| `([^`]+)` \| [^|]* \| .*? \| (.*) \|$", line)
        if not m:
            continue
        what = m.group(2)
        if what.startswith(EXACT):
            out[m.group(1)] = None
        elif what.startswith(DIFFERS):
            out[m.group(1)] = what[len(DIFFERS):].split("; with a sliding")[0]
    return out


def table(rows, verdicts):
    import transformers
    lines = [
        "transformers %s: %d causal LM families "
        "(`MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`), each built by its own class "
        "from a tiny config (vocabulary 256, width 64, 2 layers, 4 heads, "
        "2 key/value heads, feed-forward 128, dropout 0; "
        "`scripts/hf-families.py` lists the settings it adds per family) "
        "and imported with `zero-import --hf DIR --batch %d --seq %d`."
        % (transformers.__version__, len(rows), BATCH, SEQ), "",
        "| family | class | category | what happens |",
        "|---|---|---|---|"]
    for row in rows:
        lines.append("| `%s` | `%s` | %s | %s |" % (
            row["family"], row["class"], cell(category_text(row)),
            cell(outcome_text(row, verdicts.get(row["family"], ...)))))
    lines += [""] + counts(rows, verdicts)
    return "\n".join(lines) + "\n"


def counts(rows, verdicts):
    by_category = {}
    for row in rows:
        by_category.setdefault(row["category"], []).append(row)
    out = []
    for category in (DECODER, MOE, MIXER, MIXER + ", MoE", ENCDEC, ENCODER,
                     MULTIMODAL, OTHER):
        group = by_category.pop(category, [])
        if not group:
            continue
        tally = {}
        for row in group:
            o = row["outcome"]
            if o == "imports":
                v = verdicts.get(row["family"], ...)
                o = EXACT if v is None else UNCHECKED if v is ... else \
                    "trains differently"
            tally[o] = tally.get(o, 0) + 1
        order = [EXACT, UNCHECKED, "trains differently", "refused", "crash",
                 "not built", "not tried"]
        parts = ["%d %s" % (tally[k], k) for k in order if k in tally]
        out.append("- %s: %d (%s)" % (category, len(group), ", ".join(parts)))
    assert not by_category, by_category
    out.append("- in all: %d" % len(rows))
    return out


def replace_block(text, block, path):
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise SystemExit("%s: expected one %s ... %s block" % (path, BEGIN,
                                                              END))
    a = text.index(BEGIN) + len(BEGIN) + 1
    b = text.index(END)
    return text[:a] + block + text[b:], text[a:b]


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--write", metavar="DOC",
                   help="rewrite DOC's table (docs/Tutorial.md)")
    p.add_argument("--check", metavar="DOC",
                   help="exit 1 with a diff when DOC's table is not what "
                        "the importer does now")
    p.add_argument("--train", action="store_true",
                   help="train every family that imports (slow: about a "
                        "minute each)")
    p.add_argument("--tools", default=os.path.join(ROOT, "build", "bin"),
                   help="the built zero-compile (default: build/bin)")
    p.add_argument("--keep", metavar="DIR",
                   help="--train's scratch directory, kept")
    p.add_argument("--only", help="these families (model types), "
                   "comma-separated")
    p.add_argument("--json", metavar="FILE", help="write the rows as JSON")
    p.add_argument("--survey", metavar="FILE",
                   help="the rows of an earlier --json, not surveyed again")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args()
    if args.write and args.check:
        p.error("--write or --check, not both")
    if args.check and args.train:
        p.error("--check surveys the families and trains none")
    if args.survey and args.only and not args.train:
        p.error("--survey reads the rows of every family; --only there "
                "names the families --train retrains")
    if args.only and (args.write or args.check) and not args.survey:
        p.error("--only makes a partial table: --write and --check take "
                "every family (or --survey's rows)")
    setup_paths()
    only = set(args.only.split(",")) if args.only else None
    if only:
        unknown = sorted(only - {mt for mt, _ in families()})
        if unknown:
            p.error("--only: %s is not in transformers' causal LM list" %
                    ", ".join(unknown))
    doc = args.write or args.check
    verdicts = {}
    if doc:
        with open(doc) as f:
            old_text = f.read()
        _, old = replace_block(old_text, "", doc)
        verdicts = previous_verdicts(old)
    start = time.time()
    if args.survey:
        with open(args.survey) as f:
            rows = json.load(f)
    else:
        rows = survey(only, args.verbose)
    surveyed = time.time() - start
    status = 0
    if args.train:
        trained = train([r for r in rows if not only or r["family"] in only],
                        args.tools, args.keep, args.verbose)
        verdicts.update(trained)
        failed = {k: v for k, v in trained.items() if v}
        for family, why in sorted(failed.items()):
            print("%s: %s" % (family, why), file=sys.stderr)
        print("trained %d families in %.0f s: %d exactly, %d not" % (
            len(trained), time.time() - start - surveyed,
            len(trained) - len(failed), len(failed)), file=sys.stderr)
        status = 1 if failed else 0
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if not args.survey:
        print("surveyed %d families in %.0f s" % (len(rows), surveyed),
              file=sys.stderr)
    block = table(rows, verdicts)
    if not doc:
        sys.stdout.write(block)
        return status
    new_text, _ = replace_block(old_text, block, doc)
    if args.check:
        if new_text != old_text:
            sys.stdout.writelines(difflib.unified_diff(
                old_text.splitlines(True), new_text.splitlines(True), doc,
                "what the importer does now"))
            sys.stdout.flush()
            print("%s: the table of causal LM families is not what the "
                  "importer does now; regenerate it with\n"
                  "  .venv/bin/python scripts/hf-families.py --train "
                  "--write %s\n(from the repository root: --train trains "
                  "the families that import, a minute or more)" % (doc, doc),
                  file=sys.stderr)
            return 1
        print("%s: the table of %d causal LM families is current" % (
            doc, len(rows)), file=sys.stderr)
        return status
    with open(doc, "w") as f:
        f.write(new_text)
    print("updated %s" % doc, file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
