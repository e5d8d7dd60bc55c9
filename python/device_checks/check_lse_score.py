"""pisa.lse_score on the GPU against a float64 reference, over
configurations drawn from a seed, through one AOT library each.

  python3 -m device_checks.check_lse_score build DIR --seed S --count N   # here
  python3 -m device_checks.check_lse_score check DIR [--shapes 4]         # GPU

A configuration (dtype, level, Hkv, G, d, C, g, scale) is drawn over the
op's whole space: levels 1 to 4, G up to 64, d from 1 to 256 (the query
rows in registers or not), C up to 128, g up to 64. Every library has one
entry, `score(q, children, candidates, offset)`, with B, Nq, the children's
rows and S dynamic. `check` draws --shapes shapes per library (empty
batches, queries, children and candidate rows included; offsets before,
inside and past the children) and candidate rows mixing real nodes near
each query's causal frontier, -1 padding, negative entries, nodes past the
end, duplicates and 2^31 - 1. It requires, against
`pisa.reference.lse_score` (float64, docs/semantics.md section 2): -inf
exactly where the reference is -inf, else |u - u_ref| <= 1e-5 G (1 + L)
with L the entry's largest |scaled logit| (f32 products and the kernels'
exp2/log2). The library must refuse an offset outside [0, 2^31 - 1] with
its rule. The float64 reference is first checked against the NumPy one of
the CPU test (test/Integration/check_lse_score.py).
"""

import argparse
import json
import os
import random
import sys
import time

from device_checks import repo, sweep

DTYPES = ("f32", "f16", "bf16")
HEAD_DIMS = (1, 8, 16, 32, 40, 64, 96, 128, 160, 256)
GROUPS = (1, 2, 4, 8, 16, 32, 64)
INT32_MAX = 2**31 - 1
TOLERANCE = 1e-5


def draw_config(rng, index):
    level = 1 if rng.random() < 0.5 else rng.randint(2, 4)
    cfg = {"name": f"s{index:04d}", "dtype": rng.choice(DTYPES), "level": level,
           "Hkv": rng.randint(1, 3),
           "G": rng.choice(GROUPS) if rng.random() < 0.7 else rng.randint(1, 64),
           "d": rng.choice(HEAD_DIMS),
           "C": rng.choice((16, 32, 64, 128)) if rng.random() < 0.6 else rng.randint(1, 128),
           "g": rng.randint(2, 8) if rng.random() < 0.9 else 64,
           "scale": None if rng.random() < 0.7 else round(rng.uniform(0.02, 0.6), 4)}
    return cfg


def program(cfg):
    t, Hkv, G, d = cfg["dtype"], cfg["Hkv"], cfg["G"], cfg["d"]
    children = t if cfg["level"] == 1 else "f32"
    q = f"tensor<?x{Hkv * G}x?x{d}x{t}>"
    c = f"tensor<?x{Hkv}x?x{d}x{children}>"
    n = f"tensor<?x{Hkv}x?x?xi32>"
    u = f"tensor<?x{Hkv}x?x?xf32>"
    scale = "" if cfg["scale"] is None else f" scale = {cfg['scale']}"
    return f"""func.func @score(%q: {q}, %c: {c}, %n: {n}, %off: index) -> {u} {{
  %u = pisa.lse_score %q, %c, %n, %off level = {cfg['level']} block_size = {cfg['C']}
      branching = {cfg['g']}{scale} : {q}, {c}, {n} -> {u}
  return %u : {u}
}}
"""


def build(args):
    _, rejected = sweep.build_drawn(args, draw_config, program, "lse_score.json")
    return 1 if rejected else 0


# ------------------------------------------------------------------ inputs

def fanout_span(cfg):
    if cfg["level"] == 1:
        return cfg["C"], 1
    return cfg["g"], cfg["C"] * cfg["g"] ** (cfg["level"] - 2)


def draw_shape(rng, cfg):
    """B, Nq, R (children rows), S and the offset: mostly ordinary, with
    each edge drawn now and then."""
    fanout, span = fanout_span(cfg)
    B = 0 if rng.random() < 0.04 else rng.randint(1, 3)
    nq = 0 if rng.random() < 0.04 else rng.choice((1, rng.randint(1, 40), rng.randint(1, 200)))
    R = 0 if rng.random() < 0.04 else rng.randint(1, min(3000, 40 * fanout))
    S = 0 if rng.random() < 0.04 else rng.randint(1, 40)
    keys = R * span
    r = rng.random()
    if r < 0.6:
        offset = rng.randint(0, max(0, keys - nq))      # inside the children
    elif r < 0.8:
        offset = rng.randint(0, keys + 2 * span * fanout)  # past them too
    elif r < 0.9:
        offset = 0
    else:
        offset = INT32_MAX - rng.randint(0, 3)           # the last positions
    return B, nq, R, S, offset


