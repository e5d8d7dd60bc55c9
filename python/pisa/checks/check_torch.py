"""Checks the PyTorch custom ops of pisa.torch on the GPU: the op equals a
direct library call eagerly, under torch.compile(fullgraph=True) (no graph
breaks), under torch.compile(mode="reduce-overhead") (CUDA graphs) and in
a torch.cuda.graph replayed on new inputs; the token-major layout is the
transpose; torch.library.opcheck passes.

usage: python3 -m pisa.checks.check_torch SWEEP_DIR --only NAME
"""

import os
import sys

import torch

import pisa.torch as pisa_torch
from pisa import aot
from pisa.checks import sweep


def check(cfg, path, gen):
    (name,) = [n.split("::")[1] for n in pisa_torch.load_library(path)]
    op = getattr(torch.ops.pisa, name)
    lib = aot.Library(path)
    results = {}
    x = sweep.extra_args(cfg)  # the query offset of a dynamic library
    q, k = sweep.gpu_inputs(cfg, gen)
    want = lib(name, q, k, *x)
    results["eager"] = torch.equal(op(q, k, *x), want)
    results["layout bthk"] = torch.equal(op(q, k, *x, layout="bthk"),
                                         want.permute(0, 2, 1, 3))

    def use(q, k):  # the op between other PyTorch work
        return op(q * 1, k, *x).to(torch.int64) + 1

    compiled = torch.compile(use, fullgraph=True)
    results["torch.compile fullgraph"] = torch.equal(compiled(q, k), want.to(torch.int64) + 1)
    graphs = torch.compile(use, mode="reduce-overhead", fullgraph=True)
    ok = True
    for _ in range(3):
        nq, nk = sweep.gpu_inputs(cfg, gen)
        ok &= torch.equal(graphs(nq, nk).clone(), lib(name, nq, nk, *x).to(torch.int64) + 1)
    results["torch.compile reduce-overhead (CUDA graphs), 3 new inputs"] = ok

    static_q, static_k = q.clone(), k.clone()
    op(static_q, static_k, *x)  # warm-up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = op(static_q, static_k, *x)
    ok = True
    for _ in range(3):
        nq, nk = sweep.gpu_inputs(cfg, gen)
        static_q.copy_(nq)
        static_k.copy_(nk)
        graph.replay()
        ok &= torch.equal(static_out, lib(name, nq, nk, *x))
    results["torch.cuda.graph replays, 3 new inputs"] = ok
    try:
        report = torch.library.opcheck(op.default, (q, k, *x))
        results["opcheck " + ", ".join(sorted(report))] = all(
            v == "SUCCESS" for v in report.values())
    except Exception as e:  # report what opcheck found, as a failure
        print(f"  opcheck: {type(e).__name__}: {str(e).splitlines()[0]}")
        results["opcheck"] = False
    return results


def main():
    args, cases = sweep.named_cases_cli(__doc__)
    if len(cases) != 1:
        # Sweep libraries all name their entry sweep_select: one per process.
        sys.exit("check_torch: name exactly one configuration")
    cfg = cases[0]
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    failed = sweep.report(cfg["name"],
                          check(cfg, os.path.join(args.dir, cfg["lib"]), gen))
    print(f"torch ops: {'all ok' if not failed else f'{failed} failed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
