"""How `pisa-run select` (the CPU reference through MLIR) scales with N.

Configuration of the paper: B = 1, Hkv = 1, G = 16, d = 128, C = 64, K = 8,
g = 2, float16 inputs. For each N it draws fresh inputs, runs pisa-run
`--repeats` times and reports the median of the run time pisa-run measures
around the compiled function (JIT compile time excluded), with that time
divided by N log2 N and by N^2: the first ratio stays flat for an
O(N log N) selection, the second falls.

usage: cpu_select_scaling.py [--pisa-run PATH] [--sizes 1024 2048 ...]
"""

import argparse
import math
import os
import re
import statistics
import subprocess
import tempfile

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pisa-run", default="build/bin/pisa-run")
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[1024, 2048, 4096, 8192, 16384, 32768])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng()
    print("| N | leaf blocks | levels | run s (median) | us / (N log2 N) | ns / N^2 |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            times = []
            for _ in range(args.repeats):
                q = rng.standard_normal((1, 16, n, 128)).astype(np.float16)
                k = rng.standard_normal((1, 1, n, 128)).astype(np.float16)
                np.save(os.path.join(tmp, "q.npy"), q)
                np.save(os.path.join(tmp, "k.npy"), k)
                out = subprocess.run(
                    [args.pisa_run, "select", "--q", os.path.join(tmp, "q.npy"),
                     "--k", os.path.join(tmp, "k.npy"), "--block-size", "64",
                     "--topk", "8", "--out", os.path.join(tmp, "sel.npy")],
                    check=True, capture_output=True, text=True).stdout
                times.append(float(re.search(r"run ([\d.]+) s", out).group(1)))
                levels = int(re.search(r"g=2, (\d+) levels", out).group(1))
            t = statistics.median(times)
            print(f"| {n} | {-(-n // 64)} | {levels} | {t:.3f} | "
                  f"{t / (n * math.log2(n)) * 1e6:.3f} | {t / n ** 2 * 1e9:.2f} |",
                  flush=True)


if __name__ == "__main__":
    main()
