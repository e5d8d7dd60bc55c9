"""Times a varlen selection library against batched libraries of the same
configuration on the same work, in one run (docs/performance.md, "Varlen").

  python3 -m device_checks.bench_varlen write DIR         # here: the programs
  for p in DIR/*.mlir; do build/bin/pisa-compile $p -o DIR/lib$(basename $p .mlir).so; done
  python3 -m device_checks.bench_varlen run DIR           # on the GPU

Paper setting (G = 16, d = 128, C = 64, K = 8, g = 2, bf16, Hkv = 1).
Libraries: `varlen` (pyramid_build_varlen + hier_topk_varlen, the
compiler's schedule: two-stage here), `varlen1` (the same, single-stage), `anylen`
(batched, B, N and Nq dynamic: the compiler's schedule for unknown Nq,
two-stage) and `decode` (batched, B and N dynamic, Nq = 1: single-stage).
Each scenario is a batch both forms can express (equal lengths) or one
only varlen can (mixed). Method: three input sets drawn on the GPU and
rotated (so that L2 does not flatter), --warmup calls, then CUDA events
around each of --reps calls; the median and range are printed.
"""

import argparse
import os
import statistics
import sys

CFG = dict(G=16, d=128, C=64, K=8, g=2)


def programs():
    G, d, C, K, g = (CFG[x] for x in ("G", "d", "C", "K", "g"))
    a = f"block_size = {C} branching = {g}"
    def varlen(name, schedule=""):
        attr = (f" {{schedule = #pisa.schedule<{schedule}, q_tile = 4, io_two_stage = 0, "
                "io_single_stage = 0>}") if schedule else ""
        return f"""func.func @{name}(%q: tensor<?x{G}x{d}xbf16>, %k: tensor<?x1x{d}xbf16>,
    %cuq: tensor<?xi32>, %cuk: tensor<?xi32>) -> tensor<?x1x{K}xi32> {{
  %p = pisa.pyramid_build_varlen %k cu_seqlens(%cuk) {a} : tensor<?x1x{d}xbf16>, tensor<?xi32> -> tensor<?x1x{d}xf32>
  %s = pisa.hier_topk_varlen %q, %k, %p cu_seqlens(%cuq, %cuk) topk = {K} {a}{attr}
      : tensor<?x{G}x{d}xbf16>, tensor<?x1x{d}xbf16>, tensor<?x1x{d}xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x1x{K}xi32>
  return %s : tensor<?x1x{K}xi32>
}}
"""

    def batched(name, nq):
        q, k = f"tensor<?x{G}x{nq}x{d}xbf16>", f"tensor<?x1x?x{d}xbf16>"
        p, r = f"tensor<?x1x?x{d}xf32>", f"tensor<?x1x{nq}x{K}xi32>"
        return f"""func.func @{name}(%q: {q}, %k: {k}, %off: index) -> {r} {{
  %p = pisa.pyramid_build %k {a} : {k} -> {p}
  %s = pisa.hier_topk %q, %k, %p, %off topk = {K} {a} : {q}, {k}, {p} -> {r}
  return %s : {r}
}}
"""
    return {"varlen": varlen("varlen"), "varlen1": varlen("varlen1", "single_stage"),
            "anylen": batched("anylen", "?"), "decode": batched("decode", 1)}


def write(args):
    os.makedirs(args.dir, exist_ok=True)
    for name, text in programs().items():
        with open(os.path.join(args.dir, name + ".mlir"), "w") as f:
            f.write(text)
    return 0


def time_calls(fn, sets, warmup, reps):
    import torch
    for i in range(warmup):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    times = []
    for i in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*sets[i % len(sets)])
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times), min(times), max(times)


def run(args):
    import torch
    from pisa import aot

    libs = {n: aot.Library(os.path.join(args.dir, f"lib{n}.so")) for n in programs()}
    G, d, K = CFG["G"], CFG["d"], CFG["K"]
    gen = torch.Generator(device="cuda").manual_seed(args.seed)

    def randn(*shape):
        return torch.randn(shape, generator=gen, device="cuda").to(torch.bfloat16)

    def varlen_sets(lengths, queries):
        cuq = torch.tensor([0] + list(torch.tensor(queries).cumsum(0)), dtype=torch.int32).cuda()
        cuk = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32).cuda()
        out = torch.empty((sum(queries), 1, K), dtype=torch.int32, device="cuda")
        return [(randn(sum(queries), G, d), randn(sum(lengths), 1, d), cuq, cuk, out)
                for _ in range(3)]

    def varlen_runner(name):
        def call(q, k, cuq, cuk, out):
            libs[name](name, q, k, cuq, cuk, out=out)
        return call

    def batched_sets(B, N, Nq):
        out = torch.empty((B, 1, Nq, K), dtype=torch.int32, device="cuda")
        return [(randn(B, G, Nq, d), randn(B, 1, N, d), N - Nq, out) for _ in range(3)]

    def runner(name):
        def call(q, k, off, out):
            libs[name](name, q, k, off, out=out)
        return call

    scenarios = []
    for N in (4096, 32768):
        scenarios.append((f"prefill B=1 N={N}", [N], [N], ("anylen", 1, N, N)))
    scenarios.append(("prefill B=8 N=4096", [4096] * 8, [4096] * 8, ("anylen", 8, 4096, 4096)))
    for B, N in ((1, 131072), (64, 32768)):
        scenarios.append((f"decode B={B} N={N}", [N] * B, [1] * B, ("decode", B, N, 1)))
    scenarios.append(("mixed: 4 chunks of 2048 at N=8192 + 60 decodes at N=32768",
                      [8192] * 4 + [32768] * 60, [2048] * 4 + [1] * 60, None))
    print(f"{'scenario':58s} {'varlen us':>22s} {'varlen single-stage us':>24s} "
          f"{'batched us':>22s} {'varlen/batched':>14s}")
    for title, lengths, queries, peer in scenarios:
        sets = varlen_sets(lengths, queries)
        v = time_calls(varlen_runner("varlen"), sets, args.warmup, args.reps)
        v1 = time_calls(varlen_runner("varlen1"), sets, args.warmup, args.reps)
        line = (f"{title:58s} {v[0]:9.1f} [{v[1]:.1f}, {v[2]:.1f}] "
                f"{v1[0]:9.1f} [{v1[1]:.1f}, {v1[2]:.1f}]")
        if peer:
            name, B, N, Nq = peer
            p = time_calls(runner(name), batched_sets(B, N, Nq), args.warmup, args.reps)
            line += f" {p[0]:9.1f} [{p[1]:.1f}, {p[2]:.1f}] ({name}) {v[0] / p[0]:8.2f}"
        print(line, flush=True)
        torch.cuda.empty_cache()
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m device_checks.bench_varlen",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("dir")
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("--warmup", type=int, default=5)
    r.add_argument("--reps", type=int, default=21)
    r.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    return {"write": write, "run": run}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
