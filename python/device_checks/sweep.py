"""A generated shape sweep of the selection against independent references.

Configurations are drawn from a printed seed over the whole supported space
(docs/testing.md lists it): B 1..3, Hkv 1..8, G 1..32, d in {32, 64, 96,
128, 256}, C in {16, 32, 64, 128}, K 3..32, g 2..4, N log-uniform in
1..300000 with edges (N < C, N = C, N = kC +- 1), prefill, chunked prefill
(offset > 0) and decode (Nq = 1), f32/f16/bf16, Gaussian keys, a few hot
keys per block, and exact ties.

  python3 -m device_checks.sweep build DIR --seed S --count N   # here: libraries
  python3 -m device_checks.sweep check DIR                      # GPU machine
  python3 -m device_checks.sweep cpu --seed S --count N         # pisa-run vs NumPy

`build` writes one AOT library per configuration (pisa-compile) and
DIR/sweep.json; `check` runs each on fresh inputs (seeded) against the
float64 PyTorch reference (pisa.reference). `cpu` draws small
configurations and checks `pisa-run select` against the NumPy reference
(test/Integration/pisa_reference.py).

A case passes when every differing row differs only at a near tie (the
reference's smallest score gap at a top-K boundary of that query is in
(0, TOL)) and at least 99.9% of its rows are equal; exact ties (gap 0)
must follow the tie rule. Queries of long sequences are sampled (at most
--rows per batch and KV head, the first and last C always included).
"""

import argparse
import concurrent.futures
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np

from device_checks import repo
from device_checks.cases import pyramid_rows

# The NumPy reference and contract checks (test/Integration/pisa_reference.py).
INTEGRATION_DIR = repo.INTEGRATION_DIR

TOL = 1e-2
MIN_AGREEMENT = 0.999
# Flips at gaps this small are f32 rounding of the group sums: on the H200
# the largest gap of any flipped row was 2.7e-5 over 75 shapes with flips
# (sweeps of seeds 14-16, docs/testing.md). A shape whose flips all sit
# below it passes whatever its agreement (a burst of true near ties), one
# with flips up to TOL must still agree on 99.9% of its rows.
ROUNDING_GAP = 5e-5
DTYPES = ("f32", "f16", "bf16")
HEAD_DIMS = (32, 64, 96, 128, 256)
BLOCK_SIZES = (16, 32, 64, 128)
INPUTS = ("gaussian", "hot", "ties")


