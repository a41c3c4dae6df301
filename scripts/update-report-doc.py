#!/usr/bin/env python3
"""Regenerates docs/Report.md from the built tools, or checks that it is
current (--check: prints a unified diff and exits 1 when it is not).

The page says what to run and what to fill in with HTML comments, which
Markdown does not render:

  <!-- report:run -->            a ```sh block whose commands are run, in
  ```sh ... ```                  order, in one scratch directory (the model
  <!-- /report:run -->           files the other commands read)

  <!-- report:output NAME: CMD -->   CMD's output, as a ``` block headed by
  ...                                "$ CMD"; rewritten from a fresh run
  <!-- /report:output -->

  <!-- report:data NAME: CMD -->     CMD run for its numbers only; commands
                                     may be chained with &&, and a command
                                     prefixed with `not` must fail (its
                                     output is then its stderr)

  <!--=EXPR-->TEXT<!--/-->           inline: TEXT is rewritten as EXPR's value
  <!--?EXPR-->TEXT<!--/-->           inline: TEXT is a claim that EXPR must
                                     hold (never rewritten; a false claim is
                                     an error only the prose can fix)

  <!-- report:table NAME -->     a table the script builds from its list
  ...                            TABLES[NAME] (the runs and the rows; each
  <!-- /report:table -->         run is also named in EXPR, below)

EXPR is a Python expression over the runs by NAME: `stage2_8.peak_bytes`
reads the JSON report of the same command with format=json, `.row('Adam m')`
a byte count from the text table, `.text` the whole output; a zero-tune run
with `--format json` is its list of candidates (`fit[0].remat`), and
missed(run) reads a failed zero-tune's closest plan and zeropp(candidate)
names a zero-tune --zeropp candidate's ZeRO++ choice; `gen` holds the options
of the page's zero-model-gen command, `runs` every zero-report run (a
zero-estimate run with `--format json` is its own JSON document), and
n(), size(), gib(), mib() and fixed() format numbers.

Outputs of commands are kept in the work directory (.report-cache.json),
keyed by the command, the tool's size and time and the contents of the
files it names, as whole arguments or inside an option (config=ds.json), or
of the directories it names (zero-import --hf DIR), so that a second run
over the same directory (test/Docs runs three) reruns only what changed; a
command that writes a file (-o FILE) is rerun unless FILE is still what its
last run wrote. A path under examples/ names the repository's.

Beyond the rewrite, the check fails when a number in the prose is neither
generated nor inside a claim, and when the page's table of JSON keys and the
keys of the JSON reports differ: every report has every key of the table
(one under a null object, `fit` without device memory, counts as present)
and no other. --keys checks JSON report files against the table the same
way, running nothing.
"""

import argparse
import difflib
import fractions
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DOC = os.path.join(ROOT, "docs", "Report.md")

BLOCK = re.compile(
    r"^<!-- report:(run|output)(?: ([A-Za-z_]\w*): (.*?))? -->\n(.*?)"
    r"^<!-- /report:\1 -->$", re.S | re.M)
DATA = re.compile(r"^<!-- report:data ([A-Za-z_]\w*): (.*?) -->$", re.M)
TABLE = re.compile(r"^<!-- report:table ([A-Za-z_]\w*) -->\n(.*?)"
                   r"^<!-- /report:table -->$", re.S | re.M)
INLINE = re.compile(r"<!--([=?])((?:(?!-->)[^\n])*)-->((?:(?!<!--).)*?)<!--/-->",
                    re.S)
