"""Checks token-major libraries on the GPU against head-major ones of the
same configuration: the same selection bit for bit on every drawn shape
(the kernels read the token-major buffers through transposed views, so
only addresses differ), inside a captured CUDA graph replayed on new
inputs, and through pisa.torch in both index layouts (eager and under
torch.compile(fullgraph=True), whose fake implementation must give the
right shape).

usage: python3 -m device_checks.check_layouts HEAD_MAJOR.so TOKEN_MAJOR.so
       [--seed S] [--shapes 6] [--bench 4096,65536]
--bench times both libraries per N (prefill, B = 1): CUDA events around
each call, 5 warm-up calls, the median of 20, three input sets rotated.
(both libraries of docs/examples/select-any-length.mlir's configuration:
G = 16, d = 128, C = 64, K = 8, g = 2, bf16, dynamic B, N, Nq, offset)
"""

import argparse
import os
import random
import sys

import torch

import pisa.torch as pisa_torch
from pisa import aot


def swap(x):
    return x.transpose(1, 2).contiguous()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("head_major")
    parser.add_argument("token_major")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--shapes", type=int, default=6)
    parser.add_argument("--bench", help="comma-separated N to time both layouts at")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")
    rng = random.Random(seed)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    head, token = aot.Library(args.head_major), aot.Library(args.token_major)
    (fh,), (ft,) = list(head.entries), list(token.entries)
    failures = []

    def check(name, ok):
        print(f"{'ok  ' if ok else 'FAIL'} {name}", flush=True)
        if not ok:
            failures.append(name)

    def draw():
        B = rng.randint(1, 3)
        N = rng.choice([1, 63, 64, 65, rng.randint(100, 5000), rng.randint(5000, 70000)])
        Nq = rng.choice([N, 1, rng.randint(1, N)])
        off = rng.randint(0, N - Nq)
        q = torch.randn((B, 16, Nq, 128), generator=gen, device="cuda").to(torch.bfloat16)
        k = torch.randn((B, 1, N, 128), generator=gen, device="cuda").to(torch.bfloat16)
        return q, k, off

    for i in range(args.shapes):
        q, k, off = draw()
        want = head(fh, q, k, off)
        got = token(ft, swap(q), swap(k), off)
        check(f"shape {i}: B={q.shape[0]} N={k.shape[2]} Nq={q.shape[2]} offset={off}: "
              f"token-major equals head-major", torch.equal(got, swap(want)))

    # A captured graph replayed on new inputs written into its buffers.
    q, k, off = draw()
    qt, kt = swap(q), swap(k)
    out = torch.empty((q.shape[0], q.shape[2], 1, 8), dtype=torch.int32, device="cuda")
    token(ft, qt, kt, off, out=out)  # warm up (module load) outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        token(ft, qt, kt, off, out=out)
    ok = True
    for _ in range(3):
        nq = torch.randn(q.shape, generator=gen, device="cuda").to(torch.bfloat16)
        nk = torch.randn(k.shape, generator=gen, device="cuda").to(torch.bfloat16)
        qt.copy_(swap(nq))
        kt.copy_(swap(nk))
        graph.replay()
        ok &= torch.equal(out, swap(head(fh, nq, nk, off)))
    check("CUDA graph replays on new inputs", ok)

    # pisa.torch: the manifest says the library writes bthk.
    (name,) = [n.split("::")[1] for n in pisa_torch.load_library(args.token_major, namespace="pisa_tm")]
    op = getattr(torch.ops.pisa_tm, name)
    q, k, off = draw()
    want = head(fh, q, k, off)
    check("torch op, layout bthk (native, no copy)", torch.equal(op(swap(q), swap(k), off, layout="bthk"), swap(want)))
    check("torch op, layout bhtk (transposed)", torch.equal(op(swap(q), swap(k), off), want))
    compiled = torch.compile(lambda a, b: op(a, b, off, layout="bhtk").to(torch.int64) + 1, fullgraph=True)
    check("torch.compile fullgraph, layout bhtk", torch.equal(compiled(swap(q), swap(k)), want.to(torch.int64) + 1))
    if args.bench:
        print("N, head-major ms, token-major ms, token/head")
        for n in (int(x) for x in args.bench.split(",")):
            sets = [(torch.randn((1, 16, n, 128), generator=gen, device="cuda").to(torch.bfloat16),
                     torch.randn((1, 1, n, 128), generator=gen, device="cuda").to(torch.bfloat16))
                    for _ in range(3)]
            times = []
            for lib, f, prep in ((head, fh, lambda x: x), (token, ft, swap)):
                inputs = [(prep(q), prep(k)) for q, k in sets]
                out = lib(f, *inputs[0], 0)
                for i in range(5):
                    lib(f, *inputs[i % 3], 0, out=out)
                ms = []
                for i in range(20):
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    lib(f, *inputs[i % 3], 0, out=out)
                    end.record()
                    end.synchronize()
                    ms.append(start.elapsed_time(end))
                times.append(sorted(ms)[len(ms) // 2])
            print(f"{n}, {times[0]:.3f}, {times[1]:.3f}, {times[1] / times[0]:.3f}", flush=True)
    print(f"layouts: {'all ok' if not failures else f'{len(failures)} failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