def draw_length(rng, C, max_n):
    """N log-uniform in 1..max_n, or an edge around the block size."""
    edge = rng.random()
    if edge < 0.08:
        return rng.randint(1, max(1, C - 1))          # N < C
    if edge < 0.12:
        return C                                        # N = C
    if edge < 0.25:
        k = rng.randint(1, max(1, min(64, max_n // C)))
        return max(1, min(max_n, k * C + rng.choice((-1, 1))))
    return max(1, min(max_n, int(math.exp(rng.uniform(0, math.log(max_n))))))


# The space where stage 2 runs on wgmma (sm_90a, docs/gpu.md,
# canScoreWithWgmma): 64-row tiles (G = 16 at the default q_tile of 4),
# f16/bf16, d a multiple of 64 with two query tiles and the key tile in
# 48 KiB (2 * 64 d + C d elements of 2 bytes), C with a two-stage schedule
# (G + C / 4 < C).
WGMMA_SPACE = {"G": 16, "dtype": ("f16", "bf16"),
               "d_C": ((64, 32), (64, 64), (64, 128), (128, 32), (128, 64))}


def draw_config(rng, index, max_n=300000, max_batch=3, space="all"):
    """One configuration of the supported space (space="all") or of the
    wgmma scorer's (space="wgmma": prefill and chunked prefill only, the
    schedules that are two-stage)."""
    wg = space == "wgmma"
    if wg:
        G = WGMMA_SPACE["G"]
        d, C = rng.choice(WGMMA_SPACE["d_C"])
    else:
        G = rng.choice((1, 2, 4, 8, 16, 32)) if rng.random() < 0.5 else rng.randint(1, 32)
        C = rng.choice(BLOCK_SIZES)
    cfg = {
        "name": f"s{index:04d}",
        "B": rng.randint(1, max_batch), "Hkv": rng.randint(1, 8), "G": G,
        "d": d if wg else rng.choice(HEAD_DIMS), "C": C,
        "K": rng.randint(3, 32), "g": rng.randint(2, 4),
        "dtype": rng.choice(WGMMA_SPACE["dtype"] if wg else DTYPES),
        "inputs": rng.choices(INPUTS, (0.6, 0.25, 0.15))[0],
    }
    N = draw_length(rng, C, max_n)
    mode = rng.choices(("prefill", "chunk", "decode"),
                       (0.7, 0.3, 0.0) if wg else (0.5, 0.25, 0.25))[0]
    if mode == "prefill" or N == 1:
        nq, offset = N, 0
    elif mode == "chunk":
        nq = rng.randint(1, N - 1)
        offset = rng.randint(1, N - nq)
    else:
        nq, offset = 1, rng.randint(0, N - 1)
    cfg.update(N=N, Nq=nq, offset=offset, mode=mode)
    return cfg


def draw(seed, count, **kw):
    rng = random.Random(seed)
    return [draw_config(rng, i, **kw) for i in range(count)]


def is_decode(cfg):
    return cfg["mode"] == "decode" and cfg["Nq"] == 1


def program(cfg, schedule=None):
    """The selection program of a configuration. Without `schedule` the
    compiler's own --pisa-select-schedule decides, as for a user. A dynamic
    configuration leaves B, N and Nq (1 for decode) to the call and takes
    the query offset as an argument: one library for every length."""
    t = cfg["dtype"]
    B, Hkv, G, d = cfg["B"], cfg["Hkv"], cfg["G"], cfg["d"]
    if cfg.get("dynamic"):
        B, N, rows = "?", "?", "?"
        Nq = 1 if is_decode(cfg) else "?"
    else:
        N, Nq = cfg["N"], cfg["Nq"]
        rows = pyramid_rows(N, cfg["C"], cfg["g"])
    tm = bool(cfg.get("token_major"))
    # token_major: Q, K and the selection [B, T, H, X] (read in place).
    order = (lambda h, n, x: f"{B}x{n}x{h}x{x}") if tm else (lambda h, n, x: f"{B}x{h}x{n}x{x}")
    q = f"tensor<{order(Hkv * G, Nq, d)}x{t}>"
    k = f"tensor<{order(Hkv, N, d)}x{t}>"
    p = f"tensor<{B}x{Hkv}x{rows}x{d}xf32>"
    r = f"tensor<{order(Hkv, Nq, cfg['K'])}xi32>"
    attrs = []
    if schedule:
        attrs.append(f"schedule = #pisa.schedule<{schedule}, q_tile = 4, "
                     "io_two_stage = 0, io_single_stage = 0>")
    if tm:
        attrs.append("token_major")
    attr = f" {{{', '.join(attrs)}}}" if attrs else ""
    pattr = " {token_major}" if tm else ""
    if cfg.get("dynamic"):
        return f"""func.func @sweep_select(%q: {q}, %k: {k}, %off: index) -> {r}
    attributes {{llvm.emit_c_interface}} {{
  %p = pisa.pyramid_build %k block_size = {cfg['C']} branching = {cfg['g']}{pattr} : {k} -> {p}
  %s = pisa.hier_topk %q, %k, %p, %off topk = {cfg['K']} block_size = {cfg['C']} branching = {cfg['g']}{attr}
      : {q}, {k}, {p} -> {r}
  return %s : {r}
}}
"""
    return f"""func.func @sweep_select(%q: {q}, %k: {k}) -> {r}
    attributes {{llvm.emit_c_interface}} {{
  %off = arith.constant {cfg['offset']} : index
  %p = pisa.pyramid_build %k block_size = {cfg['C']} branching = {cfg['g']}{pattr} : {k} -> {p}
  %s = pisa.hier_topk %q, %k, %p, %off topk = {cfg['K']} block_size = {cfg['C']} branching = {cfg['g']}{attr}
      : {q}, {k}, {p} -> {r}
  return %s : {r}
}}
"""


# ----------------------------------------------------------------- inputs

def make_keys(rng, cfg, shape):
    """Keys as float64 NumPy arrays: Gaussian, hot keys, or exact ties."""
    B, H, N, d = shape
    C = cfg["C"]
    if cfg["inputs"] == "ties":
        # Every leaf block holds the same keys in steps of 1/8: block means
        # and node means are exact, complete blocks score exactly alike.
        base = rng.integers(-16, 17, size=(C, d)) / 8.0
        return np.broadcast_to(base[np.arange(N) % C], shape).copy()
    k = rng.standard_normal(shape)
    if cfg["inputs"] == "hot":
        # Mostly small keys, two large ones per block: the block scores are
        # dominated by a few keys, as with attention sinks.
        k *= 0.1
        for blk in range(-(-N // C)):
            lo, hi = blk * C, min(N, blk * C + C)
            for j in rng.integers(lo, hi, size=min(2, hi - lo)):
                k[:, :, j] = 3.0 * rng.standard_normal((B, H, d))
    return k


def sample_rows(rng, cfg, max_rows):
    """Query indices to check: all when few, else the first and last C and
    a uniform sample."""
    nq, C = cfg["Nq"], cfg["C"]
    if nq <= max_rows:
        return np.arange(nq)
    edge = np.unique(np.concatenate([np.arange(min(C, nq)),
                                     np.arange(max(0, nq - C), nq)]))
    middle = np.setdiff1d(np.arange(nq), edge)
    rest = rng.choice(middle, size=min(len(middle), max(0, max_rows - len(edge))),
                      replace=False)
    return np.unique(np.concatenate([edge, rest]))


def verdict(got, want, gaps):
    """(passed, summary) for selections [..., K] and reference gaps [...]."""
    differs = (got != want).any(-1)
    rows = differs.size
    excused = differs & (gaps > 0) & (gaps < TOL)
    wrong = differs & ~excused
    agree = 1.0 - differs.mean() if rows else 1.0
    rounding = differs.any() and float(gaps[differs].max()) < ROUNDING_GAP
    ok = not wrong.any() and (agree >= MIN_AGREEMENT or differs.sum() <= 1
                              or rounding)
    summary = {"rows": int(rows), "differ": int(differs.sum()),
               "unexplained": int(wrong.sum()), "agreement": float(agree),
               "exact_tie_rows": int((gaps == 0).sum())}
    if differs.any():
        # How near the ties that flipped were (f32 rounding of the group
        # sums is ~1e-5 of |u|): the evidence when agreement is low.
        summary["max_differing_gap"] = float(gaps[differs].max())
    if wrong.any():
        at = tuple(int(i) for i in np.argwhere(wrong)[0])
        summary["first_unexplained"] = {"at": at, "got": got[at].tolist(),
                                        "want": want[at].tolist(),
                                        "gap": float(gaps[at])}
    return ok, summary


# ------------------------------------------------------------------ build

def compile_one(cfg, out, pisa_compile, text, flags=()):
    src = os.path.join(out, cfg["name"] + ".mlir")
    with open(src, "w") as f:
        f.write(text)
    lib = os.path.join(out, "lib" + cfg["name"] + ".so")
    r = subprocess.run([pisa_compile, src, "-o", lib, *flags], capture_output=True,
                       text=True)
    return cfg, r.returncode, r.stderr.strip()


def add_kernel_config_option(parser):
    """A build command's --kernel-config OP:FIELD=VALUE (repeatable)."""
    parser.add_argument("--kernel-config", action="append", default=[],
                        metavar="OP:FIELD=VALUE",
                        help="pisa-compile --kernel-config (repeatable): a kernel_config "
                             "field asked of every op of one kind, e.g. "
                             "sparse_attention:prefetch_ahead=2")


def kernel_config_flags(args):
    """pisa-compile's flags for a build command's --kernel-config entries."""
    return [flag for entry in args.kernel_config for flag in ("--kernel-config", entry)]


def compile_all(cfgs, out, pisa_compile, jobs, program_of, flags=()):
    """Compiles program_of(cfg) for every configuration into out/ on `jobs`
    threads (pisa-compile given `flags` too): (built, rejected), each
    configuration given its "lib" or its "error" (a shape the kernels
    cannot take must be a compile-time error naming the limit; it is
    recorded)."""
    os.makedirs(out, exist_ok=True)
    built, rejected = [], []
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for cfg, rc, err in pool.map(
                lambda c: compile_one(c, out, pisa_compile, program_of(c), flags),
                cfgs):
            if rc == 0:
                cfg["lib"] = "lib" + cfg["name"] + ".so"
                built.append(cfg)
            else:
                cfg["error"] = err.splitlines()[-1] if err else f"exit {rc}"
                rejected.append(cfg)
                print(f"rejected {cfg['name']}: {cfg['error']}", flush=True)
    return built, rejected


def build_drawn(args, draw_config, program_of, manifest, extra=(), flags=()):
    """The `build` command of a device check: --count configurations drawn
    from --seed (then `extra`), compiled into --out (`compile_all`, with
    pisa-compile `flags`) and recorded in out/`manifest` with the seed and
    the flags; returns (built, rejected)."""
    rng = random.Random(args.seed)
    cfgs = [draw_config(rng, i) for i in range(args.count)] + list(extra)
    t0 = time.time()
    built, rejected = compile_all(cfgs, args.out, args.pisa_compile, args.jobs, program_of,
                                  flags)
    print(f"seed {args.seed}: built {len(built)}, rejected {len(rejected)} "
          f"in {time.time() - t0:.0f} s")
    with open(os.path.join(args.out, manifest), "w") as f:
        json.dump({"seed": args.seed, "flags": list(flags), "cases": built,
                   "rejected": rejected}, f, indent=1)
    return built, rejected


def reshape(cfg, j, seed, max_n):
    """Shape j of a dynamic configuration's library: new B, N, Nq and
    offset in the same mode (decode keeps Nq = 1), drawn from the seed."""
    rng = random.Random(f"{seed}/{cfg['name']}/{j}")
    out = dict(cfg, name=f"{cfg['name']}#{j}", B=rng.randint(1, 3))
    N = draw_length(rng, cfg["C"], max_n)
    if is_decode(cfg):
        nq, offset = 1, rng.randint(0, N - 1)
    elif cfg["mode"] == "chunk" and N > 1:
        nq = rng.randint(1, N - 1)
        offset = rng.randint(1, N - nq)
    else:
        nq, offset = N, 0
    out.update(N=N, Nq=nq, offset=offset)
    return out


def extra_args(cfg):
    """Arguments after (q, k): a dynamic library takes the query offset."""
    return [cfg["offset"]] if cfg.get("dynamic") else []


def call(lib, cfg, q, k, **kwargs):
    """The configuration's library on (q, k), both [B, H, T, d]; the
    selection comes back [B, Hkv, Nq, K]. A token-major library is given
    [B, T, H, d] copies and its [B, Nq, Hkv, K] result is read through a
    transposed view."""
    if not cfg.get("token_major"):
        return lib("sweep_select", q, k, *extra_args(cfg), **kwargs)
    swap = lambda x: x.transpose(1, 2).contiguous()
    out = lib("sweep_select", swap(q), swap(k), *extra_args(cfg), **kwargs)
    return out.transpose(1, 2)


def build(args):
    cfgs = draw(args.seed, args.count, max_n=args.max_n, space=args.space)
    if args.extra:
        with open(args.extra) as f:
            cfgs += json.load(f)
    layout_rng = random.Random(f"{args.seed}-layout")
    for cfg in cfgs:
        cfg["dynamic"] = cfg.get("dynamic", args.dynamic)
        if "token_major" not in cfg:
            cfg["token_major"] = layout_rng.random() < args.token_major_share
    print(f"seed {args.seed}: {len(cfgs)} configurations", flush=True)
    t0 = time.time()
    flags = kernel_config_flags(args)
    built, rejected = compile_all(cfgs, args.out, args.pisa_compile, args.jobs,
                                  lambda c: program(c, c.get("schedule")), flags)
    print(f"built {len(built)}, rejected {len(rejected)} in {time.time() - t0:.0f} s")
    with open(os.path.join(args.out, "sweep.json"), "w") as f:
        json.dump({"seed": args.seed, "max_n": args.max_n, "flags": flags, "cases": built,
                   "rejected": rejected}, f, indent=1)
    return 0


# ------------------------------------------------------------------ check

def report(name, results):
    """Prints {what: ok} of configuration `name`; returns the failures."""
    for what, ok in results.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {what}", flush=True)
    return sum(not ok for ok in results.values())


def named_cases_cli(doc):
    """(args, cases) for the device checks that take SWEEP_DIR --only NAME...
    [--seed S]: the named configurations of a built sweep."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("dir")
    parser.add_argument("--only", nargs="+", required=True)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    with open(os.path.join(args.dir, "sweep.json")) as f:
        cases = [c for c in json.load(f)["cases"] if c["name"] in args.only]
    return args, cases


def numpy_reference():
    """test/Integration/pisa_reference.py: the NumPy contract and checks."""
    return repo.load(os.path.join(INTEGRATION_DIR, "pisa_reference.py"))


def gpu_inputs(cfg, gen, keys=None):
    """(queries, keys) drawn on the GPU from `gen` on the current stream:
    Gaussian keys unless given (float32, e.g. NumPy's hot keys), then
    Gaussian queries, both converted to the configuration's dtype."""
    import torch
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    B, Hkv, G, d = cfg["B"], cfg["Hkv"], cfg["G"], cfg["d"]
    if keys is None:
        keys = torch.randn((B, Hkv, cfg["N"], d), generator=gen, device="cuda")
    q = torch.randn((B, Hkv * G, cfg["Nq"], d), generator=gen, device="cuda")
    return q.to(dt[cfg["dtype"]]), keys.to(dt[cfg["dtype"]])


def check_nonfinite(lib, cfg, q, k, tgen):
    """Calls the library on the inputs with inf, -inf and NaN planted in
    some key blocks and query rows, and returns how many result rows are not
    a valid selection (docs/semantics.md section 3: NaN scores rank as
    -inf). No answer is compared, only the result's shape of a selection."""
    import torch
    pisa_reference = numpy_reference()

    C, N, Nq = cfg["C"], cfg["N"], cfg["Nq"]
    q, k = q.clone(), k.clone()
    blocks = torch.randint(0, -(-N // C), (3,), generator=tgen, device="cuda")
    for i, value in enumerate((math.inf, -math.inf, math.nan)):
        lo = int(blocks[i]) * C
        k[:, :, lo:lo + C, i::3] = value
    rows = torch.randint(0, Nq, (2,), generator=tgen, device="cuda")
    q[:, :, rows, 0] = math.nan
    got = call(lib, cfg, q, k)
    bad = pisa_reference.invalid_rows(got.cpu().numpy(), N, C, cfg["K"],
                                      offset=cfg["offset"])
    return int(bad.sum())


def check_shape(args, lib, cfg, seed, tgen):
    """One call of `lib` on fresh inputs of cfg's shape against the float64
    reference; prints a line and returns the summary (ok, rows, ...)."""
    import torch
    from pisa import reference

    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    rng = np.random.default_rng([seed, zlib.crc32(cfg["name"].encode())])
    B, Hkv, G = cfg["B"], cfg["Hkv"], cfg["G"]
    kshape = (B, Hkv, cfg["N"], cfg["d"])
    qshape = (B, Hkv * G, cfg["Nq"], cfg["d"])
    if args.host_inputs:
        k = torch.from_numpy(make_keys(rng, cfg, kshape)).cuda().to(dt[cfg["dtype"]])
        q = torch.from_numpy(rng.standard_normal(qshape)).cuda().to(dt[cfg["dtype"]])
    else:
        # Drawn on the GPU and used at once, as a user's script would
        # (and quick: NumPy's draws took most of a device call).
        keys = None if cfg["inputs"] == "gaussian" else \
            torch.from_numpy(make_keys(rng, cfg, kshape)).cuda()
        q, k = gpu_inputs(cfg, tgen, keys)
    t0 = time.time()
    got = call(lib, cfg, q, k)
    rows = torch.from_numpy(sample_rows(rng, cfg, args.rows or cfg["Nq"])).cuda()
    got = got[:, :, rows]
    try:
        want, gaps = reference.select(q, k, cfg["C"], cfg["K"], cfg["g"],
                                      offset=cfg["offset"], rows=rows)
        ok, summary = verdict(got.cpu().numpy(), want.cpu().numpy(),
                              gaps.cpu().numpy())
    except torch.OutOfMemoryError as e:  # the checker's limit, not a pass
        ok, summary = False, {"rows": 0, "differ": 0, "unexplained": 0,
                              "error": str(e).splitlines()[0]}
    if args.nonfinite:
        invalid = check_nonfinite(lib, cfg, q, k, tgen)
        summary["nonfinite_invalid_rows"] = invalid
        ok = ok and invalid == 0
    torch.cuda.empty_cache()
    summary.update(name=cfg["name"], ok=bool(ok), seconds=round(time.time() - t0, 2))
    shape = " ".join(f"{x}={cfg[x]}" for x in ("B", "Hkv", "G", "d", "C", "K", "g", "N", "Nq", "offset", "dtype", "inputs"))
    if cfg.get("token_major"):
        shape += " token_major"
    print(f"{'ok  ' if ok else 'FAIL'} {cfg['name']} {shape}: {summary['rows']} rows, "
          f"{summary['differ']} differ ({summary['unexplained']} unexplained)"
          + (f" {summary.get('first_unexplained') or summary.get('error') or summary}"
             if not ok else ""),
          flush=True)
    return summary


def load_cases(args):
    """(DIR/sweep.json, the cases --only and --part pick, the input seed:
    --seed or a fresh one)."""
    with open(os.path.join(args.dir, "sweep.json")) as f:
        sweep = json.load(f)
    cases = sweep["cases"]
    if args.only:
        cases = [c for c in cases if c["name"] in args.only]
    if args.part:
        i, n = map(int, args.part.split("/"))
        cases = cases[i::n]
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    return sweep, cases, seed


def check(args):
    import torch
    from pisa import aot

    sweep, cases, seed = load_cases(args)
    print(f"sweep seed {sweep['seed']}, input seed {seed}, {len(cases)} cases", flush=True)
    results, deadline = [], time.time() + args.budget
    # Several libraries in one process, as a user's program may hold them.
    libs = {c["name"]: aot.Library(os.path.join(args.dir, c["lib"]))
            for c in cases} if args.preload else {}
    tgen = torch.Generator(device="cuda").manual_seed(seed)
    for case in cases:
        lib = libs.get(case["name"]) or aot.Library(os.path.join(args.dir, case["lib"]))
        shapes = [case]
        if case.get("dynamic"):
            shapes += [reshape(case, j, seed, sweep.get("max_n", 300000))
                       for j in range(1, args.reshapes + 1)]
        for cfg in shapes:
            if time.time() > deadline:
                break
            results.append(check_shape(args, lib, cfg, seed, tgen))
        del lib
        libs.pop(case["name"], None)
        if time.time() > deadline:
            print(f"budget of {args.budget} s spent: {len(results)} shapes checked")
            break
    failed = sum(not r["ok"] for r in results)
    rows = sum(r["rows"] for r in results)
    print(f"sweep: {len(results) - failed} passed, {failed} failed, {rows} rows checked"
          f" ({len(results)} shapes of {len(cases)} libraries)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": sweep["seed"], "input_seed": seed, "results": results}, f)
    return 1 if failed or not results else 0


# -------------------------------------------------------------------- cpu

def check_attend(args, pisa_reference, cfg, q, k, selection, rng, np_dtype, work):
    """pisa-run attend on the configuration (values of a drawn dv) against
    the NumPy reference over the selection pisa-run select returned (the
    same program selects): (ok, note)."""
    dv = int(rng.choice(HEAD_DIMS))
    v = rng.standard_normal(k.shape[:3] + (dv,)).astype(np_dtype)
    paths = {x: os.path.join(work, f"{x}.npy") for x in ("q", "k", "v", "o", "l", "s")}
    np.save(paths["v"], v)
    r = subprocess.run(
        [args.pisa_run, "attend", "--q", paths["q"], "--k", paths["k"], "--v", paths["v"],
         "--block-size", str(cfg["C"]), "--topk", str(cfg["K"]), "--branching",
         str(cfg["g"]), "--query-offset", str(cfg["offset"]), "--out", paths["o"],
         "--lse-out", paths["l"], "--selection-out", paths["s"]],
        capture_output=True, text=True)
    if r.returncode != 0:
        return False, f"; attend exit {r.returncode}: {r.stderr.strip()}"
    if not np.array_equal(np.load(paths["s"]), selection):
        return False, "; attend selected differently from select"
    o, lse = np.load(paths["o"]), np.load(paths["l"])
    want_o, want_lse = pisa_reference.attend(q, k, v, selection, cfg["C"],
                                             offset=cfg["offset"])
    tol = 5e-3 if np_dtype == np.float16 else 1e-4
    err = float(np.abs(o - want_o).max()) if o.size else 0.0
    finite = np.isfinite(want_lse)
    lse_ok = np.array_equal(np.isfinite(lse), finite) and np.all(
        np.abs(lse[finite] - want_lse[finite]) <= 1e-4 * (1 + np.abs(want_lse[finite])))
    ok = err <= tol and lse_ok
    return ok, f"; attention dv={dv} max error {err:.1e}" + ("" if lse_ok else ", lse differs")


def cpu(args):
    pisa_reference = numpy_reference()

    cfgs = draw(args.seed, args.count, max_n=args.max_n, max_batch=2)
    print(f"seed {args.seed}: {len(cfgs)} configurations", flush=True)
    failed = attended = 0
    with tempfile.TemporaryDirectory() as work:
        for cfg in cfgs:
            if cfg["dtype"] == "bf16":  # .npy has no bf16: pisa-run takes f32/f16
                cfg["dtype"] = "f16"
            rng = np.random.default_rng([args.seed, zlib.crc32(cfg["name"].encode())])
            np_dtype = np.float16 if cfg["dtype"] == "f16" else np.float32
            B, Hkv, G = cfg["B"], cfg["Hkv"], cfg["G"]
            k = make_keys(rng, cfg, (B, Hkv, cfg["N"], cfg["d"])).astype(np_dtype)
            q = rng.standard_normal((B, Hkv * G, cfg["Nq"], cfg["d"])).astype(np_dtype)
            qp, kp = os.path.join(work, "q.npy"), os.path.join(work, "k.npy")
            out = os.path.join(work, "sel.npy")
            np.save(qp, q)
            np.save(kp, k)
            r = subprocess.run(
                [args.pisa_run, "select", "--q", qp, "--k", kp, "--block-size",
                 str(cfg["C"]), "--topk", str(cfg["K"]), "--branching",
                 str(cfg["g"]), "--query-offset", str(cfg["offset"]), "--out", out],
                capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL {cfg['name']}: pisa-run exit {r.returncode}: {r.stderr.strip()}")
                failed += 1
                continue
            got = np.load(out)
            want, gaps = pisa_reference.select(q, k, cfg["C"], cfg["K"], cfg["g"],
                                               offset=cfg["offset"])
            ok, summary = verdict(got, want, gaps)
            note = ""
            # Attention over the same selection, where the float64
            # reference (Python loops) stays quick.
            if ok and B * Hkv * G * cfg["Nq"] <= args.attend_rows:
                ok, note = check_attend(args, pisa_reference, cfg, q, k, got,
                                        rng, np_dtype, work)
                attended += 1
            failed += not ok
            shape = " ".join(f"{x}={cfg[x]}" for x in ("B", "Hkv", "G", "d", "C", "K", "g", "N", "Nq", "offset", "dtype", "inputs"))
            print(f"{'ok  ' if ok else 'FAIL'} {cfg['name']} {shape}: {summary['rows']} rows, "
                  f"{summary['differ']} differ ({summary['unexplained']} unexplained){note}"
                  + ("" if ok or note else f" {summary.get('first_unexplained')}"), flush=True)
    print(f"cpu sweep: {len(cfgs) - failed} passed, {failed} failed "
          f"({attended} with attention)")
    return 1 if failed else 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m device_checks.sweep", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="draw configurations and compile their libraries")
    b.add_argument("out")
    b.add_argument("--seed", type=int, required=True)
    b.add_argument("--count", type=int, default=300)
    b.add_argument("--max-n", type=int, default=300000)
    b.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    b.add_argument("--extra", help="JSON list of further configurations (regressions)")
    b.add_argument("--pisa-compile", default="build/bin/pisa-compile")
    b.add_argument("--space", choices=("all", "wgmma"), default="all",
                   help="draw from the whole space or the wgmma scorer's")
    b.add_argument("--token-major-share", type=float, default=0.0,
                   help="share of configurations built token-major ([B, T, H, X] "
                        "queries, keys and selection; drawn apart from the shapes)")
    b.add_argument("--dynamic", action="store_true",
                   help="libraries of dynamic B, N and Nq (one per configuration; "
                        "check calls each on further shapes)")
    add_kernel_config_option(b)
    c = sub.add_parser("check", help="check built libraries on the GPU")
    c.add_argument("dir")
    c.add_argument("--seed", type=int)
    c.add_argument("--rows", type=int, default=2048,
                   help="queries checked per batch and KV head (sampled above; 0: all)")
    c.add_argument("--only", nargs="*")
    c.add_argument("--host-inputs", action="store_true",
                   help="draw every input with NumPy and copy it over (default: "
                        "queries and Gaussian keys drawn on the GPU right before "
                        "the call)")
    c.add_argument("--nonfinite", action="store_true",
                   help="also call each library with inf and NaN planted in its "
                        "inputs and check that every row is a valid selection")
    c.add_argument("--preload", action="store_true",
                   help="load every library before the first call")
    c.add_argument("--part", help="I/N: every N-th case from the I-th")
    c.add_argument("--budget", type=float, default=480, help="seconds")
    c.add_argument("--reshapes", type=int, default=2,
                   help="further shapes each dynamic library is called on")
    c.add_argument("--json")
    u = sub.add_parser("cpu", help="check pisa-run select against the NumPy reference")
    u.add_argument("--seed", type=int, required=True)
    u.add_argument("--count", type=int, default=40)
    u.add_argument("--max-n", type=int, default=600)
    u.add_argument("--pisa-run", default="build/bin/pisa-run")
    u.add_argument("--attend-rows", type=int, default=20000,
                   help="check pisa-run attend on configurations with at most "
                        "this many (batch, query head, query) rows")
    args = parser.parse_args(argv)
    return {"build": build, "check": check, "cpu": cpu}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
