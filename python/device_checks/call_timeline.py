"""Where an isolated AOT call's time goes, on the GPU.

Calls a library's entry like bench_call (Gaussian inputs, preallocated
result and workspace, GPU idle before each call) under torch.profiler and
prints, for the median call of R isolated calls, every driver launch (its
host start and duration) and every kernel (start, duration, and the idle
gap before it), in microseconds from the start of the call's first driver
call; then the medians over the R calls of the call's span, the kernels'
sum and the idle GPU time inside the span.

usage: python3 -m device_checks.call_timeline LIB.so [--shapes ...] [--calls 20]
"""

import argparse
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from device_checks import bench_call


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("lib")
    parser.add_argument("--shapes")
    parser.add_argument("--index-args", default="")
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    once = bench_call.prepared_call(args.lib, args.shapes, args.index_args)
    for _ in range(20):
        once()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(args.calls):
            torch.cuda.synchronize()
            with torch.profiler.record_function("pisa_call"):
                once()
            torch.cuda.synchronize()
    events = [e for e in prof.events() if e.time_range.end > e.time_range.start]
    calls = sorted((e for e in events if e.name == "pisa_call"),
                   key=lambda e: e.time_range.start)
    launches = sorted((e for e in events if e.name.startswith("cuLaunch")),
                      key=lambda e: e.time_range.start)
    kernels = sorted((e for e in events if e.device_type == torch.autograd.DeviceType.CUDA
                      and "Memset" not in e.name and "Memcpy" not in e.name),
                     key=lambda e: e.time_range.start)
    rows = []
    for i, c in enumerate(calls):
        end = calls[i + 1].time_range.start if i + 1 < len(calls) else float("inf")
        mine = [l for l in launches if c.time_range.start <= l.time_range.start < end]
        if not mine:
            continue
        t0 = mine[0].time_range.start
        ks = [k for k in kernels if t0 <= k.time_range.start < end]
        if not ks:
            continue
        span = ks[-1].time_range.end - c.time_range.start
        busy = sum(k.time_range.end - k.time_range.start for k in ks)
        rows.append((span, busy, c, mine, ks))
    if not rows:
        print("no launches or kernels seen (CUPTI unavailable?)")
        return 1
    rows.sort(key=lambda r: r[0])
    span, busy, c, mine, ks = rows[len(rows) // 2]
    base = c.time_range.start
    print(f"median call of {len(rows)}: span {span:.1f} us from the call's start "
          f"to its last kernel's end; kernels {busy:.1f} us; GPU idle inside "
          f"{span - busy:.1f} us")
    print(f"  host: first launch at {mine[0].time_range.start - base:.1f} us, "
          f"last at {mine[-1].time_range.start - base:.1f} us, launches "
          + ", ".join(f"{l.time_range.end - l.time_range.start:.1f}" for l in mine) + " us")
    prev = None
    for k in ks:
        gap = k.time_range.start - (prev if prev is not None else base)
        print(f"  {k.name[:40]:40s} start {k.time_range.start - base:8.1f}  "
              f"{k.time_range.end - k.time_range.start:7.1f} us  idle before {gap:6.1f}")
        prev = k.time_range.end
    med = lambda xs: statistics.median(xs)
    print(f"medians over {len(rows)} calls: span {med([r[0] for r in rows]):.1f} us, "
          f"kernels {med([r[1] for r in rows]):.1f} us, idle {med([r[0] - r[1] for r in rows]):.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
