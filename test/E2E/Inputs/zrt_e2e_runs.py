"""The subcommands of zrt_e2e.py that run a tool under a condition (a
read-only directory, in the background, a signal while it runs, repeated)
or check what a run traced, tracked or evaluated, and an elastic
restart."""

import hashlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

from zrt_e2e_checks import fail, read_log, read_safetensors, rel_diff
from zrt_e2e_train import check_peak, run


# Mounts DIR read-only, then runs the command, inside new user and mount
# namespaces: `unshare --map-root-user` needs no privilege where
# unprivileged user namespaces are allowed, and the tests run as root, for
# whom permission bits do not stop a write.
READ_ONLY_SCRIPT = r"""
dir=$1 mode=$2; shift 2
if [ "$mode" = bind ]; then
  mount --bind "$dir" "$dir" && mount -o remount,bind,ro "$dir" || exit 125
elif [ "$mode" = small ]; then
  mount -t tmpfs -o size=64k zrt-small "$dir" || exit 125
elif [ "$mode" = ramfs ]; then
  mount -t ramfs zrt-ramfs "$dir" || exit 125
else
  mount -t tmpfs -o ro,size=64k zrt-read-only "$dir" || exit 125
fi
exec "$@"
"""


def read_only_argv(directory, bind, cmd, mode=None):
    return (["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
             READ_ONLY_SCRIPT, "sh", directory,
             mode or ("bind" if bind else "tmpfs")] + cmd)


def cmd_read_only(args):
    """Runs a command with DIR on a read-only file system (EROFS on every
    write): an empty read-only tmpfs mounted over DIR, or with --bind DIR
    itself (its files) re-mounted read-only; with --small DIR is a writable
    but tiny (64 KiB) tmpfs instead, a nearly full disk, and with --ramfs a
    writable ramfs (which refuses O_DIRECT). --probe instead exits 0 if
    that works here (a write into DIR fails with EROFS), non-zero with the
    reason otherwise; lit.local.cfg sets the read-only-mount feature from
    it."""
    if args.probe:
        with tempfile.TemporaryDirectory() as d:
            write = ("import errno, sys\n"
                     "try:\n"
                     "    open(sys.argv[1] + '/probe', 'w')\n"
                     "except OSError as e:\n"
                     "    sys.exit(0 if e.errno == errno.EROFS else 3)\n"
                     "sys.exit(4)\n")
            try:
                res = subprocess.run(
                    read_only_argv(d, False, [sys.executable, "-c", write, d]),
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                    text=True, timeout=30)
            except (OSError, subprocess.TimeoutExpired) as e:
                print("cannot run unshare: %s" % e)
                sys.exit(1)
            if res.returncode != 0:
                print("no read-only mount in a user namespace (status %d): %s"
                      % (res.returncode, res.stdout.strip()))
            sys.exit(res.returncode)
    cmd = args.cmd[1:] if args.cmd and args.cmd[0] == "--" else args.cmd
    if not args.dir or not cmd:
        fail("read-only needs DIR -- CMD...")
    argv = read_only_argv(args.dir, args.bind, cmd,
                          "small" if args.small else
                          "ramfs" if args.ramfs else None)
    os.execvp(argv[0], argv)


def start_background(cmd):
    """Starts `cmd` in its own session with its output (stdout and stderr)
    in a temporary file; returns the process and the file. The file is
    polled while the ranks write to it, so a read can end inside a UTF-8
    character: decode with replacement."""
    out = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    return proc, out


def wait_for_line(proc, out, pattern, within):
    """Waits until the output of `proc` has a line matching `pattern`."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        out.seek(0)
        if any(re.search(pattern, l) for l in out.read().splitlines()):
            return
        if proc.poll() is not None:
            out.seek(0)
            print(out.read()[-3000:])
            fail("exited (status %d) before a line matched %r" %
                 (proc.returncode, pattern))
        time.sleep(0.05)
    kill_session(proc)
    fail("no line matched %r within %g s" % (pattern, within))


def live_session_members(sid):
    """Processes of a session that are not zombies (from /proc)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:
            members.append(int(entry))
    return members