# The JSON keys whose objects map names to counts or bytes (one key per
# collective kind): the table describes the object, not each name.
MAP_KEYS = {"comm.collectives", "comm.bytes_by_kind"}
# The JSON keys whose objects hold some of the names their row gives (the
# states of the step's optimizer): every key of the object is named there.
SOME_OF_KEYS = {"model_state_breakdown"}
# Words with digits that name things rather than state quantities.
NAMES = re.compile(r"GPT-2(?: 124M| 1\.5B)?|Llama-3(?: 8B| 70B)?|\b(?:8B|70B)\b|H100|ZeRO-3|"
                   r"Qwen3-30B-A3B|Mixtral-8x7B|gpt-oss-120b|\bep \d+\b|"
                   r"fp32|bf16|16-bit|32-bit|"
                   r"\b[Ss]tages?[- ]\d(?:-\d)?\b|\brank 0\b")


class Failure(Exception):
    pass


# The "Mixture of experts" table: each model (its Hugging Face config under
# examples/moe, imported without weights at one sequence of MOE_SEQ tokens
# per rank in bf16) on each number of ranks, 8 to a node, in each
# configuration of MOE_CONFIGS. A configuration is one entry: its column
# label, the name its runs take (moe_<model>_<name>_<ranks>), the
# zero-pipeline options beside `world-size=N ranks-per-node=8` and the
# numbers of ranks it is planned on. Expert parallelism's entries cap the
# exchange at 1.25 times the balanced load: the dropless bound (P times a
# rank's rows) makes Qwen3-30B-A3B's activations too large at ep 8. "ep 8
# across nodes" places each expert group one rank a node (strided) and is
# planned on 64 ranks only: on one node of 8 both placements are the same
# ranks.
MOE_MODELS = [("Qwen3-30B-A3B", "qwen", "examples/moe/qwen3-30b-a3b"),
              ("Mixtral-8x7B", "mixtral", "examples/moe/mixtral-8x7b"),
              ("gpt-oss-120b", "gptoss", "examples/moe/gpt-oss-120b")]
MOE_RANKS = [8, 64]
MOE_SEQ = 4096
MOE_CONFIGS = [("ZeRO-3", "z3", "stage=3 overlap-comm=true remat=layer",
                MOE_RANKS),
               ("ep 8", "ep8", "stage=3 ep-size=8 moe-capacity-factor=1.25",
                MOE_RANKS),
               ("ep 8 across nodes", "ep8x", "stage=3 ep-size=8 "
                "ep-placement=strided moe-capacity-factor=1.25", [64])]


def moe_table(runner, env):
    """The runs of the Mixture of experts table, by name, and its rows."""
    rows = ["| model | ranks | schedule | model states | peak | on `h100-sxm` "
            "| GB sent within the node | GB sent across nodes | step (ms) "
            "| exposed comm (ms) |",
            "|---|---:|---|---:|---:|---|---:|---:|---:|---:|"]
    runs = []
    for label, key, config in MOE_MODELS:
        for ranks in MOE_RANKS:
            model = "%s-%d.mlir" % (os.path.basename(config), ranks)
            imp = ("zero-import --hf %s --batch %d --seq %d --dtype bf16 "
                   "--no-weights -o %s" % (config, ranks, MOE_SEQ, model))
            for column, name, options, planned_on in MOE_CONFIGS:
                if ranks not in planned_on:
                    continue
                cmd = ('%s && zero-opt %s --zero-pipeline="%s world-size=%d '
                       'ranks-per-node=8" --zero-report="format=text '
                       'hardware=h100-sxm" -o /dev/null' % (
                           imp, model, options, ranks))
                run_name = "moe_%s_%s_%d" % (key, name, ranks)
                env["moe_seq"] = MOE_SEQ
                r = runner.report(run_name, cmd)
                env[run_name] = r
                runs.append(r)
                rows.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |"
                            % (label, ranks, column,
                               size(r.model_state_bytes), size(r.peak_bytes),
                               verdict(r),
                               fixed(r.comm.intra_node_bytes_per_rank / 1e9, 1),
                               fixed(r.comm.inter_node_bytes_per_rank / 1e9, 1),
                               fixed(r.predicted_step_ms),
                               fixed(r.exposed_comm_ms)))
    return runs, "\n".join(rows) + "\n"


