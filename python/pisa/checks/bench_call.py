"""The host part of an AOT call against its kernels (issue 12, item 7).

For a library and its inputs (Gaussian, on the GPU): GPU time per call from
CUDA events around R back-to-back calls (after W warm-up calls), and host
time per call, the wall time of enqueuing one call (perf_counter around the
C entry point called through ctypes, with a preallocated result and
workspace, so it includes ctypes' own cost). Medians of S samples.

usage: python3 -m pisa.checks.bench_call LIB.so [--samples 15] [--repeat 100]
"""

import argparse
import ctypes
import statistics
import sys
import time

import torch

from pisa import aot


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("lib")
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    lib = aot.Library(args.lib)
    (function, (entry, fn, ws_bytes)), = lib.entries.items()
    dt = aot._DTYPES
    tensors = [torch.randn(a["shape"], device="cuda").to(dt[a["dtype"]])
               for a in entry["arguments"]]
    out = torch.empty(entry["result"]["shape"], dtype=dt[entry["result"]["dtype"]],
                      device="cuda")
    ws = torch.empty(ws_bytes + 256, dtype=torch.uint8, device="cuda")
    base = ws.data_ptr() + (-ws.data_ptr() % 256)
    error = ctypes.create_string_buffer(256)
    call = aot.PisaCall(torch.cuda.current_stream().cuda_stream, base, ws_bytes,
                        ctypes.cast(error, ctypes.c_char_p), len(error))
    ptrs = [t.data_ptr() for t in tensors]

    def once():
        status = fn(ctypes.byref(call), *ptrs, out.data_ptr())
        if status:
            raise RuntimeError(error.value.decode())

    for _ in range(args.warmup):
        once()
    torch.cuda.synchronize()
    gpu, host = [], []
    for _ in range(args.samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(args.repeat):
            once()
        end.record()
        torch.cuda.synchronize()
        gpu.append(start.elapsed_time(end) * 1e3 / args.repeat)
        # Host: one call at a time behind an idle GPU.
        t = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            once()
            t.append(time.perf_counter() - t0)
            torch.cuda.synchronize()
        host.append(statistics.median(t) * 1e6)
    print(f"{function}: GPU time per call (back to back) median {statistics.median(gpu):.1f} us "
          f"[{min(gpu):.1f}, {max(gpu):.1f}]; host time per call (enqueue) median "
          f"{statistics.median(host):.1f} us [{min(host):.1f}, {max(host):.1f}]; "
          f"{args.samples} samples x {args.repeat} calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