def kill_session(proc, within=30):
    """SIGKILLs every process of the session `proc` leads (started with
    start_new_session; Open MPI puts each rank in a process group of its
    own, so killing mpirun's group is not enough) and waits until they have
    all ended."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        members = live_session_members(proc.pid)
        if not members:
            break
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    proc.wait()


def split_then(cmd):
    cmd = cmd[1:] if cmd and cmd[0] == "--" else cmd
    if "--then" not in cmd:
        return cmd, []
    k = cmd.index("--then")
    return cmd[:k], cmd[k + 1:]


def cmd_beside(args):
    """Runs the first command in the background until a line of its output
    matches --after, then the second command (after --then) to its end, then
    kills the first (SIGKILL, its whole process group). Prints the second
    command's output and exit status."""
    first, second = split_then(args.cmd)
    proc, out = start_background(first)
    wait_for_line(proc, out, args.after, args.within)
    res = subprocess.run(second, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True,
                         timeout=args.within + 30)
    kill_session(proc)
    sys.stdout.write(res.stdout)
    print("second command: exit status %d" % res.returncode)


def cmd_during(args):
    """Runs a command until a line of its output matches --after, then
    sends it --signal (to the process, e.g. mpirun, which forwards it) or
    truncates --truncate FILE to zero bytes (--again-after PATTERN: sends
    the signal a second time once a line matches PATTERN), and waits for it
    to end within --within seconds. Prints its output and how it ended."""
    cmd = args.cmd[1:] if args.cmd and args.cmd[0] == "--" else args.cmd
    proc, out = start_background(cmd)
    wait_for_line(proc, out, args.after, args.within)
    if args.signal:
        proc.send_signal(getattr(signal, "SIG" + args.signal))
    if args.signal and args.again_after:
        wait_for_line(proc, out, args.again_after, args.within)
        proc.send_signal(getattr(signal, "SIG" + args.signal))
    if args.truncate:
        os.truncate(args.truncate, 0)
    try:
        proc.wait(timeout=args.within)
    except subprocess.TimeoutExpired:
        kill_session(proc)
        fail("still running %g s after the action (a hang)" % args.within)
    out.seek(0)
    sys.stdout.write(out.read())
    if proc.returncode < 0:
        print("ended by signal %d" % -proc.returncode)
    else:
        print("exit status %d" % proc.returncode)


def cmd_repeat(args):
    """Compiles the model for each stage, trains it twice with the same seed
    and checks that the two --log-json files agree exactly in every field
    but the timing ones (loss and grad_norm included), for every step."""
    os.makedirs(args.work, exist_ok=True)
    timing = {"step_ms"}
    for stage in [int(s) for s in args.stages.split(",")]:
        name = os.path.join(args.work, "s%d_w%d" % (stage, args.world))
        run([args.compiler, args.model, "--stage", str(stage),
             "--world-size", str(args.world), "-o", name] +
            shlex.split(args.compile_args))
        logs = []
        for k, extra in enumerate([args.first_args, args.second_args]):
            path = "%s.run%d.json" % (name, k)
            run(shlex.split(args.mpirun) + ["-np", str(args.world), name,
                "--quiet", "--steps", str(args.steps), "--log-json", path] +
                shlex.split(args.train_args) + shlex.split(extra))
            logs.append(read_log(path))
        a, b = logs
        if len(a) != args.steps or len(b) != args.steps:
            fail("stage %d: %d and %d log lines for %d steps" %
                 (stage, len(a), len(b), args.steps))
        for x, y in zip(a, b):
            for key in sorted(set(x) | set(y)):
                if key in timing:
                    continue
                if key not in x or key not in y or \
                        json.dumps(x[key]) != json.dumps(y[key]):
                    fail("stage %d step %d: %s %r != %r" %
                         (stage, x["step"], key, x.get(key), y.get(key)))
        if any(l["grad_norm"] is None for l in a):
            fail("stage %d: a non-finite gradient norm" % stage)
        print("stage %d, world %d: %d steps, loss and grad_norm bitwise "
              "identical in both runs" % (stage, args.world, args.steps))
    print("OK")


