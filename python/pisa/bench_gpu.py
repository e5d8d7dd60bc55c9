"""Times the AOT selection libraries on the GPU (the bench* cases).

Per N: several fresh input sets (rotated so that L2 does not flatter),
warm-up calls, then CUDA events around each call on the current stream;
the median over all timed calls is reported, with the selection time of
both schedules. Each call includes its per-call device allocations and the
wait for its own work, as a user sees it.

usage: python3 -m pisa.bench_gpu CASES_DIR [--reps 20] [--sets 3]
"""

import argparse
import json
import os
import statistics

import torch

from pisa import aot


def time_calls(lib, fn, inputs, reps, warmup=3):
    for i in range(warmup):
        lib(fn, *inputs[i % len(inputs)])
    times = []
    for i in range(reps):
        q, k = inputs[i % len(inputs)]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        lib(fn, q, k)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("cases")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--sets", type=int, default=3)
    parser.add_argument("--schedules", nargs="*", default=["select_two_stage", "select_single_stage"])
    args = parser.parse_args()
    with open(os.path.join(args.cases, "cases.json")) as f:
        cases = [c for c in json.load(f) if c["bench"]]
    print(f"device: {torch.cuda.get_device_name()}")
    print("| N | schedule | median ms | min ms |")
    print("|---|---|---|---|")
    for case in cases:
        lib = aot.Library(os.path.join(args.cases, case["lib"]))
        inputs = [(torch.randn(1, case["G"], case["Nq"], case["d"], device="cuda").bfloat16(),
                   torch.randn(1, 1, case["N"], case["d"], device="cuda").bfloat16())
                  for _ in range(args.sets)]
        for fn in args.schedules:
            med, best = time_calls(lib, fn, inputs, args.reps)
            print(f"| {case['N']} | {fn.replace('select_', '')} | {med:.3f} | {best:.3f} |",
                  flush=True)


if __name__ == "__main__":
    main()