# The "Optimizers" table: Llama-3 8B (zero-model-gen's preset, one sequence
# of OPT_SEQ tokens per rank in bf16, the model of the Llama-3 section) at
# ZeRO-3 on OPT_RANKS ranks of `h100-sxm`, one row per entry of OPT_CONFIGS:
# its label, the name its run takes (opt_<name>) and zero-model-gen's
# optimizer options (none: the default, AdamW, the Llama-3 section's file).
# Beside each, DeepSpeed's ZeRO-3 with the same optimizer as the report's
# JSON gives it (`deepspeed`, DeepSpeedEstimators.h).
OPT_RANKS = 8
OPT_SEQ = 8192
OPT_CONFIGS = [("AdamW", "adamw", ""),
               ("Muon", "muon", "--optimizer muon"),
               ("Lion", "lion", "--optimizer lion"),
               ("Adafactor", "adafactor", "--optimizer adafactor"),
               ("SGD, momentum 0.9", "sgd", "--optimizer sgd --momentum 0.9"),
               ("AdamW, int8 states", "int8", "--optimizer-states int8"),
               ("AdamW, bf16 states", "bf16", "--optimizer-states bf16"),
               ("AdamW, bf16 masters and states", "bf16m",
                "--optimizer-states bf16 --bf16-masters")]


def optimizer_state_bytes(run):
    """A report's optimizer states per rank: its model_state_breakdown less
    the parameters, gradients and masters."""
    return sum(v for k, v in run.model_state_breakdown.items()
               if k not in ("params", "grads", "master_params"))


def optimizer_table(runner, env):
    """The runs of the Optimizers table, by name, and its rows."""
    rows = ["| optimizer | states (`model_state_breakdown`) | optimizer states "
            "| model states | DeepSpeed's model states | peak "
            "| GB sent by rank 0 | DeepSpeed's GB sent | step (ms) "
            "| exposed comm (ms) |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    runs = []
    env["opt_seq"], env["opt_ranks"] = OPT_SEQ, OPT_RANKS
    for label, name, options in OPT_CONFIGS:
        model = "llama-3-8b-%s.mlir" % (name if options else OPT_RANKS)
        gen = ("zero-model-gen llama --preset llama-3-8b --seq %d --batch %d "
               "--dtype bf16%s -o %s" % (OPT_SEQ, OPT_RANKS,
                                         " " + options if options else "",
                                         model))
        cmd = ('%s && zero-opt %s --zero-pipeline="stage=3 world-size=%d" '
               '--zero-report="format=text hardware=h100-sxm" -o /dev/null'
               % (gen, model, OPT_RANKS))
        r = runner.report("opt_" + name, cmd)
        env["opt_" + name] = r
        runs.append(r)
        ds = r.deepspeed
        states = ", ".join("`%s`" % k for k in r.model_state_breakdown
                           if k not in ("params", "grads", "master_params"))
        rows.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            label, states, size(optimizer_state_bytes(r)),
            size(r.model_state_bytes), size(ds.model_state_bytes),
            size(r.peak_bytes), fixed(r.comm.bytes_per_rank / 1e9, 1),
            fixed(ds.bytes_per_rank / 1e9, 1), fixed(r.predicted_step_ms),
            fixed(r.exposed_comm_ms)))
    return runs, "\n".join(rows) + "\n"


TABLES = {"moe": moe_table, "optimizers": optimizer_table}


def show(path):
    """A path as the repository names it, or absolute outside it."""
    path = os.path.abspath(path)
    inside = os.path.commonpath([path, ROOT]) == ROOT
    return os.path.relpath(path, ROOT) if inside else path


def where(text, pos):
    return "%s:%d" % (show(DOC_PATH), text.count("\n", 0, pos) + 1)


