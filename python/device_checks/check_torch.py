"""Checks the PyTorch custom ops of pisa.torch on the GPU: the op equals a
direct library call eagerly, under torch.compile(fullgraph=True) (no graph
breaks), under torch.compile(mode="reduce-overhead") (CUDA graphs) and in
a torch.cuda.graph replayed on new inputs; the token-major layout is the
transpose; torch.library.opcheck passes.

usage: python3 -m device_checks.check_torch SWEEP_DIR --only NAME
       python3 -m device_checks.check_torch --decode LIBDECODE-STEP.so

--decode checks an op that appends to a pyramid cache in place
(docs/examples/decode-step.mlir): eagerly and under
torch.compile(fullgraph=True), a step through the op leaves the cache
bitwise equal to the same step through the library and returns the same
selection; opcheck passes with the cache declared mutated.
"""

import os
import sys

import torch

import pisa.torch as pisa_torch
from pisa import aot
from device_checks import sweep


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
    results.update(opcheck(op, (q, k, *x)))
    return results


def opcheck(op, args):
    """{"opcheck <tests>": all passed} from torch.library.opcheck, or
    {"opcheck": False} with what it raised printed."""
    try:
        report = torch.library.opcheck(op.default, args)
    except Exception as e:  # report what opcheck found, as a failure
        print(f"  opcheck: {type(e).__name__}: {str(e).splitlines()[0]}")
        return {"opcheck": False}
    return {"opcheck " + ", ".join(sorted(report)):
            all(v == "SUCCESS" for v in report.values())}


def check_decode(path, gen):
    """The decode-step op (q, kcache, pcache updated in place, from, to, n)
    against direct library calls on copies of the same cache."""
    (name,) = [n.split("::")[1] for n in pisa_torch.load_library(path)]
    op = getattr(torch.ops.pisa, name)
    lib = aot.Library(path)
    entry = lib.entries[name][0]
    q_shape, k_shape, p_shape = (a["shape"] for a in entry["arguments"][:3])
    keys = torch.randn(*k_shape, device="cuda", generator=gen).bfloat16()
    cap = k_shape[2]
    one = lambda v: torch.tensor([v], dtype=torch.int32, device="cuda")
    results = {}

    def fresh_cache(n):
        cache = torch.zeros(*p_shape, device="cuda")
        lib(name, torch.zeros(*q_shape, device="cuda").bfloat16(), keys, cache,
            one(0), one(n), n)
        return cache

    n = cap // 3
    mine, theirs = fresh_cache(n), fresh_cache(n)
    q = torch.randn(*q_shape, device="cuda", generator=gen).bfloat16()
    got = op(q, keys, mine, one(n), one(n + 1), n + 1)
    want = lib(name, q, keys, theirs, one(n), one(n + 1), n + 1)
    results["eager: selection, cache updated in place"] = (
        torch.equal(got, want) and torch.equal(mine, theirs))

    def step(q, cache, n):  # the op between other PyTorch work
        return op(q * 1, keys, cache, one(n), one(n + 1), n + 1).to(torch.int64) + 1

    compiled = torch.compile(step, fullgraph=True)
    ok = True
    for i in range(3):
        q = torch.randn(*q_shape, device="cuda", generator=gen).bfloat16()
        got = compiled(q, mine, n + 1 + i)
        want = lib(name, q, keys, theirs, one(n + 1 + i), one(n + 2 + i), n + 2 + i)
        ok &= torch.equal(got, want.to(torch.int64) + 1) and torch.equal(mine, theirs)
    results["torch.compile fullgraph, 3 steps: selection and cache"] = ok
    results.update(opcheck(op, (q, keys, fresh_cache(n), one(n), one(n + 1), n + 1)))
    return results


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--decode":
        gen = torch.Generator(device="cuda").manual_seed(0)
        failed = sweep.report(os.path.basename(sys.argv[2]),
                              check_decode(sys.argv[2], gen))
        print(f"torch decode op: {'all ok' if not failed else f'{failed} failed'}")
        return 1 if failed else 0
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
