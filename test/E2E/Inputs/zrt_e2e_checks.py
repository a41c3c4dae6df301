"""The checks of zrt_e2e.py on what training executables write: their
--log-json files, checkpoints and safetensors, compared or read for a
property; and the helpers every part of zrt_e2e.py fails and reads logs
with."""

import hashlib
import json
import math
import os
import re
import signal
import struct
import subprocess
import sys
import time
import zlib


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def read_log(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def check_peak(log, what, kind="", fail=fail):
    """The last step's measured peak, after checking that every step's
    equals its plan: the device's, or with kind "host_" the host's, which
    every step must report. `fail` reports a mismatch (a caller's own)."""
    key = kind + "peak_bytes"
    for line in log:
        if kind and key not in line:
            fail("%s step %d: no %s in the log" % (what, line["step"], key))
        if line[key] != line["planned_" + key]:
            fail("%s step %d: measured %speak %d != planned %d" %
                 (what, line["step"], kind.replace("_", " "), line[key],
                  line["planned_" + key]))
    return log[-1][key]


def rel_diff(a, b):
    return abs(a - b) / max(abs(a), 1e-30)


def steps_of(spec, log):
    if not spec:
        return [l["step"] for l in log]
    lo, hi = spec.split("-")
    return list(range(int(lo), int(hi) + 1))


def cmd_compare(args):
    """Losses of two logs over a range of steps: equal (bitwise, as printed
    by the runtime with full precision) or within a relative tolerance;
    --keys names the log fields to compare (the loss and the gradient norm
    within the tolerance, others exactly)."""
    a = {l["step"]: l for l in read_log(args.a)}
    b = {l["step"]: l for l in read_log(args.b)}
    steps = steps_of(args.steps, read_log(args.b))
    for s in steps:
        if s not in a or s not in b:
            fail("step %d is missing" % s)
        if args.keys:
            keys = args.keys.split(",")
        else:
            keys = ["loss", "loss_scale", "grad_norm", "skipped", "lr"] if \
                args.exact else ["loss"]
        for key in keys:
            x, y = a[s][key], b[s][key]
            # Within the tolerance: the loss and the gradient norm; the
            # loss scale and skips are always exact.
            close = not args.exact and key in ("loss", "grad_norm")
            if not close and x != y:
                fail("step %d: %s %r != %r" % (s, key, x, y))
            if close and rel_diff(x, y) > args.rtol:
                fail("step %d: %s %r vs %r" % (s, key, x, y))
    what = "bitwise equal" if args.exact else "within %g" % args.rtol
    if args.keys:
        what += " (%s)" % args.keys
    print("steps %d-%d: %s" % (steps[0], steps[-1], what))


def cmd_skip(args):
    """Step K skipped on overflow with the scale halved; no other step
    skipped; the Adam step counter unchanged by it."""
    log = {l["step"]: l for l in read_log(args.log)}
    k = args.step
    line = log[k]
    if not (line["skipped"] and line["overflow"]):
        fail("step %d was not skipped: %r" % (k, line))
    if line["next_loss_scale"] != line["loss_scale"] / 2:
        fail("step %d: scale %g -> %g, expected halving" %
             (k, line["loss_scale"], line["next_loss_scale"]))
    if log[k + 1]["loss_scale"] != line["loss_scale"] / 2:
        fail("step %d does not use the halved scale" % (k + 1))
    if line["adam_steps"] != log[k - 1]["adam_steps"]:
        fail("step %d counted as an optimizer step" % k)
    others = [s for s, l in log.items() if l["skipped"] and s != k]
    if others:
        fail("steps %r were skipped too" % others)
    print("step %d skipped, loss scale %g -> %g" %
          (k, line["loss_scale"], line["next_loss_scale"]))


def cmd_falls(args):
    log = read_log(args.log)
    first = sum(l["loss"] for l in log[:3]) / 3
    last = sum(l["loss"] for l in log[-3:]) / 3
    if not last < first - args.by:
        fail("loss did not fall by %g: %.4f -> %.4f" % (args.by, first, last))
    print("loss falls by more than %g" % args.by)


def read_checkpoint(path):
    data = open(path, "rb").read()
    if data[:8] != b"ZRTCKPT1":
        fail(path + ": bad magic")
    (length,) = struct.unpack_from("<Q", data, 8)
    header = json.loads(data[16:16 + length])
    return header, data[16 + length:-4]


def cmd_same_state(args):
    """Masters and Adam moments of two checkpoints are bitwise equal."""
    files = sorted(f for f in os.listdir(args.a) if f.startswith("rank_"))
    if not files or files != sorted(
            f for f in os.listdir(args.b) if f.startswith("rank_")):
        fail("different rank files")
    for f in files:
        ha, pa = read_checkpoint(os.path.join(args.a, f))
        hb, pb = read_checkpoint(os.path.join(args.b, f))
        if pa != pb:
            fail("%s: masters/moments differ" % f)
    print("%d rank files: masters and moments bitwise equal" % len(files))


def read_safetensors(path):
    data = open(path, "rb").read()
    (length,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + length])
    metadata = header.pop("__metadata__", {})
    return metadata, header, data[8 + length:]