class Obj(dict):
    """A JSON object whose keys read as attributes."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError("no JSON key '%s' (keys: %s)" %
                                 (key, ", ".join(sorted(self))))


# The longest sequences ALST (arXiv 2506.13996, Arctic Long Sequence
# Training) reports training Llama-8B on, in tokens: one H100, one node of 8.
ALST = Obj(one_h100=500_000, one_node=3_700_000)


class Run:
    """One command's text output and, for a report, its JSON twin."""

    def __init__(self, name, cmd, text, data, is_zero_report=False):
        self.name, self.cmd, self.text, self.json = name, cmd, text, data
        self.is_zero_report = is_zero_report

    def __getattr__(self, key):
        if key.startswith("__") or not isinstance(self.json, dict):
            raise AttributeError(key)
        return getattr(self.json, key)

    # A JSON array (zero-tune's candidates) reads as a list.
    def __getitem__(self, i):
        return self.json[i]

    def __iter__(self):
        return iter(self.json)

    def __len__(self):
        return len(self.json)

    def row(self, label):
        """Bytes of the text table's row whose label starts with `label`."""
        rows = [int(m.group(2)) for m in re.finditer(
            r"^  (\S.*?)\s+(\d+)\s+\d+\.\d+ [KMGT]?i?B$", self.text, re.M)
            if m.group(1).startswith(label)]
        if len(rows) != 1:
            raise Failure("%s: %d rows start with '%s' in the output of %s" %
                          (self.name, len(rows), label, self.cmd))
        return rows[0]

    def formula(self):
        """The model-state formula the text report prints."""
        m = re.search(r"^Model states follow (.*?) \(S = ", self.text, re.M)
        if not m:
            raise Failure("%s: no 'Model states follow' line" % self.name)
        return m.group(1)

    def formula_holds(self):
        """The model-state bytes are the printed formula's value."""
        expr = re.sub(r"(\d*)S('?)", lambda m: "(%s*%s)" % (
            m.group(1) or "1", "Sp" if m.group(2) else "S"), self.formula())
        return eval(expr, {"__builtins__": {}}, {
            "S": self.param_count, "Sp": self.padded_param_count,
            "n": fractions.Fraction(self.world_size)}) == self.model_state_bytes