def cmd_fp32_states(args):
    """fp32 training, where the parameters are their own masters: for every
    stage and world size, the report's model states follow 16S, 8S + 8S'/n,
    4S + 12S'/n or 16S'/n exactly (S and S' as reported, no master buffer),
    the runtime measures the planned peak, and the losses, gradient norms
    and exported weights agree with --ref (recorded when fp32 training still
    kept a separate master copy): bitwise on the CPU it was recorded on.
    The runtime is compiled for the host's vector ISA, so another CPU may
    round some reductions differently: the values must be within
    --ref-tolerance everywhere, and the last line says whether they are
    bitwise."""
    os.makedirs(args.work, exist_ok=True)
    ref = {(r["model"], r["stage"], r["world"]): r
           for r in json.load(open(args.ref))}
    runs = {}
    formulas = [("16S", 16, 0), ("8S + 8S'/n", 8, 8), ("4S + 12S'/n", 4, 12),
                ("16S'/n", 0, 16)]
    for world in [int(w) for w in args.worlds.split(",")]:
        for stage in [int(s) for s in args.stages.split(",")]:
            what = "%s stage %d, world %d" % (args.name, stage, world)
            name = os.path.join(args.work, "%s_s%d_w%d" % (args.name, stage,
                                                           world))
            report = json.loads(run([
                args.opt, args.model, "--zero-pipeline=stage=%d world-size=%d "
                "dtype=fp32" % (stage, world),
                "--zero-report=format=json hardware=cpu", "-o", os.devnull]))
            S, Sp = report["param_count"], report["padded_param_count"]
            text, full, shard = formulas[stage]
            if Sp % world:
                fail("%s: S' = %d is no multiple of n" % (what, Sp))
            want = full * S + shard * Sp // world
            states = report["model_state_bytes"]
            parts = report["model_state_breakdown"]
            if states != want or sum(parts.values()) != states or \
                    parts["master_params"] != 0 or \
                    report["param_dtype"] != "fp32":
                fail("%s: model states %d, %s = %d (S = %d, S' = %d): %r" %
                     (what, states, text, want, S, Sp, report))
            run([args.compiler, args.model, "--stage", str(stage),
                 "--world-size", str(world), "--dtype", "fp32", "-o", name])
            out = run(shlex.split(args.mpirun) + [
                "-np", str(world), name, "--quiet", "--steps", str(args.steps),
                "--log-json", name + ".json", "--export",
                name + ".safetensors"] + shlex.split(args.train_args))
            m = re.search(r"peak memory: measured (\d+) bytes .*, planned "
                          r"(\d+) bytes", out)
            if not m or m.group(1) != m.group(2) or \
                    int(m.group(2)) != report["peak_bytes"]:
                fail("%s: peak line %r, report peak %d" %
                     (what, m and m.group(0), report["peak_bytes"]))
            log = read_log(name + ".json")
            r = ref[(args.name, stage, world)]
            # The tensor data: the header names the tensors and the step.
            sha = hashlib.sha256(
                read_safetensors(name + ".safetensors")[2]).hexdigest()
            got = {"loss": [l["loss"] for l in log],
                   "grad_norm": [l["grad_norm"] for l in log],
                   "export_data_sha256": sha}
            for key in ["loss", "grad_norm"]:
                if len(got[key]) != len(r[key]) or max(
                        rel_diff(a, b) for a, b in
                        zip(got[key], r[key])) > args.ref_tolerance:
                    fail("%s: %s %r, reference %r" %
                         (what, key, got[key], r[key]))
            runs[(stage, world)] = got
            print("%s: model states %d = %s (S = %d, S' = %d); peak %s "
                  "measured == planned; %d losses within %g of the "
                  "reference" % (what, states, text, S, Sp, m.group(1),
                                 len(log), args.ref_tolerance))
    same = all(runs[c] == {k: ref[(args.name,) + c][k] for k in runs[c]}
               for c in runs)
    print("losses, gradient norms and exported weights: %s" %
          ("bitwise equal to the reference" if same else
           "within the tolerance (not bitwise: another CPU)"))
    print("OK")