def cmd_token_loss(args):
    """Which labels a step was fed: the mean cross entropy of the logits
    W[ids] (W the table --param of the --weights safetensors file) over the
    first global batch of a uint16 token file, with the labels of each
    convention (same: the ids themselves; next: the tokens after them),
    against the --key of --step in the log. Fails unless it matches the
    --convention's and not the other's."""
    _, header, data = read_safetensors(args.weights)
    rows, cols = header[args.param]["shape"]
    begin, end = header[args.param]["data_offsets"]
    w = struct.unpack("<%df" % (rows * cols), data[begin:end])
    raw = open(args.tokens, "rb").read()
    tokens = struct.unpack("<%dH" % (len(raw) // 2), raw)
    n = args.rows * args.seq

    def loss(shift):
        total = 0.0
        for i in range(n):
            # Row r of the batch is the window at r * seq.
            logits = w[tokens[i] * cols:(tokens[i] + 1) * cols]
            top = max(logits)
            lse = top + math.log(sum(math.exp(x - top) for x in logits))
            total += lse - logits[tokens[i + shift]]
        return total / n

    want = {"same": loss(0), "next": loss(1)}
    other = "next" if args.convention == "same" else "same"
    line = [l for l in read_log(args.log) if l["step"] == args.step][0]
    got = line[args.key]
    if rel_diff(want[args.convention], want[other]) < 1e-3:
        fail("the two conventions give the same loss %r" % got)
    if rel_diff(got, want[args.convention]) > 1e-5:
        fail("step %d: %s %r is not the %s-token loss %r (the %s-token "
             "loss is %r)" % (args.step, args.key, got, args.convention,
                              want[args.convention], other, want[other]))
    print("step %d: %s matches the %s-token labels, not the %s-token ones" %
          (args.step, args.key, args.convention, other))


def cmd_same_weights(args):
    """Two exported safetensors hold the same tensors bitwise (names, dtypes,
    shapes and data); their metadata (the step) may differ."""
    ma, ha, da = read_safetensors(args.a)
    mb, hb, db = read_safetensors(args.b)
    if list(ha.items()) != list(hb.items()):
        fail("the tensor headers differ")
    if da != db:
        fail("the tensor data differ")
    print("%d tensors bitwise equal (steps %s and %s)" %
          (len(ha), ma.get("step"), mb.get("step")))


def bf16_bits(f32_bits):
    """fp32 bits rounded to bf16, nearest even (finite values)."""
    return (f32_bits + 0x7fff + ((f32_bits >> 16) & 1)) >> 16


def cmd_compute_copy(args):
    """COPY holds the tensors of MASTERS (fp32), each in its own dtype: an
    F32 one bitwise the master, a BF16 one the master rounded to nearest
    even. Prints each tensor's name and dtype in file order."""
    _, hm, dm = read_safetensors(args.masters)
    _, hc, dc = read_safetensors(args.copy)
    if list(hm) != list(hc):
        fail("the tensor names differ")
    for name, info in hc.items():
        master = hm[name]
        if master["dtype"] != "F32" or master["shape"] != info["shape"]:
            fail("%s: masters %r, copy %r" % (name, master, info))
        lo, hi = master["data_offsets"]
        values = struct.unpack("<%dI" % ((hi - lo) // 4), dm[lo:hi])
        lo, hi = info["data_offsets"]
        if info["dtype"] == "F32":
            want = dm[slice(*master["data_offsets"])]
        elif info["dtype"] == "BF16":
            want = struct.pack("<%dH" % len(values),
                               *[bf16_bits(v) for v in values])
        else:
            fail("%s: dtype %s" % (name, info["dtype"]))
        if dc[lo:hi] != want:
            fail("%s: the %s data are not the masters' %s" %
                 (name, info["dtype"], info["dtype"]))
        print("%s %s" % (name, info["dtype"]))


def cmd_safetensors_names(args):
    """Each tensor's name and shape in file order, then the metadata."""
    metadata, header, _ = read_safetensors(args.file)
    for name, info in header.items():
        print("%s [%s]" % (name, ", ".join(str(d) for d in info["shape"])))
    print("metadata: " + " ".join("%s=%s" % kv for kv in sorted(metadata.items())))


def cmd_payloads(args):
    """The SHA-256 of each rank file's payload (its saved buffers, without
    the header). With --if-bitwise OUT, the output of an fp32-states run of
    the same model: recorded hashes only mean something on a CPU where that
    run was bitwise equal to its reference, so elsewhere the hash is left
    out (and says so), the size still printed."""
    compare = True
    if args.if_bitwise:
        compare = "bitwise equal to the reference" in open(
            args.if_bitwise).read()
    for f in sorted(f for f in os.listdir(args.dir) if f.startswith("rank_")):
        _, payload = read_checkpoint(os.path.join(args.dir, f))
        print("%s: %d bytes, sha256 %s" %
              (f, len(payload), hashlib.sha256(payload).hexdigest()
               if compare else "(not compared: another CPU)"))


def cmd_checksums(args):
    """sha256sum of every file under DIR but those named in --skip, one line
    each, sorted by path: what a directory holds, byte for byte. With
    --against SUMS (an earlier output), how many of those files are
    unchanged, then each one changed or missing and each file added."""
    lines = []
    for root, _, files in os.walk(args.dir):
        for f in files:
            if f in args.skip:
                continue
            path = os.path.join(root, f)
            with open(path, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
            lines.append((os.path.relpath(path, args.dir), digest))
    if not args.against:
        for path, digest in sorted(lines):
            print("%s  %s" % (digest, path))
        return
    earlier = dict(reversed(l.split(None, 1)) for l in
                   open(args.against).read().splitlines())
    now = dict(lines)
    same = [p for p in earlier if now.get(p) == earlier[p]]
    print("unchanged %d of %d" % (len(same), len(earlier)))
    for p in sorted(earlier):
        if p not in now:
            print("missing %s" % p)
        elif now[p] != earlier[p]:
            print("changed %s" % p)
    for p in sorted(set(now) - set(earlier)):
        print("added %s" % p)


def cmd_corrupt(args):
    """Damages a file: inverts the byte at --offset (default), truncates it
    to --truncate bytes, or flips the lowest bit of the last digit of the
    first number that follows "KEY": (--flip-digit-of KEY), which leaves
    valid JSON with another value."""
    if args.truncate is not None:
        with open(args.file, "r+b") as f:
            f.truncate(args.truncate)
        print("truncated to %d bytes" % args.truncate)
        return
    data = bytearray(open(args.file, "rb").read())
    if args.flip_digit_of:
        m = re.search(rb'"%s": *-?[0-9]+' % re.escape(args.flip_digit_of.encode()),
                      data)
        if not m:
            fail("%s has no number after \"%s\"" % (args.file,
                                                     args.flip_digit_of))
        at = m.end() - 1
        data[at] ^= 0x01
        print("%s: %s -> %s" % (args.flip_digit_of, m.group(0).decode(),
                                data[m.start():m.end()].decode()))
    else:
        data[args.offset] ^= 0xff
    with open(args.file, "wb") as f:
        f.write(data)


def seal_manifest(manifest):
    """manifest.json's text as the runtime writes it (sealManifest): the
    CRC-32 of the compact JSON dump (sorted keys) without manifest_crc32."""
    manifest.pop("manifest_crc32", None)
    body = json.dumps(manifest, separators=(",", ":"), sort_keys=True,
                      ensure_ascii=False)
    manifest["manifest_crc32"] = zlib.crc32(body.encode())
    return json.dumps(manifest, indent=2, sort_keys=True,
                      ensure_ascii=False) + "\n"


def cmd_poison(args):
    """Writes --value (nan, inf, ...) into element --element of parameter
    --param's saved buffer --buffer in a checkpoint step directory, in the
    rank file that holds it (--rank picks one at stage 0, where every rank
    does), and re-seals the rank file and manifest.json, so that every
    checksum holds: a checkpoint as a diverged run or another tool might
    have written it."""
    path = os.path.join(args.dir, "manifest.json")
    manifest = json.load(open(path))
    stored = manifest["manifest_crc32"]
    # The re-sealed text must reproduce the runtime's checksum.
    if json.loads(seal_manifest(dict(manifest)))["manifest_crc32"] != stored:
        fail(path + ": cannot reproduce its checksum")
    params = [p for p in manifest["params"] if p["name"] == args.param]
    if not params:
        fail("no parameter %r in %s" % (args.param, path))
    param = params[0]
    group = manifest["partitions"][param["partition"]]
    pos = param["offset"] + args.element
    rank, local = args.rank, pos
    if manifest["stage"] > 0:
        rank, local = divmod(pos, group["shard_numel"])
    entry = manifest["files"][rank]
    rank_path = os.path.join(args.dir, entry["file"])
    data = bytearray(open(rank_path, "rb").read())
    (length,) = struct.unpack_from("<Q", data, 8)
    header = json.loads(data[16:16 + length])
    sections = [x for x in header["sections"]
                if x["partition"] == group["name"] and x["buffer"] == args.buffer]
    if not sections:
        fail("%s has no %s of %r" % (rank_path, args.buffer, group["name"]))
    at = 16 + length + sections[0]["offset"] + 4 * local
    struct.pack_into("<f", data, at, float(args.value))
    crc = zlib.crc32(bytes(data[:-4]))
    struct.pack_into("<I", data, len(data) - 4, crc)
    with open(rank_path, "wb") as f:
        f.write(data)
    entry["crc32"] = crc
    with open(path, "w") as f:
        f.write(seal_manifest(manifest))
    print("%s: %s %s element %d = %s" % (entry["file"], args.param,
                                         args.buffer, args.element, args.value))


def cmd_expect_failure(args):
    """Runs a command that must fail: a non-zero exit within --within
    seconds of wall time (measured here), with a line of output matching
    --expect. A command still running after --within + 30 s is killed (its
    process group) and reported as a hang."""
    cmd = args.cmd[1:] if args.cmd and args.cmd[0] == "--" else args.cmd
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=args.within + 30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        fail("still running after %g s (a hang): %s" %
             (time.monotonic() - start, " ".join(cmd)))
    elapsed = time.monotonic() - start
    if args.log:
        with open(args.log, "w") as f:
            f.write(out)
    if proc.returncode == 0:
        print(out[-3000:])
        fail("exit status 0: %s" % " ".join(cmd))
    if elapsed >= args.within:
        print(out[-3000:])
        fail("took %.1f s, not under %g s" % (elapsed, args.within))
    lines = [l for l in out.splitlines() if re.search(args.expect, l)]
    if not lines:
        print(out[-3000:])
        fail("no output line matches %r" % args.expect)
    print("exit status %d (non-zero) in under %g s" % (proc.returncode,
                                                       args.within))
    print("reported: " + lines[0].strip())
    sys.stderr.write("took %.2f s\n" % elapsed)