class Runner:
    def __init__(self, tools, workdir):
        self.tools, self.workdir, self.done = tools, workdir, {}
        self.cache_path = os.path.join(workdir, ".report-cache.json")
        try:
            with open(self.cache_path) as f:
                self.cache = json.load(f)
        except (OSError, ValueError):
            self.cache = {}

    def argv(self, words):
        tool = os.path.join(self.tools, words[0])
        if "/" in words[0] or not os.access(tool, os.X_OK):
            raise Failure("'%s' is not a tool in %s" % (words[0], self.tools))
        # The repository's examples (a model's config.json) by their path
        # from its root, as the page shows them.
        return [tool] + [os.path.join(ROOT, w) if w.startswith("examples/")
                         and os.path.exists(os.path.join(ROOT, w)) else w
                         for w in words[1:]]

    def written(self, argv):
        """The file a command writes (-o FILE), or None."""
        if "-o" in argv and argv[argv.index("-o") + 1:][:1] != ["/dev/null"]:
            return os.path.join(self.workdir, argv[argv.index("-o") + 1])
        return None

    @staticmethod
    def digest(path):
        with open(path, "rb") as f:
            return hashlib.sha1(f.read()).hexdigest()

    def cache_key(self, argv):
        """The command, the tool's size and time and the contents of the
        files and directories it reads."""
        st = os.stat(argv[0])
        stats = [st.st_size, st.st_mtime_ns]
        for w in argv[1:]:
            # A file named inside an option (`config=ds.json`,
            # `--zero-pipeline=...,config=ds.json`) is read as well.
            for name in [w] + re.split(r"[=,]", w)[1:]:
                path = os.path.join(self.workdir, name)
                if name and os.path.isfile(path) and \
                        path != self.written(argv):
                    stats.append([name, self.digest(path)])
                elif name and os.path.isdir(path) and name not in (".", ".."):
                    stats.append([name] + [
                        [f, self.digest(os.path.join(path, f))]
                        for f in sorted(os.listdir(path))
                        if os.path.isfile(os.path.join(path, f))])
        return json.dumps([argv, stats])

    def __call__(self, words):
        key = tuple(words)
        if key not in self.done:
            # `not CMD`: CMD must fail; its messages are its output.
            negate = words[0] == "not"
            argv = self.argv(words[1:] if negate else words)
            ckey = self.cache_key(argv)
            out = self.written(argv)
            hit = self.cache.get(ckey)
            # A command writing a file is cached with the file's digest.
            if out and hit is not None and not (
                    isinstance(hit, list) and os.path.isfile(out) and
                    self.digest(out) == hit[1]):
                hit = None
            if hit is not None:
                self.done[key] = hit[0] if out else hit
                return self.done[key]
            p = subprocess.run(argv, cwd=self.workdir, capture_output=True,
                               text=True)
            if negate and p.returncode == 0:
                raise Failure("'%s' succeeded; it should fail" %
                              shlex.join(words[1:]))
            if not negate and p.returncode != 0:
                raise Failure("'%s' failed (exit %d):\n%s" % (
                    shlex.join(words), p.returncode, p.stderr))
            self.done[key] = p.stderr if negate else p.stdout
            if out and not os.path.isfile(out):
                return self.done[key]
            self.cache[ckey] = [self.done[key], self.digest(out)] if out \
                else self.done[key]
            with open(self.cache_path, "w") as f:
                json.dump(self.cache, f)
        return self.done[key]

    def chain(self, cmd):
        """Runs `a && b && ...`; the last command's output."""
        words, out = shlex.split(cmd), ""
        while words:
            i = words.index("&&") if "&&" in words else len(words)
            out = self(words[:i])
            words = words[i + 1:]
        return out

    def report(self, name, cmd):
        text = self.chain(cmd)
        # The same command with format=json gives the numbers by key.
        words = shlex.split(cmd)
        last = len(words) - 1 - words[::-1].index("&&") if "&&" in words \
            else -1
        tail = words[last + 1:]
        data, is_zero_report = None, False
        if "--format=json" in tail or any(
                a == "--format" and b == "json" for a, b in zip(tail, tail[1:])):
            data = json.loads(text, object_hook=Obj)
        for i, w in enumerate(tail):
            if w.startswith("--zero-report=") and "format=text" in w:
                tail = tail[:i] + [w.replace("format=text", "format=json")] + \
                    tail[i + 1:]
                data = json.loads(self(tail), object_hook=Obj)
                is_zero_report = True
        return Run(name, cmd, text, data, is_zero_report)


def sh_commands(body, text, pos):
    m = re.search(r"```sh\n(.*?)```", body, re.S)
    if not m:
        raise Failure("%s: a report:run block holds no ```sh block" %
                      where(text, pos))
    return [c.strip() for c in re.sub(r"\\\n", " ", m.group(1)).splitlines()
            if c.strip()]


def n(x):
    return "{:,}".format(x)


def fixed(x, digits=0):
    return "%.*f" % (digits, x)


def gib(b, digits=2):
    return "%.*f GiB" % (digits, b / 2.0**30)


def mib(b, digits=2):
    return "%.*f MiB" % (digits, b / 2.0**20)


def size(b, digits=2):
    """As the text report prints sizes."""
    return gib(b, digits) if b >= 2**30 else mib(b, digits)


def missed(run):
    """The closest plan of a zero-tune run that found none within the
    budget: its configuration, peak and bytes over, and its largest item."""
    m = re.search(r"the smallest peak found, (.*?), is (\d+) bytes \([^)]*\), "
                  r"(\d+) bytes \([^)]*\) over; its largest item is (\w+): "
                  r"(\d+) bytes", run.text)
    if not m:
        raise Failure("%s: no 'smallest peak found' in the output of %s" %
                      (run.name, run.cmd))
    return Obj(config=m.group(1), peak_bytes=int(m.group(2)),
               over_bytes=int(m.group(3)), largest_item=m.group(4),
               largest_bytes=int(m.group(5)))


