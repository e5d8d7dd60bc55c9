"""Per-kernel device time of the AOT selection libraries (torch.profiler).

usage: python3 -m device_checks.profile_gpu CASES_DIR [--only bench4096 ...] [--calls 5]
Prints, per library and schedule, each kernel's total and per-call time.
"""

import argparse
import json
import os

import torch
from torch.profiler import ProfilerActivity, profile

from pisa import aot


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("cases")
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args()
    with open(os.path.join(args.cases, "cases.json")) as f:
        cases = [c for c in json.load(f) if c["bench"]]
    if args.only:
        cases = [c for c in cases if c["name"] in args.only]
    for case in cases:
        lib = aot.Library(os.path.join(args.cases, case["lib"]))
        q = torch.randn(1, case["G"], case["Nq"], case["d"], device="cuda").bfloat16()
        k = torch.randn(1, 1, case["N"], case["d"], device="cuda").bfloat16()
        for fn in ("select_two_stage", "select_single_stage"):
            lib(fn, q, k)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(args.calls):
                    lib(fn, q, k)
                torch.cuda.synchronize()
            print(f"== N={case['N']} {fn}: per call")
            rows = []
            for e in prof.key_averages():
                t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
                if t > 0:
                    rows.append((t / args.calls / 1000.0, e.key, e.count // args.calls))
            for ms, key, n in sorted(rows, reverse=True)[:12]:
                print(f"  {ms:9.3f} ms  x{n:<3d} {key}")


if __name__ == "__main__":
    main()
