#!/usr/bin/env python3
"""The runtime's NVMe swap-file bandwidth against dd (not a test; bench/run.sh
runs it with ONLY=nvme).

On one directory (--dir, default a folder under bench/results): each round
writes a file of --bytes sequentially and reads it back, once with the
runtime's swap-file I/O (zrt-bench-nvme: O_DIRECT where the file system
allows it, io_uring and, as a second engine, the thread pool of
pread/pwrite; --chunk-byte transfers with --buffers in flight, as the host
Adam of an optimizer offloaded to NVMe drives them) and once with dd
(bs=--chunk, oflag=direct / iflag=direct, conv=fsync for the write; plain
buffered dd where the file system refuses O_DIRECT). The three run in an
order shuffled anew each round. Reported: the medians over rounds of each
one's GB/s and the ratio runtime / dd of each round's figures.

Writes bench/results/nvme.json (or --out); bench/update_docs.py turns it
into the table of docs/benchmarks.md.
"""

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def dd(args):
    """Runs dd; returns its seconds (from its own report) or None."""
    p = subprocess.run(["dd"] + args, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr else "?"
    m = re.search(r"copied, ([0-9.e+-]+) s", p.stderr)
    return (float(m.group(1)) if m else None), p.stderr


def direct_supported(directory):
    probe = os.path.join(directory, "direct-probe")
    try:
        fd = os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o644)
        os.close(fd)
        return True
    except OSError:
        return False
    finally:
        if os.path.exists(probe):
            os.remove(probe)


def runtime_pass(tool, directory, args, engine):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    env = dict(os.environ)
    if engine == "thread pool":
        env["ZRT_NVME_ENGINE"] = "thread-pool"
    else:
        env.pop("ZRT_NVME_ENGINE", None)
    subprocess.run([tool, "--dir", directory, "--bytes", str(args.bytes),
                    "--chunk", str(args.chunk), "--buffers",
                    str(args.buffers), "--rounds", "1", "--json", out],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    with open(out) as f:
        doc = json.load(f)
    os.remove(out)
    return doc


def filesystem(directory):
    p = subprocess.run(["df", "-T", directory], capture_output=True,
                       text=True)
    lines = p.stdout.strip().splitlines()
    if len(lines) < 2:
        return "?"
    cols = lines[1].split()
    return "%s (%s)" % (cols[1], cols[0])


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--tool", help="zrt-bench-nvme (default: under --build)")
    p.add_argument("--dir", default=os.path.join(HERE, "results", "nvme"))
    p.add_argument("--bytes", type=int, default=1 << 30)
    p.add_argument("--chunk", type=int, default=4 << 20)
    p.add_argument("--buffers", type=int, default=4)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", default=os.path.join(HERE, "results", "nvme.json"))
    args = p.parse_args()
    tool = args.tool or os.path.join(args.build, "runtime", "bench",
                                     "zrt-bench-nvme")
    if not os.access(tool, os.X_OK):
        sys.exit("nvme.py: no %s (configure with -DZRT_BUILD_BENCHMARKS=ON "
                 "and build zrt-bench-nvme)" % tool)
    os.makedirs(args.dir, exist_ok=True)
    args.bytes = args.bytes // args.chunk * args.chunk
    direct = direct_supported(args.dir)
    count = args.bytes // args.chunk
    dd_file = os.path.join(args.dir, "dd.bin")
    rounds = []
    engine_names = {}
    for r in range(args.rounds):
        row = {}
        jobs = ["io_uring", "thread pool", "dd"]
        random.shuffle(jobs)
        for job in jobs:
            if job == "dd":
                w, err = dd(["if=/dev/zero", "of=" + dd_file,
                             "bs=%d" % args.chunk, "count=%d" % count,
                             "conv=fsync"] + (["oflag=direct"] if direct
                                              else []))
                rd, err2 = dd(["if=" + dd_file, "of=/dev/null",
                               "bs=%d" % args.chunk] +
                              (["iflag=direct"] if direct else []))
                if w is None or rd is None:
                    sys.exit("nvme.py: dd failed: %s" % (err if w is None
                                                         else err2))
                os.remove(dd_file)
                row["dd"] = {"write_s": w, "read_s": rd}
            else:
                doc = runtime_pass(tool, args.dir, args, job)
                engine_names[job] = doc["engine"]
                row[job] = {"write_s": doc["write_s"][0],
                            "read_s": doc["read_s"][0],
                            "direct": doc["direct"]}
        rounds.append(row)
        gb = args.bytes / 1e9
        print("round %d: %s" % (r, ", ".join(
            "%s write %.2f read %.2f GB/s" % (k, gb / v["write_s"],
                                             gb / v["read_s"])
            for k, v in sorted(row.items()))))

    def median_rate(key, what):
        return statistics.median(args.bytes / 1e9 / row[key][what]
                                 for row in rounds)

    def median_ratio(key, what):
        return statistics.median(row["dd"][what] / row[key][what]
                                 for row in rounds)

    summary = {}
    for key in ["io_uring", "thread pool", "dd"]:
        summary[key] = {"write_gbs": median_rate(key, "write_s"),
                        "read_gbs": median_rate(key, "read_s")}
        if key != "dd":
            summary[key]["write_ratio"] = median_ratio(key, "write_s")
            summary[key]["read_ratio"] = median_ratio(key, "read_s")
            summary[key]["engine"] = engine_names.get(key, key)
    cpu = "unknown"
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("Model name:"):
            cpu = line.split(":", 1)[1].strip()
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    doc = {"machine": {"cpu": cpu, "nproc": os.cpu_count(),
                       "kernel": os.uname().release,
                       "filesystem": filesystem(args.dir),
                       "date": time.strftime("%Y-%m-%d", time.gmtime()),
                       "loadavg": load},
           "bytes": args.bytes, "chunk": args.chunk,
           "buffers": args.buffers, "direct": direct,
           "rounds": rounds, "summary": summary}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    os.rmdir(args.dir) if not os.listdir(args.dir) else None
    print("wrote %s" % args.out)


if __name__ == "__main__":
    main()
