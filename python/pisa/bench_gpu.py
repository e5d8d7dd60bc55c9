"""Times the AOT selection libraries on the GPU (the bench* cases).

Besides milliseconds it reports the nominal multiply-add work (every query
scoring g*K candidate leaves of C keys and g*K candidate nodes per upper
level, for G heads of d; causality makes the real work a little smaller),
the achieved TFLOP/s on it, and the ratio to the floor the performance
issue states (1.6 ms of tensor-core work plus 1.2 ms of exp at N = 256K,
scaled linearly in N). With --reference it also times the PyTorch
implementation of the contract (pisa.reference, float32) for N <= 64K.

Per N: several fresh input sets (rotated so that L2 does not flatter),
warm-up calls, then CUDA events around each call on the current stream;
the median over all timed calls is reported, with the selection time of
both schedules. Each call includes its per-call device allocations and the
wait for its own work, as a user sees it.

usage: python3 -m pisa.bench_gpu CASES_DIR [--reps 20] [--sets 3]
"""

import argparse
import json
import math
import os
import statistics

import torch

from pisa import aot, reference


def nominal_flops(case):
    gk = case["g"] * case["K"]
    levels = max(1, math.ceil(math.log(max(1, case["N"] // case["C"]), case["g"])))
    per_query = gk * case["C"] + (levels - 1) * gk * case["g"]
    return 2.0 * case["Nq"] * per_query * case["G"] * case["d"]


def floor_ms(case):
    return 2.8 * case["N"] / 262144


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
    parser.add_argument("--reference", action="store_true",
                        help="also time pisa.reference (float32) for N <= 65536")
    args = parser.parse_args()
    with open(os.path.join(args.cases, "cases.json")) as f:
        cases = [c for c in json.load(f) if c["bench"]]
    print(f"device: {torch.cuda.get_device_name()}")
    print("| N | schedule | median ms | min ms | nominal GFLOP | TFLOP/s | x floor |")
    print("|---|---|---|---|---|---|---|")
    for case in cases:
        lib = aot.Library(os.path.join(args.cases, case["lib"]))
        inputs = [(torch.randn(1, case["G"], case["Nq"], case["d"], device="cuda").bfloat16(),
                   torch.randn(1, 1, case["N"], case["d"], device="cuda").bfloat16())
                  for _ in range(args.sets)]
        flops = nominal_flops(case)
        for fn in args.schedules:
            med, best = time_calls(lib, fn, inputs, args.reps)
            print(f"| {case['N']} | {fn.replace('select_', '')} | {med:.3f} | {best:.3f} "
                  f"| {flops / 1e9:.0f} | {flops / med / 1e9:.1f} "
                  f"| {med / floor_ms(case):.0f} |", flush=True)
        if args.reference and case["N"] <= 65536:
            q, k = inputs[0]
            times = []
            for _ in range(3):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                reference.select(q, k, case["C"], case["K"], case["g"],
                                 dtype=torch.float32, chunk=1024)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            med = statistics.median(times)
            print(f"| {case['N']} | pytorch reference (f32) | {med:.1f} | {min(times):.1f} "
                  f"| {flops / 1e9:.0f} | {flops / med / 1e9:.2f} "
                  f"| {med / floor_ms(case):.0f} |", flush=True)


if __name__ == "__main__":
    main()
