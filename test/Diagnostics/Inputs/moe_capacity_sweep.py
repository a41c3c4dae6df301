"""Compiles a MoE step with expert parallelism 2 at every capacity factor
0.1, 0.2, ..., 4.0 on 2 and on 4 ranks (zero-opt's zero-pipeline, no
linking) and checks each exchange's receive rows: ceil(C n) for the n
dispatch rows a rank sends, at most the dropless bound 2 n. Prints one
line per failure and a summary.

    moe_capacity_sweep.py ZERO-OPT MODEL.mlir
"""

import math
import re
import subprocess
import sys


def main():
    zero_opt, model = sys.argv[1], sys.argv[2]
    ep = 2
    ok = failed = 0
    for world in (2, 4):
        for tenth in range(1, 41):
            factor = tenth / 10
            options = ("stage=2 world-size=%d ep-size=%d moe-capacity-factor=%g"
                       % (world, ep, factor))
            run = subprocess.run([zero_opt, model,
                                  "--zero-pipeline=" + options],
                                 capture_output=True, text=True)
            if run.returncode != 0:
                print("FAILED %s: %s" % (options, run.stderr.strip()))
                failed += 1
                continue
            exchanges = re.findall(
                r"zero\.moe_exchange .*: tensor<(\d+)x\d+x\w+>, "
                r"tensor<\d+xi32> -> tensor<(\d+)x\d+x\w+>", run.stdout)
            wrong = [(n, cap) for n, cap in exchanges
                     if int(cap) != min(math.ceil(factor * int(n)),
                                        ep * int(n))]
            if not exchanges or wrong:
                print("WRONG %s: exchanges (rows, receive rows) %s"
                      % (options, exchanges))
                failed += 1
                continue
            ok += 1
    print("%d capacity factors compiled with the receive rows planned, "
          "%d failed" % (ok, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