def cmd_trace(args):
    """A Chrome trace with one span per step (and per evaluation)."""
    doc = json.load(open(args.file))
    names = [e["name"] for e in doc["traceEvents"]]
    steps = [n for n in names if n.startswith("step ")]
    # Spans, and the memory counter tracks (see cmd_memory_track).
    if len(steps) != args.steps or names.count("eval") != args.evals or any(
            e["ph"] != "X" and not (e["ph"] == "C" and
                                    e["name"] in ("memory", "op index"))
            for e in doc["traceEvents"]):
        fail("unexpected trace events: %r" % names[:20])
    print("trace: %d step spans, %d events" % (len(steps), len(names)))
    if args.evals:
        print("trace: %d evaluation spans" % args.evals)
    # Kernel spans (the CPU backend's entry points) lie inside the steps (or
    # evaluations) and never overlap a collective wait of the same rank.
    events = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    step_spans = [e for e in events
                  if e["name"].startswith("step ") or e["name"] == "eval"]
    waits = [e for e in events if e["name"].startswith("wait ")]
    eps = 1.0  # us: spans are rounded to microseconds and clocks differ
    for k in kernels:
        if not any(s["ts"] - eps <= k["ts"] and
                   k["ts"] + k["dur"] <= s["ts"] + s["dur"] + eps
                   for s in step_spans):
            fail("kernel span %r outside every step" % k["name"])
        for w in waits:
            if (k["ts"] + eps < w["ts"] + w["dur"] and
                    w["ts"] + eps < k["ts"] + k["dur"]):
                fail("kernel span %r overlaps %r" % (k["name"], w["name"]))
    if not kernels or not waits:
        fail("no kernel spans (%d) or no collective waits (%d)" %
             (len(kernels), len(waits)))
    print("kernels: %d spans of %d entry points inside the steps, "
          "%d collective waits" % (len(kernels),
                                   len(set(k["name"] for k in kernels)),
                                   len(waits)))


def cmd_swap_spans(args):
    """Parameter shards on NVMe in a --trace: in every step, each "read
    params from nvme" submission is followed by a "wait disk read params"
    (blocked on the file, inside the transfer's zrt_ctx_wait) and a "copy
    params to device" (out of the swap buffer), and each "write params to
    nvme" by a "wait disk write params"; prints the counts per step."""
    events = sorted((e for e in json.load(open(args.file))["traceEvents"]
                     if e["ph"] == "X"), key=lambda e: e["ts"])
    steps = [e for e in events if e["name"].startswith("step ")]
    if len(steps) != args.steps:
        fail("%d step spans, expected %d" % (len(steps), args.steps))
    names = ("read params from nvme", "wait disk read params",
             "copy params to device", "write params to nvme",
             "wait disk write params")
    counts = set()
    for s in steps:
        inside = [e for e in events if e["name"] in names and
                  s["ts"] <= e["ts"] < s["ts"] + s["dur"]]
        for submit, waited in ((names[0], names[1]), (names[3], names[4])):
            pending = 0
            for e in inside:
                if e["name"] == submit:
                    pending += 1
                elif e["name"] == waited:
                    if pending == 0:
                        fail("%s: '%s' before its submission" %
                             (s["name"], waited))
                    pending -= 1
            if pending:
                fail("%s: %d '%s' never waited for in the step" %
                     (s["name"], pending, submit))
        n = tuple(sum(1 for e in inside if e["name"] == x) for x in names)
        if n[0] == 0 or n[3] == 0 or n[0] != n[2]:
            fail("%s: %s" % (s["name"], n))
        counts.add(n)
    for n in sorted(counts):
        print("%d steps: %d shard reads, %d disk waits, %d copies to the "
              "device; %d shard writes, %d disk waits" % ((len(steps),) + n))


