"""Times the AOT selection libraries on the GPU (the bench* cases).

Besides milliseconds it reports the nominal multiply-add work (every query
scoring g*K candidate leaves of C keys and g*K candidate nodes per upper
level, for G heads of d; causality makes the real work a little smaller),
the achieved TFLOP/s on it, and the ratio to the floor the performance
issue states (1.6 ms of tensor-core work plus 1.2 ms of exp at N = 256K,
scaled linearly in N). With --reference it also times the PyTorch
implementation of the contract (pisa.reference, float32) for N <= 64K,
and with --flat-peer the flat selector of fla's design
(device_checks.flat_prefill, Triton) on the same inputs, in the same run,
up to N = 256K.

Per N: several fresh input sets (rotated so that L2 does not flatter),
warm-up calls, then CUDA events around each call on the current stream;
the median over all timed calls is reported, with the selection time of
both schedules. Each call includes its per-call device allocations and the
wait for its own work, as a user sees it.

usage: python3 -m device_checks.bench_gpu CASES_DIR [--reps 20] [--sets 3] [--flat-peer]
           [--only N ...]
"""

import argparse
import json
import os
import statistics

import torch

from pisa import aot, reference
from device_checks import flat_prefill


def nominal_flops(case):
    gk = case["g"] * case["K"]
    # ceil(log_g(N / C)) in integers (a float log can land just above k).
    levels, span = 1, case["g"]
    while span < case["N"] // case["C"]:
        levels, span = levels + 1, span * case["g"]
    per_query = gk * case["C"] + (levels - 1) * gk * case["g"]
    return 2.0 * case["Nq"] * per_query * case["G"] * case["d"]


def floor_ms(case):
    return 2.8 * case["N"] / 262144


def time_calls(call, inputs, reps, warmup=3):
    """Median and min ms of `call(q, k)` between CUDA events, over `reps`
    calls after `warmup`, rotating over the input sets."""
    for i in range(warmup):
        call(*inputs[i % len(inputs)])
    times = []
    for i in range(reps):
        q, k = inputs[i % len(inputs)]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call(q, k)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), min(times)


def row(case, label, med, best, flops, ms_digits, tflops_digits):
    """One line of the results table."""
    return (f"| {case['N']} | {label} | {med:.{ms_digits}f} | {best:.{ms_digits}f} "
            f"| {flops / 1e9:.0f} | {flops / med / 1e9:.{tflops_digits}f} "
            f"| {med / floor_ms(case):.0f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("cases")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--sets", type=int, default=3)
    parser.add_argument("--schedules", nargs="*", default=["select_two_stage", "select_single_stage"])
    parser.add_argument("--reference", action="store_true",
                        help="also time pisa.reference (float32) for N <= 65536")
    parser.add_argument("--flat-peer", action="store_true",
                        help="also time the flat selector of fla's design (Triton)")
    parser.add_argument("--only", nargs="*", type=int, help="only these N")
    args = parser.parse_args()
    with open(os.path.join(args.cases, "cases.json")) as f:
        cases = [c for c in json.load(f)
                 if c["bench"] and (not args.only or c["N"] in args.only)]
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
            med, best = time_calls(lambda q, k: lib(fn, q, k), inputs, args.reps)
            print(row(case, fn.replace("select_", ""), med, best, flops, 3, 1), flush=True)
        if args.flat_peer and case["N"] <= 262144:  # at 1M a call takes seconds
            med, best = time_calls(
                lambda q, k: flat_prefill.select(q, k, case["C"], case["K"]),
                inputs, args.reps)
            print(row(case, "flat peer (fla design, Triton)", med, best, flops, 3, 1),
                  flush=True)
        if args.reference and case["N"] <= 65536:
            # Seconds per call at 64K: three calls on one set, no warm-up.
            med, best = time_calls(
                lambda q, k: reference.select(q, k, case["C"], case["K"], case["g"],
                                              dtype=torch.float32, chunk=1024),
                inputs[:1], reps=3, warmup=0)
            print(row(case, "pytorch reference (f32)", med, best, flops, 1, 2), flush=True)


if __name__ == "__main__":
    main()