def make_candidates(torch, gen, shape, R, offset, fanout, span):
    """Nodes near each query's causal frontier (where the mask decides),
    any node of the level, -1 padding, other negatives, nodes past the end,
    2^31 - 1 and duplicates."""
    B, Hkv, Nq, S = shape
    dev = "cuda"
    nodes = max(1, -(-R // fanout))
    t = offset + torch.arange(Nq, device=dev)
    frontier = (t // (fanout * span)).clamp(max=nodes)[None, None, :, None]
    near = frontier + torch.randint(-2, 2, shape, generator=gen, device=dev)
    anywhere = torch.randint(0, nodes + 2, shape, generator=gen, device=dev)
    odd = torch.tensor([-1, -1, -2, -(2**31), INT32_MAX, nodes, nodes + 5], device=dev)
    odd = odd[torch.randint(0, len(odd), shape, generator=gen, device=dev)]
    pick = torch.rand(shape, generator=gen, device=dev)
    cand = torch.where(pick < 0.45, near, torch.where(pick < 0.85, anywhere, odd))
    if S > 1:  # duplicates: copy entry 0 into some rows' last entry
        dup = torch.rand(shape[:3], generator=gen, device=dev) < 0.2
        cand[..., -1] = torch.where(dup, cand[..., 0], cand[..., -1])
    return cand.clamp(-(2**31), INT32_MAX).to(torch.int32).contiguous()


# ------------------------------------------------------------------ check

def cross_check(torch, reference, numpy_dir, rng):
    """The float64 reference equals the CPU test's NumPy one on small inputs."""
    import numpy as np
    numpy_check = repo.load(os.path.join(numpy_dir, "check_lse_score.py"),
                            "numpy_check_lse_score")
    gen = torch.Generator(device="cuda").manual_seed(rng.randrange(2**31))
    for (B, Hkv, G, Nq, d, R, level, C, g, S, offset) in [
            (1, 1, 3, 6, 8, 13, 1, 4, 2, 5, 7), (2, 2, 2, 5, 4, 7, 2, 3, 2, 4, 14),
            (1, 2, 4, 9, 16, 11, 3, 2, 3, 6, 20), (1, 1, 1, 4, 5, 3, 1, 8, 2, 3, 0)]:
        q = torch.randn(B, Hkv * G, Nq, d, generator=gen, device="cuda")
        c = torch.randn(B, Hkv, R, d, generator=gen, device="cuda")
        fanout = C if level == 1 else g
        cand = torch.randint(-1, -(-R // fanout) + 2, (B, Hkv, Nq, S), generator=gen,
                             device="cuda", dtype=torch.int32)
        got = reference.lse_score(q, c, cand, level, C, g, offset=offset).cpu().numpy()
        want = numpy_check.reference(q.cpu().numpy(), c.cpu().numpy(), cand.cpu().numpy(),
                                     level, C, g, offset)
        same_inf = np.array_equal(np.isneginf(got), np.isneginf(want))
        finite = np.isfinite(want)
        if not same_inf or not np.allclose(got[finite], want[finite], rtol=1e-12, atol=1e-12):
            print(f"FAIL reference cross-check level={level} C={C} g={g}")
            return False
    print("ok   float64 reference == NumPy reference on 4 small cases", flush=True)
    return True


def dtypes(torch, cfg):
    """The queries' dtype and the children's: the keys' at level 1, f32
    summaries above."""
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[cfg["dtype"]]
    return dt, dt if cfg["level"] == 1 else torch.float32


def check_shape(torch, reference, lib, cfg, rng, gen):
    dt, cdt = dtypes(torch, cfg)
    B, nq, R, S, offset = draw_shape(rng, cfg)
    Hkv, G, d = cfg["Hkv"], cfg["G"], cfg["d"]
    fanout, span = fanout_span(cfg)
    amp = rng.choice((0.3, 1.0, 3.0))
    q = (amp * torch.randn(B, Hkv * G, nq, d, generator=gen, device="cuda")).to(dt)
    c = (amp * torch.randn(B, Hkv, R, d, generator=gen, device="cuda")).to(cdt)
    cand = make_candidates(torch, gen, (B, Hkv, nq, S), R, offset, fanout, span)
    got = lib("score", q, c, cand, offset)
    want, mag = reference.lse_score(q, c, cand, cfg["level"], cfg["C"], cfg["g"],
                                    scale=cfg["scale"], offset=offset, with_magnitude=True)
    got = got.double()
    where = f"B={B} Nq={nq} R={R} S={S} offset={offset}"
    inf_want, inf_got = torch.isneginf(want), torch.isneginf(got)
    if not torch.equal(inf_want, inf_got):
        j = (inf_want != inf_got).nonzero()[0].tolist()
        return False, 0.0, (f"{where}: -inf differs at {j}: got {got[tuple(j)].item()} "
                            f"want {want[tuple(j)].item()}"), int(inf_want.sum())
    finite = ~inf_want
    if not finite.any():
        return True, 0.0, where, int(inf_want.sum())
    bound = TOLERANCE * G * (1 + mag)
    err = (got - want).abs()
    ratio = (err / bound)[finite]
    worst = ratio.max().item()
    if not torch.isfinite(got[finite]).all() or worst > 1:
        j = torch.where(finite, err / bound, torch.zeros_like(err)).argmax().item()
        j = list(torch.unravel_index(torch.tensor(j), err.shape))
        j = [int(x) for x in j]
        return False, worst, (f"{where}: |u - ref| {err[tuple(j)].item():.3g} above "
                              f"{bound[tuple(j)].item():.3g} at {j} (got "
                              f"{got[tuple(j)].item()}, want {want[tuple(j)].item()})"), 0
    return True, worst, where, int(inf_want.sum())


def check_refusals(torch, lib, cfg):
    """An offset outside [0, 2^31 - 1] is refused with the rule's words."""
    dt, cdt = dtypes(torch, cfg)
    q = torch.randn(1, cfg["Hkv"] * cfg["G"], 2, cfg["d"], device="cuda").to(dt)
    c = torch.randn(1, cfg["Hkv"], 5, cfg["d"], device="cuda").to(cdt)
    n = torch.zeros(1, cfg["Hkv"], 2, 3, dtype=torch.int32, device="cuda")
    for offset in (-1, INT32_MAX + 1):
        try:
            lib("score", q, c, n, offset)
        except RuntimeError as e:
            if "query_offset is outside [0, 2147483647]" not in str(e):
                return f"offset {offset}: refused with {e}"
            continue
        return f"offset {offset}: not refused"
    return None


def check(args):
    import torch
    from pisa import aot, reference

    with open(os.path.join(args.dir, "lse_score.json")) as f:
        data = json.load(f)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"lse_score check: input seed {seed}, {len(data['cases'])} libraries", flush=True)
    rng = random.Random(seed)
    results = [cross_check(torch, reference, args.numpy_reference, rng)]
    t0, worst_all = time.time(), 0.0
    for cfg in data["cases"]:
        if args.only and cfg["name"] not in args.only:
            continue
        if time.time() - t0 > args.budget:
            print(f"budget of {args.budget} s spent: stopping", flush=True)
            break
        lib = aot.Library(os.path.join(args.dir, cfg["lib"]))
        gen = torch.Generator(device="cuda").manual_seed(rng.randrange(2**31))
        ok, worst, notes, infs = True, 0.0, [], 0
        refusal = check_refusals(torch, lib, cfg)
        if refusal:
            ok = False
            notes.append(refusal)
        for _ in range(args.shapes):
            fine, w, note, n_inf = check_shape(torch, reference, lib, cfg, rng, gen)
            worst, infs = max(worst, w), infs + n_inf
            if not fine:
                ok = False
                notes.append(note)
        torch.cuda.synchronize()
        worst_all = max(worst_all, worst)
        results.append(ok)
        desc = (f"{cfg['name']} level={cfg['level']} Hkv={cfg['Hkv']} G={cfg['G']} "
                f"d={cfg['d']} C={cfg['C']} g={cfg['g']} {cfg['dtype']} "
                f"scale={cfg['scale']}: {args.shapes} shapes, {infs} -inf, "
                f"worst error / bound {worst:.3f}")
        print(f"{'ok  ' if ok else 'FAIL'} {desc}" + ("" if ok else ": " + "; ".join(notes[:3])),
              flush=True)
    failed = results.count(False)
    print(f"lse_score check: {len(results) - failed} passed, {failed} failed; "
          f"worst error / bound {worst_all:.3f}")
    return 0 if failed == 0 and len(results) > 1 else 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("out")
    b.add_argument("--seed", type=int, required=True)
    b.add_argument("--count", type=int, default=40)
    b.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    b.add_argument("--pisa-compile", default="build/bin/pisa-compile")
    c = sub.add_parser("check")
    c.add_argument("dir")
    c.add_argument("--seed", type=int)
    c.add_argument("--shapes", type=int, default=4)
    c.add_argument("--only", nargs="*")
    c.add_argument("--budget", type=float, default=400)
    c.add_argument("--numpy-reference", default=repo.INTEGRATION_DIR)
    args = parser.parse_args(argv)
    return {"build": build, "check": check}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