def zeropp(candidate):
    """A zero-tune --zeropp candidate's ZeRO++ and MiCS choice in words."""
    parts = []
    if candidate.hpz_partition_size > 1:
        parts.append("hpZ %d" % candidate.hpz_partition_size)
    if candidate.mics_shard_size > 0:
        parts.append("MiCS %d" % candidate.mics_shard_size)
    if candidate.quantized_weights:
        parts.append("qwZ")
    if candidate.quantized_gradients:
        parts.append("qgZ")
    return " + ".join(parts) or "ZeRO-3"


def verdict(run):
    """The fit verdict of a run, short enough for a table cell."""
    fit = run.fit
    if fit.fits:
        return "fits, %s free" % size(fit.free_bytes)
    return "short by %s" % size(-fit.free_bytes)


def expand(text, runner):
    """The page with its outputs and values regenerated, and the list of
    problems only the prose can fix."""
    env = {"__builtins__": {}, "n": n, "fixed": fixed, "gib": gib, "mib": mib,
           "size": size, "verdict": verdict,
           "optimizer_state_bytes": optimizer_state_bytes, "zeropp": zeropp, "missed": missed, "all": all, "any": any, "min": min, "max": max,
           "abs": abs, "round": round, "int": int, "len": len, "sum": sum,
           "alst": ALST}
    runs, problems = [], []
    pieces, last = [], 0
    for m in BLOCK.finditer(text):
        kind, name, cmd, body = m.groups()
        if kind == "run":
            for c in sh_commands(body, text, m.start()):
                if c.split()[0] == "zero-model-gen":
                    words = shlex.split(c)
                    env["gen"] = Obj(
                        (w[2:], int(v) if v.isdigit() else v)
                        for w, v in zip(words, words[1:] + [""])
                        if w.startswith("--"))
                runner.chain(c)
            continue
        run = runner.report(name, cmd)
        env[name] = run
        runs.append(run)
        pieces += [text[last:m.start(4)],
                   "```\n$ %s\n%s```\n" % (cmd, run.text)]
        last = m.end(4)
    pieces.append(text[last:])
    text = "".join(pieces)
    for m in DATA.finditer(text):
        env[m.group(1)] = runner.report(m.group(1), m.group(2))
        runs.append(env[m.group(1)])
    pieces, last = [], 0
    for m in TABLE.finditer(text):
        if m.group(1) not in TABLES:
            raise Failure("%s: no table '%s' (the script has %s)" % (
                where(text, m.start()), m.group(1), ", ".join(TABLES)))
        table_runs, table = TABLES[m.group(1)](runner, env)
        runs += table_runs
        pieces += [text[last:m.start(2)], table]
        last = m.end(2)
    pieces.append(text[last:])
    text = "".join(pieces)
    # The zero-report runs (zero-tune's are lists of candidates, and
    # zero-estimate's JSON is another document).
    env["runs"] = [r for r in runs if r.is_zero_report]

    def value(m):
        kind, expr, old = m.groups()
        if "--" in expr:
            # CommonMark ends an inline comment at "--": it would show.
            problems.append("%s: '--' in the marker '%s'" % (
                where(text, m.start()), expr))
        line = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
        if re.fullmatch(r"\s*(?:(?:[*+>-]|\d+\.)\s+)*", line):
            problems.append("%s: an inline marker starts the line, which "
                            "Markdown would show as HTML" %
                            where(text, m.start()))
        try:
            v = eval(expr, env)
        except Failure as e:
            raise Failure("%s: %s" % (where(text, m.start()), e))
        except Exception as e:
            raise Failure("%s: cannot evaluate '%s': %s" % (
                where(text, m.start()), expr, e))
        if kind == "?":
            if not v:
                problems.append("%s: the claim '%s' (%s) is false with the "
                                "tools' output; the prose must change" % (
                                    where(text, m.start()), old, expr))
            return m.group(0)
        return "<!--=%s-->%s<!--/-->" % (expr, v)

    text = INLINE.sub(value, text)
    for m in re.finditer(r"<!--[=?]", INLINE.sub("", text)):
        problems.append("%s: a marker without its <!--/-->" %
                        where(text, m.start()))
    problems += unchecked_numbers(text)
    problems += key_table(text, [(r.name, r.json) for r in runs
                                 if r.is_zero_report])
    return text, problems


