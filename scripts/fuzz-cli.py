#!/usr/bin/env python3
"""A property fuzzer for the tools' command lines and input files; see
docs/reliability.md ("Fuzzing the command lines").

  fuzz-cli.py --seconds N [--cases K] [--seed S] [--surfaces LIST]
              [--build DIR] [--work DIR]
  fuzz-cli.py --replay FILE_OR_DIR... [--build DIR] [--work DIR]
              [--cases K --seed S ...]   (the seeds, then new cases)

Surfaces: compile (zero-compile --emit mlir, with ds_config.json files),
tune, estimate (subprocesses of DIR/bin's tools), data (zero-data) and
import (zero-import --hf's config.json), the last two run in-process by
zero_import's main(argv) in a worker Python, which imports torch and
transformers once.

A case is a JSON object: "surface", "argv" (relative paths, run in a fresh
directory) and "files" (path: text, {"base64": ...}, {"copy": "%src/..."},
{"model_gen": [ARGS]}, {"symlink": TARGET} or {"dir": true}; "%tok" is a
tiny tokenizer, "%config:FAMILY" a tiny config.json written by
transformers' own config class); seeds may add "expect" ("ok" or "error")
and "expect_text" (a substring of the output). A case violates a property
(a finding) when the tool dies by a signal, exits with a status outside
{0, 1, 2}, prints a crash or traceback, runs past the timeout, lets an
exception other than SystemExit escape main(), fails without a message, or
succeeds without writing the outputs it names. Findings are saved under
WORK/findings as cases with the contents of every file; --replay runs them.
"""

import argparse
import base64
import contextlib
import io
import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from fuzzcli_cases import (gen_compile, gen_data, gen_estimate, gen_import,
                           gen_tune, json_nodes)
from fuzzcli_check import (TIMEOUT, check, limit_memory, run_in_process,
                           run_subprocess, self_test)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SURFACES = ("compile", "tune", "estimate", "data", "import")
IN_PROCESS = ("data", "import")
TOOLS = {"compile": "zero-compile", "tune": "zero-tune",
         "estimate": "zero-estimate"}


# ----------------------------------------------------------------------------
# The in-process worker (data, import): one Python that imported torch and
# transformers, fed cases on a pipe; killed and started again when a case
# hangs or kills it.
# ----------------------------------------------------------------------------

def tiny_configs():
    """{family: config.json dict} written by transformers' config classes."""
    from transformers import (GPT2Config, LlamaConfig, MixtralConfig,
                              Qwen2MoeConfig)
    common = dict(vocab_size=256, hidden_size=64, intermediate_size=128,
                  num_hidden_layers=1, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=128)
    configs = {
        "llama": (LlamaConfig(**common), "LlamaForCausalLM"),
        "mixtral": (MixtralConfig(num_local_experts=4, num_experts_per_tok=2,
                                  **common), "MixtralForCausalLM"),
        "gpt2": (GPT2Config(vocab_size=256, n_positions=64, n_embd=64,
                            n_layer=1, n_head=4), "GPT2LMHeadModel"),
        "qwen2_moe": (Qwen2MoeConfig(
            moe_intermediate_size=32, shared_expert_intermediate_size=64,
            num_experts=4, num_experts_per_tok=2, **common),
            "Qwen2MoeForCausalLM"),
    }
    out = {}
    for name, (config, arch) in configs.items():
        config.architectures = [arch]
        out[name] = json.loads(config.to_json_string(use_diff=False))
    return out


def tiny_tokenizer(path):
    """The zero-data tests' word-level tokenizer (BOS, EOS, pad and a chat
    template), written by test/Data/Inputs/tiny_tokenizer.py."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "tiny_tokenizer", os.path.join(ROOT, "test", "Data", "Inputs",
                                       "tiny_tokenizer.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.save(path)


def named_outputs(surface, argv):
    """The files a zero exit must have written, by the tool's own parser."""
    if surface == "data":
        from zero_import.data import check_args, parser
        args = parser().parse_args(argv)
        check_args(args)  # its defaults: --ids, --labels, --positions
        if args.mode == "tokens" and not args.pack:
            return [args.output]
        return [args.ids, args.labels] + (
            [args.positions] if args.pack else []) + (
            [args.doc_lengths] if args.doc_lengths else [])
    from zero_import.__main__ import parser
    args = parser().parse_args(argv)
    return [args.output] + ([] if args.no_weights else [
        args.weights or os.path.splitext(args.output)[0] + ".safetensors"])


