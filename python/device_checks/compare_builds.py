"""Two builds of the same check libraries, called on the same fresh inputs on
the GPU, must agree bitwise: the check for a change that must not move a
result (a refactor, a schedule of the same arithmetic), where compare_ptx
cannot (the PTX changed) and a reference check is too coarse.

  python3 -m device_checks.check_decode build OLD --seed S ... --pisa-compile OLD_BIN
  python3 -m device_checks.check_decode build NEW --seed S ...
  python3 -m device_checks.compare_builds decode OLD NEW [--calls 40]      # GPU

`decode` libraries (check_decode build) are compared through `select` (the
single-stage selection of one query, a decode step's kernel) over the
pyramid `build` gives, at drawn lengths and positions; `attention`
libraries (check_attention build) through `attend`, `attend_lse` (crafted
selections) and `prefill`, on check_attention's drawn shapes. Both
directories must come from the same build command and seed.
"""

import argparse
import json
import os
import random
import sys


def compare_decode(old, new, cfg, rng, calls):
    """How many of `calls` select calls differ."""
    import numpy as np
    import torch

    from device_checks import sweep
    from device_checks.check_decode import layout

    Hkv, G, d, C, g, cap = (cfg[x] for x in ("Hkv", "G", "d", "C", "g", "Ncap"))
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[cfg["dtype"]]
    keys = torch.from_numpy(sweep.make_keys(np.random.default_rng(rng.randrange(2**32)),
                                            cfg, (1, Hkv, cap, d))).to(dt).cuda()
    differ = 0
    for _ in range(calls):
        n = rng.choice((rng.randint(1, cap), cap, rng.randint(1, min(cap, 4 * C))))
        k = keys[:, :, :n].contiguous()
        pyramid = torch.empty(1, Hkv, sum(layout(n, C, g)[1]), d, device="cuda")
        new("build", k, out=pyramid)
        q = torch.randn(1, Hkv * G, 1, d, device="cuda").to(dt)
        t = rng.choice((n - 1, rng.randint(0, n - 1)))
        differ += not torch.equal(old("select", q, k, pyramid, t),
                                  new("select", q, k, pyramid, t))
    return differ


def compare_attention(old, new, cfg, rng, calls):
    """How many of the `calls` shapes' outputs (o, lse, prefill) differ."""
    import torch

    from device_checks import check_attention as ca

    Hkv, G, d, dv, C, K = (cfg[x] for x in ("Hkv", "G", "d", "dv", "C", "K"))
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[cfg["dtype"]]
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    differ = 0
    for _ in range(calls):
        B, N, nq, off, _mode = ca.draw_shape(rng, cfg)
        q = torch.randn(B, Hkv * G, nq, d, generator=gen).to(dt).cuda()
        k = torch.randn(B, Hkv, N, d, generator=gen).to(dt).cuda()
        v = torch.randn(B, Hkv, N, dv, generator=gen).to(dt).cuda()
        sel = ca.crafted_selection(gen, B, Hkv, nq, K, N, C, off).cuda()
        same = all(torch.equal(old(e, q, k, v, sel, off), new(e, q, k, v, sel, off))
                   for e in ("attend", "attend_lse"))
        same = same and torch.equal(old("prefill", q, k, v, off),
                                    new("prefill", q, k, v, off))
        differ += not same
    return differ


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=("decode", "attention"))
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--seed", type=int, default=0, help="of the inputs")
    parser.add_argument("--calls", type=int, default=None,
                        help="per library (default: 40 decode calls, 2 attention shapes)")
    args = parser.parse_args(argv)

    from pisa import aot

    manifest = {"decode": "decode.json", "attention": "attention.json"}[args.kind]
    compare = {"decode": compare_decode, "attention": compare_attention}[args.kind]
    calls = args.calls or {"decode": 40, "attention": 2}[args.kind]
    with open(os.path.join(args.new, manifest)) as f:
        # decode_batch's libraries (a batch of 64) have no `select` of one.
        cases = [c for c in json.load(f)["cases"] if not c.get("batch")]
    rng = random.Random(args.seed)
    bad = 0
    for cfg in cases:
        lib = f"lib{cfg['name']}.so"
        old, new = (aot.Library(os.path.join(d, lib)) for d in (args.old, args.new))
        differ = compare(old, new, cfg, rng, calls)
        bad += differ > 0
        print(f"{'ok  ' if not differ else 'DIFF'} {cfg['name']}: {calls} calls, "
              f"{differ} differ", flush=True)
    print(f"compare_builds {args.kind}: {len(cases) - bad} libraries agree, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