def unchecked_numbers(text):
    """Numbers in the prose that no marker generates or checks."""
    problems = []
    for pattern in (TABLE.pattern, r"^<!--.*?-->$", r"^```.*?^```$",
                    INLINE.pattern,
                    r"`[^`\n]*`", NAMES.pattern):
        text = re.sub(pattern, lambda m: re.sub(r"[^\n]", " ", m.group(0)),
                      text, flags=re.S | re.M)
    for m in re.finditer(r"\d+(?:[.,]\d+)*", text):
        problems.append("%s: the number %s is neither generated "
                        "(<!--=EXPR-->%s<!--/-->) nor checked "
                        "(<!--?EXPR-->...<!--/-->)" % (
                            where(text, m.start()), m.group(0), m.group(0)))
    return problems


def key_table(text, reports):
    """The table headed `| JSON key | meaning |` names the keys every JSON
    report has, and no other: `reports` is a list of (name, JSON object).
    A key under a null object (`fit` without device memory) is present."""
    m = re.search(r"^\| JSON key \| meaning \|\n\|---\|---\|\n((?:\|.*\n)+)",
                  text, re.M)
    if not m:
        return ["%s: no '| JSON key | meaning |' table" % show(DOC_PATH)]
    at = where(text, m.start())
    rows = []
    for line in m.group(1).splitlines():
        cells = line.strip("|").split("|", 1)
        keys = re.findall(r"`([^`]+)`", cells[0])
        rows.append((keys, set(re.findall(r"`(\w+)`", cells[1]))))
    problems = []
    listed = {k for keys, _ in rows for k in keys}
    missing = object()

    def lookup(doc, path):
        for part in path.split("."):
            if doc is None:
                return None
            if not isinstance(doc, dict) or part not in doc:
                return missing
            doc = doc[part]
        return doc

    def parent_listed(path):
        return any(x.startswith(path + ".") for x in listed)

    def walk(doc, prefix, seen):
        for key, v in doc.items():
            path = prefix + key
            if path in seen or path in MAP_KEYS:
                continue
            if isinstance(v, dict) and parent_listed(path):
                yield from walk(v, path + ".", seen)
            elif v is not None or not parent_listed(path):
                yield path

    undocumented = {}
    for keys, meaning in rows:
        for k in keys:
            found = [(name, lookup(r, k)) for name, r in reports]
            lacking = [name for name, f in found if f is missing]
            if reports and len(lacking) == len(reports):
                problems.append("%s: the table lists `%s`, which the JSON "
                                "report does not have" % (at, k))
                continue
            if lacking:
                problems.append("%s: the table lists `%s`, which the JSON "
                                "report%s of %s lack%s" % (
                                    at, k, "s" if len(lacking) > 1 else "",
                                    ", ".join(lacking[:3]) + (
                                        " and %d more" % (len(lacking) - 3)
                                        if len(lacking) > 3 else ""),
                                    "" if len(lacking) > 1 else "s"))
            # An object described in one row names its keys in the meaning.
            if k in MAP_KEYS or parent_listed(k):
                continue
            for name, obj in found:
                if isinstance(obj, dict) and k in SOME_OF_KEYS and \
                        set(obj) <= meaning:
                    continue
                if isinstance(obj, dict) and meaning != set(obj):
                    problems.append("%s: the row of `%s` names %s; the JSON "
                                    "object of %s has %s" % (
                                        at, k, sorted(meaning), name,
                                        sorted(obj)))
                    break
    for name, r in reports:
        # The keys of a row's object are its own.
        seen = set(listed)
        for keys, _ in rows:
            for k in keys:
                obj = lookup(r, k)
                if isinstance(obj, dict) and k not in MAP_KEYS and \
                        not parent_listed(k):
                    seen.update(k + "." + x for x in obj)
        for p in walk(r, "", seen):
            undocumented.setdefault(p, name)
    for p in sorted(undocumented):
        problems.append("%s: the JSON report's key `%s` is not in the table" %
                        (at, p))
    return problems