def worker(work, mem):
    # The protocol keeps the pipe; what native code prints goes to a log.
    proto = os.fdopen(os.dup(1), "w")
    log = os.open(os.path.join(work, "worker.log"),
                  os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.path.insert(0, os.path.join(ROOT, "python"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    # Import everything a case may load, so that no case pays for it.
    import transformers
    import zero_import.__main__
    import zero_import.data
    import zero_import.importer  # noqa: F401
    for name in ("LlamaForCausalLM", "MixtralForCausalLM", "GPT2LMHeadModel",
                 "Qwen2MoeForCausalLM", "AutoTokenizer"):
        getattr(transformers, name)
    tok = os.path.join(work, "assets", "tok")
    if not os.path.isdir(tok):
        tiny_tokenizer(tok)
    configs = tiny_configs()
    # A config with huge sizes must fail to allocate, not take the machine.
    limit_memory(mem)()
    proto.write(json.dumps({"ready": True, "configs": configs}) + "\n")
    proto.flush()
    mains = {"data": zero_import.data.main,
             "import": zero_import.__main__.main}
    for line in sys.stdin:
        req = json.loads(line)
        os.chdir(req["dir"])
        result = run_in_process(mains[req["surface"]], req["argv"],
                                req.get("timeout", TIMEOUT))
        result["outputs"] = []
        if result["status"] == 0 and not result["timed_out"]:
            with contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()):
                with contextlib.suppress(SystemExit):
                    result["outputs"] = named_outputs(req["surface"],
                                                      req["argv"])
        os.chdir(work)
        proto.write(json.dumps(result) + "\n")
        proto.flush()


class Worker:
    def __init__(self, work, mem):
        self.work, self.mem, self.p, self.configs = work, mem, None, None

    def start(self):
        self.p = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker",
             "--work", self.work, "--mem-limit-mb",
             str(self.mem >> 20 or -1)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            errors="surrogateescape", start_new_session=True)
        line = self._read(600)
        if not line:
            self.stop()
            log = os.path.join(self.work, "worker.log")
            sys.exit("fuzz-cli: error: the worker (torch, transformers) did "
                     "not start; see %s" % log)
        self.configs = json.loads(line)["configs"]

    def _read(self, timeout):
        ready, _, _ = select.select([self.p.stdout], [], [], timeout)
        return self.p.stdout.readline() if ready else None

    def stop(self):
        if self.p:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()
            self.p = None

    def run(self, surface, argv, cwd):
        if not self.p:
            self.start()
        self.p.stdin.write(json.dumps({"surface": surface, "argv": argv,
                                       "dir": cwd, "timeout": TIMEOUT}) + "\n")
        self.p.stdin.flush()
        # The worker's own alarm fires first; this is for a case that
        # blocks signals or dies.
        line = self._read(TIMEOUT + 20)
        if line:
            return json.loads(line)
        rc = self.p.poll()
        self.stop()
        if rc is None:
            return {"status": None, "output": "", "exception": None,
                    "timed_out": True, "outputs": []}
        return {"status": rc if rc >= 0 else None, "signal":
                -rc if rc < 0 else None, "output": "", "timed_out": False,
                "exception": None if rc < 0 else "the worker exited %d" % rc,
                "outputs": []}


# ----------------------------------------------------------------------------
# Cases: files and runs
# ----------------------------------------------------------------------------

class Env:
    def __init__(self, build, work, mem):
        bindir = os.path.join(build, "bin")
        self.bin = bindir if os.path.isdir(bindir) else build
        self.work = os.path.abspath(work)
        self.assets = os.path.join(self.work, "assets")
        os.makedirs(self.assets, exist_ok=True)
        self.mem = mem
        self.worker = None
        self.generated = {}

    def get_worker(self):
        if self.worker is None:
            self.worker = Worker(self.work, self.mem)
            self.worker.start()
        return self.worker

    def model_gen(self, args):
        key = json.dumps(args)
        if key not in self.generated:
            path = os.path.join(self.assets,
                                "gen%d.mlir" % len(self.generated))
            r = subprocess.run([os.path.join(self.bin, "zero-model-gen")] +
                               args + ["-o", path], capture_output=True,
                               text=True)
            if r.returncode:
                sys.exit("fuzz-cli: error: zero-model-gen %s: %s" % (
                    " ".join(args), r.stderr))
            self.generated[key] = path
        return self.generated[key]

    def source(self, ref):
        if ref == "%tok":
            self.get_worker()  # which writes it
            return os.path.join(self.assets, "tok")
        return ref.replace("%src", ROOT)


def write_files(env, case, d):
    for rel, spec in case.get("files", {}).items():
        path = os.path.join(d, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if isinstance(spec, str):
            with open(path, "w", encoding="utf-8",
                      errors="surrogateescape") as f:
                f.write(spec)
        elif "base64" in spec:
            with open(path, "wb") as f:
                f.write(base64.b64decode(spec["base64"]))
        elif spec.get("dir"):
            os.makedirs(path, exist_ok=True)
        elif "symlink" in spec:
            os.symlink(spec["symlink"], path)
        elif "config" in spec:
            with open(path, "w") as f:
                json.dump(env.get_worker().configs[spec["config"]], f,
                          indent=2)
        else:
            src = env.model_gen(spec["model_gen"]) if "model_gen" in spec \
                else env.source(spec["copy"])
            if os.path.isdir(src):
                shutil.copytree(src, path, dirs_exist_ok=True)
            else:
                shutil.copyfile(src, path)
            for old, new in spec.get("replace", []):
                with open(path) as f:
                    text = f.read()
                with open(path, "w") as f:
                    f.write(text.replace(old, new))


def snapshot(d):
    """Every file of a case directory, as a case's "files"."""
    files = {}
    for top, dirs, names in os.walk(d):
        for name in sorted(dirs) + sorted(names):
            path = os.path.join(top, name)
            rel = os.path.relpath(path, d)
            if os.path.islink(path):
                files[rel] = {"symlink": os.readlink(path)}
            elif os.path.isdir(path):
                if not os.listdir(path):
                    files[rel] = {"dir": True}
            else:
                with open(path, "rb") as f:
                    data = f.read()
                try:
                    files[rel] = data.decode("utf-8")
                except UnicodeDecodeError:
                    files[rel] = {"base64": base64.b64encode(data).decode()}
    return files


def subprocess_outputs(surface, argv):
    """The -o path of a zero-compile or zero-tune command line (the last
    given), if any."""
    if surface == "estimate":
        return []
    out = None
    for i, a in enumerate(argv):
        if a == "-o" and i + 1 < len(argv):
            out = argv[i + 1]
        elif a.startswith("-o="):
            out = a[3:]
    return [out] if out is not None else []


def run_case(env, case):
    """(findings, output) of one case, run in a fresh directory."""
    d = tempfile.mkdtemp(prefix="case-", dir=env.work)
    try:
        write_files(env, case, d)
        files = snapshot(d)
        surface, argv = case["surface"], case["argv"]
        if surface in IN_PROCESS:
            r = env.get_worker().run(surface, argv, d)
            output = r["output"]
            rc = r["status"]
            outputs = [os.path.join(d, p) for p in r.get("outputs", [])]
            found = check(rc, output, r.get("signal"), r["timed_out"],
                          r["exception"], outputs)
            if r["exception"]:
                output += r["exception"]
        else:
            cmd = [os.path.join(env.bin, TOOLS[surface])] + argv
            rc, sig, timed_out, out, err = run_subprocess(cmd, d,
                                                          mem=env.mem)
            output = out + err
            outputs = [p if p == "-" else os.path.join(d, p)
                       for p in subprocess_outputs(surface, argv)]
            found = check(rc, output, sig, timed_out, None, outputs,
                          stdout_used=True, stdout=out)
        expect = case.get("expect")
        if expect == "ok" and rc != 0:
            found.append("expected exit 0, got %s" % rc)
        if expect == "error" and rc in (0, None):
            found.append("expected an error exit, got %s" % rc)
        if case.get("expect_text") and case["expect_text"] not in output:
            found.append("expected the output to hold %r" %
                         case["expect_text"])
        return found, output, files, rc
    finally:
        shutil.rmtree(d, ignore_errors=True)


def save_finding(env, case, found, output, files, name):
    d = os.path.join(env.work, "findings")
    os.makedirs(d, exist_ok=True)
    saved = {k: v for k, v in case.items() if k not in ("files",)}
    saved["files"] = files
    saved["findings"] = found
    saved["output"] = output[-4000:]
    path = os.path.join(d, name + ".json")
    with open(path, "w") as f:
        json.dump(saved, f, indent=1)
    return path


def option_names(env, surface):
    """The option names of a tool, from its --help (or its parser)."""
    if surface in IN_PROCESS:
        sys.path.insert(0, os.path.join(ROOT, "python"))
        if surface == "data":
            from zero_import.data import parser
            p = parser()
            subs = [a for a in p._actions
                    if isinstance(a, argparse._SubParsersAction)]
            actions = [a for s in subs for q in s.choices.values()
                       for a in q._actions]
        else:
            from zero_import.__main__ import parser
            actions = parser()._actions
        return sorted({o for a in actions for o in a.option_strings})
    r = subprocess.run([os.path.join(env.bin, TOOLS[surface]), "--help"],
                       capture_output=True, text=True)
    names = set()
    for line in r.stdout.splitlines():
        word = line.strip().split("=")[0].split(" ")[0]
        if word.startswith("-") and len(word) > 1:
            names.add(word)
    return sorted(names - {"--help", "--help-list", "--version"})


# ----------------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------------

def fuzz(env, args):
    surfaces = args.surfaces.split(",")
    for s in surfaces:
        if s not in SURFACES:
            sys.exit("fuzz-cli: error: --surfaces: unknown surface '%s' "
                     "(expected some of %s)" % (s, ",".join(SURFACES)))
    names = {s: option_names(env, s) for s in surfaces}
    configs, tok_config = None, None
    if any(s in IN_PROCESS for s in surfaces):
        w = env.get_worker()
        configs = w.configs
        with open(os.path.join(env.assets, "tok",
                               "tokenizer_config.json")) as f:
            tok_config = json.load(f)
    deadline = time.monotonic() + args.seconds if args.seconds else None
    counts = {s: 0 for s in surfaces}
    findings = skipped = 0
    i = 0
    while (args.cases is None or i < args.cases) and \
            (deadline is None or time.monotonic() < deadline):
        # One generator per case: case i is the same whatever ran before.
        rng = random.Random("%d:%d" % (args.seed, i))
        surface = rng.choice(surfaces)
        if surface == "compile":
            case = gen_compile(rng, names[surface])
        elif surface == "tune":
            case = gen_tune(rng, names[surface])
        elif surface == "estimate":
            case = gen_estimate(rng, names[surface])
        elif surface == "data":
            case = gen_data(rng, names[surface], tok_config)
        else:
            case = gen_import(rng, names[surface], configs)
        case["seed"], case["index"] = args.seed, i
        if past_known_limit(case):
            skipped += 1
            i += 1
            continue
        found, output, files, rc = run_case(env, case)
        counts[surface] += 1
        if args.verbose:
            last = output.strip().splitlines()[-1:] or [""]
            print("fuzz-cli: case %d %s exit %s: %s\n  %s" % (
                i, surface, rc, last[0][:160], argv_text(case["argv"])))
        if found:
            findings += 1
            path = save_finding(env, case, found, output, files,
                                "%s-%d-%d" % (surface, args.seed, i))
            print("fuzz-cli: FINDING %s: %s\n  %s" % (
                path, "; ".join(found), argv_text(case["argv"])), flush=True)
        i += 1
    print("fuzz-cli: per surface: " + ", ".join(
        "%s %d" % kv for kv in counts.items()))
    print("fuzz-cli: %d cases past a known limit not run (buckets below "
          "%d elements)" % (skipped, BUCKET_FLOOR))
    print("fuzz-cli: %d cases, %d findings" % (i - skipped, findings))
    return 1 if findings else 0


# Known limits (docs/reliability.md): a bucket of a few elements makes one
# collective per few elements, and the schedule verifier and memory plan are
# quadratic in the slices of a gradient, so such a step takes minutes
# without being wrong; zero-fuzz keeps its buckets above the same floor.
BUCKET_FLOOR = 1000
BUCKET_OPTIONS = ("--reduce-bucket-size", "--allgather-bucket-size",
                  "--prefetch-bucket-size")
BUCKET_KEYS = ("reduce_bucket_size", "allgather_bucket_size",
               "stage3_prefetch_bucket_size")


def _small(value):
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        return False
    return 0 < v < BUCKET_FLOOR


def past_known_limit(case):
    """Why the case is one of the known limits' slow steps, or None."""
    argv = case["argv"]
    for flag, value in zip(argv, argv[1:] + [""]):
        name, eq, inline = flag.partition("=")
        if name in BUCKET_OPTIONS and _small(inline if eq else value):
            return "%s below %d" % (name, BUCKET_FLOOR)
    for data in case.get("files", {}).values():
        if not isinstance(data, str) or "bucket_size" not in data:
            continue
        try:
            tree = json.loads(data)
        except (ValueError, RecursionError):
            continue
        for path, node in json_nodes(tree):
            if path and path[-1] in BUCKET_KEYS and _small(node):
                return "%s below %d" % (path[-1], BUCKET_FLOOR)
    return None


def argv_text(argv):
    return " ".join(a if a and a.isprintable() and " " not in a and
                    len(a) < 80 else repr(a[:80]) for a in argv)


def replay(env, paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            for top, _, names in os.walk(p):
                files += [os.path.join(top, n) for n in names
                          if n.endswith(".json")]
        else:
            files.append(p)
    findings = 0
    for path in sorted(files):
        with open(path) as f:
            case = json.load(f)
        found, output, _, _ = run_case(env, case)
        if found:
            findings += 1
            print("fuzz-cli: FINDING %s: %s\n  %s\n%s" % (
                path, "; ".join(found), argv_text(case["argv"]),
                "\n".join("  | " + l for l in output[-2000:].splitlines())),
                flush=True)
    print("fuzz-cli: %d cases, %d findings" % (len(files), findings))
    return 1 if findings else 0


def main():
    p = argparse.ArgumentParser(
        description="Fuzz the tools' command lines and input files.")
    p.add_argument("--seconds", type=float, help="fuzz for this long")
    p.add_argument("--cases", type=int, help="fuzz this many cases (with "
                   "--seed, the same ones every time)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--surfaces", default=",".join(SURFACES),
                   help="comma-separated, of %s" % ",".join(SURFACES))
    p.add_argument("--build", default=os.path.join(ROOT, "build"),
                   help="the build whose bin/ holds the tools")
    p.add_argument("--work", help="where cases run and findings are saved "
                   "(default: a temporary directory)")
    p.add_argument("--replay", nargs="+", metavar="FILE_OR_DIR",
                   help="run these cases once each")
    p.add_argument("--mem-limit-mb", type=int, default=0,
                   help="address-space limit of each run (default 0: 60%% of "
                   "the memory, at most 16 GiB; -1: none, as a sanitizer "
                   "build needs)")
    p.add_argument("--verbose", action="store_true",
                   help="print each case's exit status and last line")
    p.add_argument("--self-test", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    mem = max(args.mem_limit_mb, 0) << 20
    if not args.mem_limit_mb:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        mem = min(int(phys * 0.6), 16 << 30)
    if args.worker:
        return worker(args.work, mem)
    if args.self_test:
        return self_test()
    if args.replay is None and args.seconds is None and args.cases is None:
        p.error("give --replay, --seconds or --cases")
    work = args.work or tempfile.mkdtemp(prefix="fuzz-cli-")
    os.makedirs(work, exist_ok=True)
    env = Env(os.path.abspath(args.build), work, mem)
    if not os.path.isfile(os.path.join(env.bin, "zero-compile")):
        p.error("--build %s: no bin/zero-compile there" % args.build)
    try:
        # Both, with one worker: the seeds, then new cases.
        rc = replay(env, args.replay) if args.replay else 0
        if args.seconds is not None or args.cases is not None:
            rc = fuzz(env, args) or rc
        return rc
    finally:
        if env.worker:
            env.worker.stop()


if __name__ == "__main__":
    sys.exit(main())
