"""The host part of an AOT call against its kernels.

For a library and its inputs (Gaussian, on the GPU): GPU time per call from
CUDA events around R back-to-back calls (after W warm-up calls), and host
time per call, the wall time of enqueuing one call (perf_counter around the
C entry point called through ctypes, with a preallocated result and
workspace, so it includes ctypes' own cost), and the latency of an
isolated call (perf_counter around the call and a stream synchronisation,
GPU idle before it): what the call costs beyond its kernels is that
latency minus the back-to-back GPU time. Medians of S samples.

usage: python3 -m device_checks.bench_call LIB.so [--samples 15] [--repeat 100]
         [--shapes 1x16x4096x128,1x1x4096x128] [--index-args 0]

--shapes gives the tensor arguments' shapes (required for a library of
dynamic sizes), --index-args the values of its index arguments (default 0).
"""

import argparse
import ctypes
import statistics
import sys
import time

import torch

from pisa import aot


def tensors_by_position(entry, tensors):
    """The call's arguments by position (None for index arguments)."""
    it = iter(tensors)
    return [next(it) if a["kind"] == "memref" else None for a in entry["arguments"]]


def prepared_call(path, shapes_arg=None, index_args=""):
    """A function that calls the library's one entry on Gaussian inputs of
    these shapes (the manifest's when static), its result and workspace
    allocated once."""
    lib = aot.Library(path)
    (function, (entry, fn, _)), = lib.entries.items()
    dt = aot._DTYPES
    memrefs = [a for a in entry["arguments"] if a["kind"] == "memref"]
    shapes = ([[int(x) for x in s.split("x")] for s in shapes_arg.split(",")]
              if shapes_arg else [a["shape"] for a in memrefs])
    indices = iter(int(v) for v in index_args.split(",") if v)
    tensors = [torch.randn(shape, device="cuda").to(dt[a["dtype"]])
               for a, shape in zip(memrefs, shapes)]
    values, it = [], iter(tensors)
    for a in entry["arguments"]:
        if a["kind"] == "index":
            values.append(next(indices, 0))
        else:
            t = next(it)
            values += [t.data_ptr()] + aot._dynamic_sizes(t.shape, a["shape"])
    out = torch.empty(lib.result_shapes(entry, tensors_by_position(entry, tensors))[0],
                      dtype=dt[entry["results"][0]["dtype"]], device="cuda")
    values += [out.data_ptr()] + aot._dynamic_sizes(out.shape, entry["results"][0]["shape"])
    ws_bytes = lib.workspace_size(function, *tensors)
    ws = torch.empty(ws_bytes + 256, dtype=torch.uint8, device="cuda")
    base = ws.data_ptr() + (-ws.data_ptr() % 256)
    error = ctypes.create_string_buffer(256)
    call = aot.PisaCall(torch.cuda.current_stream().cuda_stream, base, ws_bytes,
                        ctypes.cast(error, ctypes.c_char_p), len(error))
    keep = (tensors, out, ws, error, call)

    def once(_keep=keep):
        status = fn(ctypes.byref(call), *values)
        if status:
            raise RuntimeError(error.value.decode())
    once.function = function
    return once


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("lib")
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--shapes", help="comma-separated AxBxC shapes of the tensor arguments")
    parser.add_argument("--index-args", default="", help="comma-separated index argument values")
    args = parser.parse_args()
    once = prepared_call(args.lib, args.shapes, args.index_args)
    function = once.function

    for _ in range(args.warmup):
        once()
    torch.cuda.synchronize()
    gpu, host, latency = [], [], []
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
        t = []
        stream = torch.cuda.current_stream()
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            once()
            stream.synchronize()
            t.append(time.perf_counter() - t0)
        latency.append(statistics.median(t) * 1e6)
    over = statistics.median(latency) - statistics.median(gpu)
    print(f"{function}: GPU time per call (back to back) median {statistics.median(gpu):.1f} us "
          f"[{min(gpu):.1f}, {max(gpu):.1f}]; host time per call (enqueue) median "
          f"{statistics.median(host):.1f} us [{min(host):.1f}, {max(host):.1f}]; isolated call "
          f"latency (call + synchronize) median {statistics.median(latency):.1f} us "
          f"[{min(latency):.1f}, {max(latency):.1f}], {over:.1f} us more than the GPU time; "
          f"{args.samples} samples x {args.repeat} calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