def cmd_streamed_copies(args):
    """An offloaded optimizer's gradient copies in a --trace: every "copy to
    host" span lies in the last micro step of its step (none in the earlier
    micro steps or the boundary), several per step (one per bucket), the
    first of each step followed by backward kernels of the same micro step;
    every "copy to device" span lies in the boundary. With
    --staged-params (parameter shards offloaded too) nothing goes back to
    the device (the host Adam updates the host shards) and every micro step
    stages shards for its gathers ("copy params to device")."""
    events = [e for e in json.load(open(args.file))["traceEvents"]
              if e["ph"] == "X"]
    eps = 1.0  # us: spans are rounded to microseconds

    def inside(e, s):
        return s["ts"] - eps <= e["ts"] and \
            e["ts"] + e["dur"] <= s["ts"] + s["dur"] + eps

    last = "micro step %d" % (args.micro_steps - 1)
    micro = [e for e in events if e["name"].startswith("micro step ")]
    boundaries = [e for e in events if e["name"] == "boundary"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    downloads = [e for e in events if e["name"] == "copy to host"]
    uploads = [e for e in events if e["name"] == "copy to device"]
    per_step = []
    for m in micro:
        copies = [c for c in downloads if inside(c, m)]
        if m["name"] != last:
            if copies:
                fail("%d copies to the host in %s" % (len(copies), m["name"]))
            continue
        if len(copies) < 2:
            fail("%d copies to the host in %s, expected one per bucket" %
                 (len(copies), last))
        first_end = min(c["ts"] + c["dur"] for c in copies)
        if not any(inside(k, m) and k["ts"] >= first_end for k in kernels):
            fail("no kernel after the first copy of %s" % last)
        per_step.append(len(copies))
    if len(per_step) != args.steps or sum(per_step) != len(downloads):
        fail("copies to the host outside the last micro steps: %d of %d" %
             (sum(per_step), len(downloads)))
    if args.staged_params:
        staged = [e for e in events if e["name"] == "copy params to device"]
        back = uploads + [e for e in events
                          if e["name"] == "copy params to host"]
        if back:
            fail("%d copies of parameters back from the host" % len(back))
        counts = [len([c for c in staged if inside(c, m)]) for m in micro]
        if min(counts) == 0 or len(set(counts)) != 1 or \
                sum(counts) != len(staged):
            fail("staged parameter copies per micro step %r, %d in all" %
                 (counts, len(staged)))
        print("%d steps: %d copies to the host in %s of each, under the "
              "backward; %d staged parameter copies in each micro step, none "
              "back" % (len(per_step), per_step[0], last, counts[0]))
        return
    if not uploads or not all(any(inside(u, b) for b in boundaries)
                              for u in uploads):
        fail("copies to the device outside the boundary")
    print("%d steps: %d copies to the host in %s of each, under the "
          "backward; %d copies to the device in the boundaries" %
          (len(per_step), per_step[0], last, len(uploads)))


def cmd_memory_track(args):
    """The "memory" counter track of a rank's trace against the peak line
    the run printed: the largest allocated total (the stacked args: both
    arenas whole plus the scratch in use) is the measured peak, which is
    the planned peak; the live part never exceeds it."""
    out = open(args.output).read()
    m = re.search(r"peak memory: measured (\d+) bytes \(kernel scratch "
                  r"(\d+)\), planned (\d+) bytes", out)
    if not m:
        fail("no 'peak memory:' line in %s" % args.output)
    measured, scratch, planned = (int(g) for g in m.groups())
    doc = json.load(open(args.file))
    events = doc["traceEvents"]
    memory = [e for e in events if e["ph"] == "C" and e["name"] == "memory"]
    ops = [e for e in events if e["ph"] == "C" and e["name"] == "op index"]
    if not memory or len(ops) != len(memory):
        fail("%d memory samples, %d op index samples" %
             (len(memory), len(ops)))
    plan = doc["zeroMemoryPlan"]
    total = max(sum(e["args"].values()) for e in memory)
    live = max(e["args"]["persistent"] + e["args"]["step_arena_live"] +
               e["args"]["kernel_scratch"] for e in memory)
    top_scratch = max(e["args"]["kernel_scratch"] for e in memory)
    arena = {e["args"]["step_arena_live"] + e["args"]["step_arena_unused"]
             for e in memory}
    if arena != {plan["arena_bytes"]}:
        fail("the step arena is not the planned %d bytes: %r" %
             (plan["arena_bytes"], sorted(arena)))
    if total != measured or measured != planned:
        fail("memory track max %d, measured peak %d, planned peak %d" %
             (total, measured, planned))
    if top_scratch != scratch:
        fail("largest scratch in the track %d, printed %d" %
             (top_scratch, scratch))
    if not 0 < live <= total:
        fail("live bytes %d outside (0, %d]" % (live, total))
    # The op index of every sample lies in the plan (-1: before the first
    # op).
    n = len(plan["live_bytes"])
    bad = [e["args"]["op"] for e in ops if not -1 <= e["args"]["op"] < n]
    if bad:
        fail("op indices outside the plan's %d ops: %r" % (n, bad[:5]))
    print("rank %d: %d memory samples over %d ops; track max %d == measured "
          "peak %d == planned peak %d; scratch max %d; live max %d" %
          (plan["rank"], len(memory), n, total, measured, planned,
           top_scratch, live))


def cmd_evaluation(args):
    """Evaluation (--eval-*) of a compiled executable against its training:
    a run that evaluates every --every steps and after the last step logs
    eval_loss exactly there and otherwise the same values bit for bit as a
    run without (loss, grad_norm, loss scales, skips, Adam steps, measured
    == planned peak) and exports the same weights; the first training batch
    evaluated before step 1 (--steps 0) gives the training loss of step 1,
    bitwise; with --shifted-args (held-out data that start at the second
    training batch) the evaluation after step 1 gives the training loss of
    step 2, bitwise, and two batches evaluated together give the mean of the
    two evaluated alone (1e-6)."""
    os.makedirs(args.work, exist_ok=True)
    w = lambda name: os.path.join(args.work, name)
    exe = shlex.split(args.mpirun) + ["-np", str(args.np), args.exe, "--quiet"]
    train = shlex.split(args.train_args)

    def train_log(name, extra):
        run(exe + train + extra + ["--log-json", w(name + ".json")],
            log=w(name + ".out"))
        return read_log(w(name + ".json"))

    steps = args.steps
    base = train_log("base", ["--steps", str(steps), "--export", w("base.st")])
    ev = train_log("eval", shlex.split(args.eval_args) + [
        "--steps", str(steps), "--eval-every", str(args.every),
        "--eval-batches", str(args.batches), "--export", w("eval.st")])
    if len(base) != steps or len(ev) != steps:
        fail("%d and %d log lines for %d steps" % (len(base), len(ev), steps))
    check_peak(ev, "with evaluation")
    expected = [s for s in range(1, steps + 1)
                if s % args.every == 0 or s == steps]
    evaluated = [l["step"] for l in ev if "eval_loss" in l]
    if evaluated != expected:
        fail("eval_loss at steps %s, expected %s" % (evaluated, expected))
    for a, b in zip(base, ev):
        for key in sorted(set(a) | set(b)):
            if key in ("step_ms", "eval_loss"):
                continue
            if a.get(key) != b.get(key):
                fail("step %d: %s %r without evaluation, %r with" %
                     (a["step"], key, a.get(key), b.get(key)))
    if open(w("base.st"), "rb").read() != open(w("eval.st"), "rb").read():
        fail("the exported weights differ")
    print("%d steps evaluated at steps %s (eval_loss %s): every other field "
          "and the exported weights bitwise those of training alone" %
          (steps, ", ".join(map(str, expected)),
           ", ".join("%.4f" % l["eval_loss"] for l in ev if "eval_loss" in l)))

    first = train_log("first", shlex.split(args.same_args) + [
        "--steps", "0", "--eval-batches", "1"])
    if len(first) != 1 or first[0]["step"] != 0 or \
            first[0]["eval_loss"] != base[0]["loss"]:
        fail("the first batch evaluated before step 1: %r, training loss of "
             "step 1: %r" % (first, base[0]["loss"]))
    print("before step 1, the first training batch: eval_loss %r == the "
          "loss of step 1" % first[0]["eval_loss"])
    if not args.shifted_args:
        return
    after = train_log("after", shlex.split(args.shifted_args) + [
        "--steps", "1", "--eval-batches", "1"])
    if after[0].get("eval_loss") != base[1]["loss"]:
        fail("the second batch evaluated after step 1: %r, training loss of "
             "step 2: %r" % (after[0].get("eval_loss"), base[1]["loss"]))
    print("after step 1, the second training batch: eval_loss %r == the "
          "loss of step 2" % after[0]["eval_loss"])
    alone = train_log("alone", shlex.split(args.shifted_args) + [
        "--steps", "0", "--eval-batches", "1"])
    both = train_log("both", shlex.split(args.same_args) + [
        "--steps", "0", "--eval-batches", "2"])
    mean = (first[0]["eval_loss"] + alone[0]["eval_loss"]) / 2
    if rel_diff(mean, both[0]["eval_loss"]) > 1e-6:
        fail("two batches: eval_loss %r, the mean of each alone %r" %
             (both[0]["eval_loss"], mean))
    print("two batches: eval_loss %.6f, the mean of each alone %.6f" %
          (both[0]["eval_loss"], mean))


def cmd_elastic(args):
    """The --log-json of an elastic run: one line per step 1..--steps, the
    world size --worlds A,B up to step --restart-after and after it; and
    zero-run's measured time from the failed run's last step to the first
    resumed step (--out), at most --within seconds."""
    log = read_log(args.log)
    steps = [l["step"] for l in log]
    if steps != list(range(1, args.steps + 1)):
        fail("logged steps %s, expected 1..%d once each" % (steps, args.steps))
    before, after = (int(w) for w in args.worlds.split(","))
    for l in log:
        want = before if l["step"] <= args.restart_after else after
        if l.get("world_size") != want:
            fail("step %d: world_size %r, expected %d" %
                 (l["step"], l.get("world_size"), want))
    text = open(args.out).read()
    m = re.search(r"zero-run: elastic: step (\d+) at world size (\d+): "
                  r"([0-9.]+) s after the failed run's last step", text)
    if not m:
        fail("zero-run printed no time to the first resumed step")
    if int(m.group(1)) != args.restart_after + 1 or int(m.group(2)) != after:
        fail("the first resumed step is %s at world size %s" % m.groups()[:2])
    seconds = float(m.group(3))
    if seconds > args.within:
        fail("the first resumed step came %.1f s after the failure, more "
             "than %g s" % (seconds, args.within))
    print("steps 1-%d logged once, world size %d then %d from step %d; "
          "first resumed step %.1f s after the failure (bound %g s)" %
          (args.steps, before, after, args.restart_after + 1, seconds,
           args.within))
