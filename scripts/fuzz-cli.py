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
import copy
import io
import json
import os
import random
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SURFACES = ("compile", "tune", "estimate", "data", "import")
IN_PROCESS = ("data", "import")
TOOLS = {"compile": "zero-compile", "tune": "zero-tune",
         "estimate": "zero-estimate"}
TIMEOUT = 10.0
# What a crash, an assertion, a sanitizer or an uncaught exception prints
# (C's assert: "file:line: function: Assertion `cond' failed.").
BANNED = ("Stack dump", "LLVM ERROR", "Assertion `", "internal error",
          "Traceback", "PLEASE submit a bug report", "AddressSanitizer",
          "LeakSanitizer", "UndefinedBehaviorSanitizer", ": runtime error: ")


# ----------------------------------------------------------------------------
# Properties
# ----------------------------------------------------------------------------

def check(rc, output, signal_no=None, timed_out=False, exception=None,
          outputs=(), stdout_used=False, stdout=""):
    """The properties a run violates, as short sentences (empty: none)."""
    found = []
    if timed_out:
        found.append("did not finish within %g s" % TIMEOUT)
    if signal_no:
        try:
            name = signal.Signals(signal_no).name
        except ValueError:
            name = "?"
        found.append("killed by signal %d (%s)" % (signal_no, name))
    if exception:
        found.append("an exception escaped main(): %s" %
                     exception.strip().splitlines()[-1])
    if rc is not None and not signal_no and rc not in (0, 1, 2):
        found.append("exit status %d (expected 0, 1 or 2)" % rc)
    for word in BANNED:
        if word in output:
            found.append("printed %r" % word)
    if rc not in (0, None) and not timed_out and not signal_no and \
            not output.strip():
        found.append("exit status %d without a message" % rc)
    if rc == 0 and not timed_out:
        for path in outputs:
            if path == "-" and stdout_used:
                if not stdout.strip():
                    found.append("exit 0 but nothing written to stdout (-o -)")
            elif not os.path.isfile(path) or os.path.getsize(path) == 0:
                found.append("exit 0 but the output %r was not written (or "
                             "is empty)" % path)
    return found


def limit_memory(nbytes):
    def apply():
        if nbytes:
            resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))
    return apply


def run_subprocess(cmd, cwd, timeout=TIMEOUT, mem=0):
    """(rc, signal, timed_out, stdout, stderr) of cmd, its process group
    killed at the timeout."""
    p = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, preexec_fn=limit_memory(mem))
    try:
        out, err = p.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        timed_out = True
    rc = p.returncode
    sig = -rc if rc is not None and rc < 0 and not timed_out else None
    return (None if sig or timed_out else rc, sig, timed_out,
            out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


class _Timeout(BaseException):
    """Raised by SIGALRM in the worker: a BaseException, so that the
    tools' `except Exception` does not swallow it."""


def run_in_process(fn, argv, timeout=TIMEOUT):
    """{status, output, exception, timed_out} of fn(argv), a tool's
    main(): its output captured, SystemExit turned into a status as the
    interpreter does."""
    out = io.StringIO()
    result = {"status": None, "exception": None, "timed_out": False}

    def alarm(signum, frame):
        raise _Timeout()
    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                status = fn(argv)
                result["status"] = 0 if status is None else status
            except SystemExit as e:
                if e.code is None or isinstance(e.code, int):
                    result["status"] = e.code or 0
                else:
                    print(e.code, file=sys.stderr)
                    result["status"] = 1
    except _Timeout:
        result["timed_out"] = True
    except BaseException:  # noqa: B902 (what the property is about)
        result["exception"] = traceback.format_exc()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    result["output"] = out.getvalue()
    if not isinstance(result["status"], int) and result["status"] is not None:
        result["exception"] = "main() returned %r, not a status" % (
            result["status"],)
        result["status"] = None
    return result


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
        from zero_import.data import parser
        args = parser().parse_args(argv)
        return [args.output] if args.mode == "tokens" else \
            [args.ids, args.labels]
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


# ----------------------------------------------------------------------------
# Mutations
# ----------------------------------------------------------------------------

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


def self_test():
    """The checker reports a crash, a hang, a silent failure, a traceback
    and an escaping exception (the tools themselves never do, we hope)."""
    global TIMEOUT
    TIMEOUT = 1.0
    py = [sys.executable, "-c"]
    d = tempfile.mkdtemp(prefix="fuzz-cli-self-test-")
    cases = [
        ("SIGSEGV", lambda: run_subprocess(py + [
            "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"], d)),
        ("hang", lambda: run_subprocess(py + ["import time; time.sleep(60)"],
                                        d, timeout=TIMEOUT)),
        ("exit 3", lambda: run_subprocess(py + [
            "import sys; print('x'); sys.exit(3)"], d)),
        ("silent", lambda: run_subprocess(py + ["import sys; sys.exit(1)"],
                                          d)),
        ("traceback", lambda: run_subprocess(py + ["raise ValueError"], d)),
    ]
    missed = []
    for name, fn in cases:
        rc, sig, timed_out, out, err = fn()
        found = check(rc, out + err, sig, timed_out)
        print("fuzz-cli: self-test %s: %s" % (name, "; ".join(found)))
        if not found:
            missed.append(name)

    def raises(argv):
        raise KeyError(argv[0])

    def returns(argv):
        return 0

    def hangs(argv):
        time.sleep(60)
    for name, fn in (("exception", raises), ("hang in-process", hangs),
                     ("no output", returns)):
        r = run_in_process(fn, ["x"], timeout=TIMEOUT)
        found = check(r["status"], r["output"], None, r["timed_out"],
                      r["exception"], [os.path.join(d, "missing.npy")])
        print("fuzz-cli: self-test %s: %s" % (name, "; ".join(found)))
        if not found:
            missed.append(name)
    shutil.rmtree(d, ignore_errors=True)
    if missed:
        print("fuzz-cli: self-test: not reported: %s" % ", ".join(missed))
        return 1
    print("fuzz-cli: self-test: every violation reported")
    return 0


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