def check_keys(paths):
    """Each JSON report file has every key of the page's table and no
    other; the problems found."""
    with open(DOC_PATH) as f:
        text = f.read()
    reports = []
    for path in paths:
        try:
            with open(path) as f:
                report = json.load(f)
        except (OSError, ValueError) as e:
            return ["%s: not a JSON report: %s" % (show(path), e)]
        if not isinstance(report, dict):
            return ["%s: not a JSON report: not an object" % show(path)]
        reports.append((show(path), report))
    return key_table(text, reports)


def main():
    global DOC_PATH
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--check", action="store_true",
                   help="change nothing; exit 1 with a diff if the page is "
                        "not what the tools print")
    p.add_argument("--tools", default=os.path.join(ROOT, "build", "bin"),
                   help="the built zero-opt and zero-model-gen "
                        "(default: build/bin)")
    p.add_argument("--doc", default=DOC,
                   help="the page (default: docs/Report.md)")
    p.add_argument("--workdir", help="scratch directory for the model files "
                   "(default: a temporary one)")
    p.add_argument("--keys", nargs="+", metavar="REPORT.json",
                   help="run nothing; exit 1 unless each JSON report (zero-opt "
                        "--zero-report=format=json) has every key of the "
                        "page's table and no other")
    args = p.parse_args()
    DOC_PATH = args.doc
    if args.keys:
        problems = check_keys(args.keys)
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            print("%d problem(s) between the JSON reports and the key table "
                  "of %s" % (len(problems), show(args.doc)), file=sys.stderr)
            return 1
        print("%d report(s) have every key of %s's table and no other" % (
            len(args.keys), show(args.doc)))
        return 0
    with open(args.doc) as f:
        old = f.read()
    regen = "python3 scripts/update-report-doc.py"
    if os.path.abspath(args.tools) != os.path.join(ROOT, "build", "bin"):
        regen += " --tools " + show(args.tools)
    if os.path.abspath(args.doc) != DOC:
        regen += " --doc " + show(args.doc)
    try:
        if args.workdir:
            os.makedirs(args.workdir, exist_ok=True)
            new, problems = expand(old, Runner(args.tools, args.workdir))
        else:
            with tempfile.TemporaryDirectory() as d:
                new, problems = expand(old, Runner(args.tools, d))
    except Failure as e:
        print("update-report-doc: %s" % e, file=sys.stderr)
        return 2
    status = 0
    if new != old:
        if args.check:
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), new.splitlines(True),
                show(args.doc), "what the tools print now"))
            sys.stdout.flush()
            print("%s differs from the tools' output; regenerate it with\n"
                  "  %s\n(from the repository root)" % (show(args.doc), regen),
                  file=sys.stderr)
            status = 1
        else:
            with open(args.doc, "w") as f:
                f.write(new)
            print("updated %s" % args.doc)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print("%d problem(s) in the prose of %s: regeneration cannot fix "
              "them, edit the page" % (len(problems),
                                       show(args.doc)),
              file=sys.stderr)
        status = 1
    return status


if __name__ == "__main__":
    DOC_PATH = DOC
    sys.exit(main())
