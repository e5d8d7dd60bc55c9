"""pisa.sparse_attention on the GPU against a float64 reference,
over configurations drawn from a seed, through one AOT library each.

  python3 -m device_checks.check_attention build DIR --seed S --count N   # here
  python3 -m device_checks.check_attention check DIR [--shapes 3]         # GPU
  python3 -m device_checks.check_attention bench DIR                      # GPU, timing

A configuration (Hkv, G, d, dv, C, K, g, dtype) is drawn over the GPU
kernel's supported space and a little beyond it: a shape outside it must be
a compile-time error naming the limit (`build` fails otherwise). Every
library has dynamic B, N and Nq and six entries:
  attend(q, k, v, selection, offset) -> o          pisa.sparse_attention
  attend_lse(q, k, v, selection, offset) -> lse    the same op's lse
  attend_tm, attend_tm_lse                         the same, token-major
                                                   (must equal attend's
                                                   bitwise, transposed)
  attend_varlen(q, k, v, selection, cu_q, cu_k) -> o, lse
                                     pisa.sparse_attention_varlen
  prefill(q, k, v, offset) -> o      pyramid_build -> hier_topk ->
                                     sparse_attention, one program
  prefill_selection(q, k, offset) -> the selection prefill attends to
`build --union-queries W` compiles with pisa-compile
--attention-union-queries W: the query-tile kernel (W queries a block
attending the union of their blocks) wherever it takes the shape;
`build --kernel-config OP:FIELD=VALUE` (repeatable) passes pisa-compile's
option of that name (e.g. sparse_attention:prefetch_ahead=2).
`check` draws --shapes shapes per library (N < C, N not a multiple of C,
chunks and single decode queries included) and requires, against
`reference` (float64, docs/semantics.md section 6): |o - o_ref| <= 2e-2
(bf16) or 5e-3 (f16), |lse - lse_ref| <= 1e-3 max(1, |lse_ref|), rows with
no key exactly 0 and -inf. `attend` is given crafted selections (sorted
rows with -1 padding, duplicates, unsorted rows, entries out of range,
empty rows); `prefill` its own selection. Each shape also calls
`attend_varlen` on a packed batch (the first mixing lengths 0, 1, C - 1,
C, C + 1; sequences prefill, chunk, decode or none; crafted selections):
each sequence within the same tolerances of the reference at offset
N_b - Nq_b and bitwise equal to `attend_tm` on it alone, and with
cu_seqlens_k[0] = 1 every output and lse NaN.
"""

import argparse
import itertools
import json
import math
import os
import random
import statistics
import sys
import time

from device_checks import sweep

DTYPES = ("f16", "bf16")
ATTENTION_HEAD_DIMS = (16, 32, 64, 96, 128, 192, 256)
VALUE_DIMS = (32, 64, 96, 128, 256)
ATTENTION_BLOCK_SIZES = (16, 32, 64, 96, 128)
# Shapes the kernel does not take, and the words its error must hold.
OUTSIDE = (
    ({"dtype": "f32"}, "takes f16 or bf16"),
    ({"C": 16, "G": 32}, "block size C = 16"),
    ({"d": 40}, "head dim d = 40"),
    ({"dv": 48}, "value dim dv = 48"),
    ({"G": 65, "Hkv": 1}, "G = 65"),
)
TOLERANCE = {"bf16": 2e-2, "f16": 5e-3}
LSE_TOLERANCE = 1e-3


def draw_config(rng, index, space="all"):
    """A configuration over the whole space, or (space "registers") over the
    register kernel's (SparseAttention.h, attendsInRegisters: G <= 16, d and
    dv <= 128, C <= 64)."""
    small = space == "registers"
    max_g = 16 if small else 64
    cfg = {"name": f"a{index:04d}", "Hkv": rng.randint(1, 4),
           "G": rng.choice([g for g in (1, 2, 4, 8, 16, 32, 64) if g <= max_g])
           if rng.random() < 0.6 else rng.randint(1, max_g),
           "d": rng.choice([d for d in ATTENTION_HEAD_DIMS
                            if not small or (d % 32 == 0 and d <= 128)]),
           "dv": rng.choice([v for v in VALUE_DIMS if not small or v <= 128]),
           "C": rng.choice([c for c in ATTENTION_BLOCK_SIZES
                            if not small or c <= 64]),
           "K": rng.randint(3, 16),
           "g": rng.randint(2, 4), "dtype": rng.choice(DTYPES)}
    if small:
        return cfg
    if rng.random() < 0.12:
        change, words = rng.choice(OUTSIDE)
        cfg.update(change, expect_error=words)
    elif cfg["C"] == 16 and not in_registers(cfg):
        cfg["expect_error"] = "block size C = 16"
    elif shared_bytes(cfg) > 227 * 1024:
        cfg["expect_error"] = "bytes of shared memory per block"
    return cfg


def in_registers(cfg):
    """Whether the register kernel takes the configuration (SparseAttention.h,
    attendsInRegisters), written again here as the oracle of the C = 16
    limit."""
    G, d, dv, C = cfg["G"], cfg["d"], cfg["dv"], cfg["C"]
    return (cfg["dtype"] in DTYPES and G <= 16 and d % 32 == 0 and d <= 128
            and dv % 8 == 0 and dv <= 128 and C % 16 == 0 and C <= 64)


def shared_bytes(cfg):
    """The kernel's shared memory (SparseAttention.h, AttentionTiles),
    written again here as the oracle of the shared-memory limit."""
    G, d, dv, C, K = cfg["G"], cfg["d"], cfg["dv"], cfg["C"], cfg["K"]
    rows = 16 if G <= 16 else 32 if G <= 32 else 64
    parts = (rows * (d + 8) * 2, C * (d + 8) * 2, C * (dv + 8) * 2,
             rows * (C + 4) * 4, rows * (C + 8) * 2, rows * (dv + 4) * 4, K * 4)
    return sum(-(-p // 16) * 16 for p in parts)


def program(cfg):
    t, Hkv, G, d, dv = cfg["dtype"], cfg["Hkv"], cfg["G"], cfg["d"], cfg["dv"]
    C, K, g = cfg["C"], cfg["K"], cfg["g"]
    q = f"tensor<?x{Hkv * G}x?x{d}x{t}>"
    k = f"tensor<?x{Hkv}x?x{d}x{t}>"
    v = f"tensor<?x{Hkv}x?x{dv}x{t}>"
    s = f"tensor<?x{Hkv}x?x{K}xi32>"
    o = f"tensor<?x{Hkv * G}x?x{dv}x{t}>"
    lse = f"tensor<?x{Hkv * G}x?xf32>"
    p = f"tensor<?x{Hkv}x?x{d}xf32>"
    attend = (f"pisa.sparse_attention %q, %k, %v, %s, %off block_size = {C}\n"
              f"      : {q}, {k}, {v}, {s} -> {o}, {lse}")
    # Token-major: [B, T, H, X], lse [B, Nq, Hq].
    qt, kt = f"tensor<?x?x{Hkv * G}x{d}x{t}>", f"tensor<?x?x{Hkv}x{d}x{t}>"
    vt, st = f"tensor<?x?x{Hkv}x{dv}x{t}>", f"tensor<?x?x{Hkv}x{K}xi32>"
    ot, lt = f"tensor<?x?x{Hkv * G}x{dv}x{t}>", f"tensor<?x?x{Hkv * G}xf32>"
    attend_tm = (f"pisa.sparse_attention %q, %k, %v, %s, %off block_size = {C} "
                 f"{{token_major}}\n      : {qt}, {kt}, {vt}, {st} -> {ot}, {lt}")
    # Packed varlen: [T, H, X], lse [Tq, Hq], cu_seqlens [B + 1].
    qp, kp = f"tensor<?x{Hkv * G}x{d}x{t}>", f"tensor<?x{Hkv}x{d}x{t}>"
    vp, sp = f"tensor<?x{Hkv}x{dv}x{t}>", f"tensor<?x{Hkv}x{K}xi32>"
    op, lp, cu = f"tensor<?x{Hkv * G}x{dv}x{t}>", f"tensor<?x{Hkv * G}xf32>", "tensor<?xi32>"
    select = (f"%p = pisa.pyramid_build %k block_size = {C} branching = {g} : {k} -> {p}\n"
              f"  %s = pisa.hier_topk %q, %k, %p, %off topk = {K} block_size = {C} "
              f"branching = {g}\n      : {q}, {k}, {p} -> {s}")
    return f"""func.func @attend(%q: {q}, %k: {k}, %v: {v}, %s: {s}, %off: index) -> {o} {{
  %o, %l = {attend}
  return %o : {o}
}}
func.func @attend_lse(%q: {q}, %k: {k}, %v: {v}, %s: {s}, %off: index) -> {lse} {{
  %o, %l = {attend}
  return %l : {lse}
}}
func.func @attend_tm(%q: {qt}, %k: {kt}, %v: {vt}, %s: {st}, %off: index) -> {ot} {{
  %o, %l = {attend_tm}
  return %o : {ot}
}}
func.func @attend_tm_lse(%q: {qt}, %k: {kt}, %v: {vt}, %s: {st}, %off: index) -> {lt} {{
  %o, %l = {attend_tm}
  return %l : {lt}
}}
func.func @attend_varlen(%q: {qp}, %k: {kp}, %v: {vp}, %s: {sp}, %cuq: {cu}, %cuk: {cu})
    -> ({op}, {lp}) {{
  %o, %l = pisa.sparse_attention_varlen %q, %k, %v, %s cu_seqlens(%cuq, %cuk)
      block_size = {C} : {qp}, {kp}, {vp}, {sp}, {cu}, {cu} -> {op}, {lp}
  return %o, %l : {op}, {lp}
}}
func.func @prefill(%q: {q}, %k: {k}, %v: {v}, %off: index) -> {o} {{
  {select}
  %o, %l = {attend}
  return %o : {o}
}}
func.func @prefill_selection(%q: {q}, %k: {k}, %off: index) -> {s} {{
  {select}
  return %s : {s}
}}
"""


def build(args):
    rng = random.Random(args.seed)
    cfgs = [draw_config(rng, i, args.space) for i in range(args.count)]
    if args.paper:
        cfgs.append(dict(PAPER))
    cfgs += [dict(PAPER, name=f"k{k}", K=k) for k in args.paper_k]
    t0 = time.time()
    flags = []
    if args.union_queries:
        flags = ["--attention-union-queries", str(args.union_queries)]
    flags += sweep.kernel_config_flags(args)
    built, rejected = sweep.compile_all(cfgs, args.out, args.pisa_compile, args.jobs, program,
                                        flags)
    problems = [c["name"] for c in built if "expect_error" in c]
    problems += [f"{c['name']} ({c['error']})" for c in rejected
                 if c.get("expect_error", "\0") not in c["error"]]
    print(f"seed {args.seed}: built {len(built)}, rejected {len(rejected)} "
          f"in {time.time() - t0:.0f} s")
    with open(os.path.join(args.out, "attention.json"), "w") as f:
        json.dump({"seed": args.seed, "union_queries": args.union_queries,
                   "flags": flags, "cases": built, "rejected": rejected}, f, indent=1)
    if problems:
        print("wrongly built or rejected: " + ", ".join(problems))
        return 1
    return 0


# -------------------------------------------------------------- reference

def used_blocks(selection, num_blocks):
    """[..., K] bool: which entries count (docs/semantics.md, section 6):
    in order, 0 <= s < num_blocks and greater than the last one used."""
    import torch

    used = torch.zeros(selection.shape, dtype=torch.bool, device=selection.device)
    last = torch.full(selection.shape[:-1], -1, dtype=selection.dtype,
                      device=selection.device)
    for e in range(selection.shape[-1]):
        s = selection[..., e]
        u = (s >= 0) & (s < num_blocks) & (s > last)
        used[..., e] = u
        last = torch.where(u, s, last)
    return used


def reference(q, k, v, selection, offset, C, scale):
    """(o, lse) in float64 for the semantics of section 6, dense over the
    attended keys (queries in chunks so that the score tile stays small)."""
    import torch

    B, Hq, Nq, d = q.shape
    Hkv, N = k.shape[1], k.shape[2]
    G = Hq // Hkv
    nb = -(-N // C)
    used = used_blocks(selection.long(), nb)
    blocks = torch.zeros(B, Hkv, Nq, nb + 1, dtype=torch.bool, device=q.device)
    blocks.scatter_(-1, torch.where(used, selection.long(), nb), used)
    blocks = blocks[..., :nb]
    o = torch.zeros(B, Hq, Nq, v.shape[3], dtype=torch.float64, device=q.device)
    lse = torch.full((B, Hq, Nq), -math.inf, dtype=torch.float64, device=q.device)
    kd, vd = k.double(), v.double()
    key = torch.arange(N, device=q.device)
    step = max(1, (1 << 24) // max(1, Hq * N))
    for i0 in range(0, Nq, step):
        i1 = min(Nq, i0 + step)
        t = offset + torch.arange(i0, i1, device=q.device)
        mask = blocks[:, :, i0:i1].repeat_interleave(C, -1)[..., :N]
        mask = mask & (key[None, None, None, :] <= t[None, None, :, None])
        mask = mask.repeat_interleave(G, 1)                      # [B, Hq, n, N]
        scores = scale * torch.einsum("bhid,bhjd->bhij", q[:, :, i0:i1].double(),
                                      kd.repeat_interleave(G, 1))
        scores = scores.masked_fill(~mask, -math.inf)
        row_lse = torch.logsumexp(scores, -1)
        probs = torch.exp(scores - row_lse[..., None].clamp(min=-1e300))
        probs = torch.nan_to_num(probs, nan=0.0).masked_fill(~mask, 0.0)
        o[:, :, i0:i1] = torch.einsum("bhij,bhjd->bhid", probs, vd.repeat_interleave(G, 1))
        lse[:, :, i0:i1] = row_lse
    return o, lse


def crafted_selection(gen, B, Hkv, Nq, K, N, C, offset):
    """Rows of every kind section 6 defines: hier_topk-like (ascending, the
    query's own block, -1 padding), duplicates, unsorted, out of range,
    empty."""
    import torch

    nb = -(-N // C)
    own = (offset + torch.arange(Nq)) // C
    sel = torch.randint(-2, nb + 3, (B, Hkv, Nq, K), generator=gen)
    kind = torch.randint(0, 5, (B, Hkv, Nq), generator=gen)
    ascending = torch.sort(torch.randint(0, max(nb, 1), (B, Hkv, Nq, K), generator=gen), -1)[0]
    ascending[..., -1] = own.clamp(max=nb - 1)
    ascending = torch.sort(ascending, -1)[0]
    pad = torch.rand(B, Hkv, Nq, K, generator=gen) < 0.2
    ascending = torch.where(pad, torch.full_like(ascending, -1), ascending)
    sel = torch.where((kind <= 1)[..., None], ascending, sel)          # hier_topk-like
    sel = torch.where((kind == 4)[..., None], torch.full_like(sel, -1), sel)  # empty
    return sel.to(torch.int32)


def compare(o, lse, o_ref, lse_ref, dtype):
    """(ok, worst output error, worst lse error, note)."""
    import torch

    empty = torch.isinf(lse_ref)
    err = (o.double() - o_ref).abs()
    worst = float(err.max()) if err.numel() else 0.0
    lse_ok = torch.where(empty, torch.isinf(lse) & (lse < 0),
                         (lse.double() - lse_ref).abs()
                         <= LSE_TOLERANCE * lse_ref.abs().clamp(min=1.0))
    lse_err = (lse.double() - lse_ref).abs().masked_fill(empty, 0.0)
    worst_lse = float(lse_err.max()) if lse_err.numel() else 0.0
    empty_rows_zero = bool((o[empty.unsqueeze(-1).expand_as(o)] == 0).all())
    ok = worst <= TOLERANCE[dtype] and bool(lse_ok.all()) and empty_rows_zero
    note = "" if ok else (f"max |o - ref| {worst:.3g}, lse rows wrong "
                          f"{int((~lse_ok).sum())}, empty rows zero {empty_rows_zero}")
    return ok, worst, worst_lse, note


def draw_shape(rng, cfg):
    """B, N, Nq, offset of one call (the sweep's lengths, kept small enough
    for the dense reference)."""
    N = sweep.draw_length(rng, cfg["C"], 5000)
    mode = rng.choice(("prefill", "chunk", "decode"))
    if mode == "prefill" or N == 1:
        nq, offset = min(N, 1500), N - min(N, 1500)
    elif mode == "chunk":
        nq = rng.randint(1, min(N - 1, 700))
        offset = rng.randint(0, N - nq)
    else:
        nq, offset = 1, rng.randint(0, N - 1)
    return rng.randint(1, 2), N, nq, offset, mode


def draw_packed_batch(rng, C, first):
    """(lengths N_b, query counts Nq_b) of a packed batch: the first call's
    mixes the edge lengths (0, 1, C - 1, C, C + 1), the others are drawn;
    each sequence prefill, a chunk, decode or no query."""
    if first:
        lengths = [0, 1, max(C - 1, 1), C, C + 1, sweep.draw_length(rng, C, 2000)]
        rng.shuffle(lengths)
    else:
        lengths = [0 if rng.random() < 0.1 else sweep.draw_length(rng, C, 2500)
                   for _ in range(rng.randint(1, 5))]
    queries = []
    for n in lengths:
        kind = rng.choices(("prefill", "decode", "chunk", "none"), (0.4, 0.3, 0.2, 0.1))[0]
        queries.append(min(n, 1200) if kind == "prefill" else min(n, 1) if kind == "decode"
                       else rng.randint(0, min(n, 600)) if kind == "chunk" else 0)
    return lengths, queries


def cu_of(counts):
    import torch
    return torch.tensor([0] + list(itertools.accumulate(counts)), dtype=torch.int32)


def check_varlen(lib, cfg, rng, gen, first):
    """attend_varlen on a packed batch: each sequence against the float64
    reference at offset N_b - Nq_b, and bitwise equal to attend_tm on that
    sequence alone; then the same batch with cu_seqlens_k[0] = 1 (a broken
    batch): every output and lse NaN. Returns (ok, worst error, notes)."""
    import torch

    Hkv, G, d, dv, C, K = (cfg[x] for x in ("Hkv", "G", "d", "dv", "C", "K"))
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[cfg["dtype"]]
    lengths, queries = draw_packed_batch(rng, C, first)
    Tq, Tk = sum(queries), sum(lengths)
    q = torch.randn(Tq, Hkv * G, d, generator=gen).to(dt).cuda()
    k = torch.randn(Tk, Hkv, d, generator=gen).to(dt).cuda()
    v = torch.randn(Tk, Hkv, dv, generator=gen).to(dt).cuda()
    parts = [crafted_selection(gen, 1, Hkv, nq, K, n, C, n - nq)[0].transpose(0, 1)
             for n, nq in zip(lengths, queries) if nq]
    sel = (torch.cat(parts) if parts else torch.zeros(0, Hkv, K, dtype=torch.int32)).cuda()
    cuq, cuk = cu_of(queries).cuda(), cu_of(lengths).cuda()
    o, lse = lib("attend_varlen", q, k, v, sel, cuq, cuk)
    torch.cuda.synchronize()
    notes, ok, worst = [], True, 0.0
    where = f"varlen N={lengths} Nq={queries}"
    for b, (n, nq) in enumerate(zip(lengths, queries)):
        if not nq:
            continue
        q0, k0 = int(cuq[b]), int(cuk[b])
        qb, kb, vb = q[q0:q0 + nq], k[k0:k0 + n], v[k0:k0 + n]
        sb = sel[q0:q0 + nq]
        o_ref, lse_ref = reference(qb.transpose(0, 1)[None], kb.transpose(0, 1)[None],
                                   vb.transpose(0, 1)[None], sb.transpose(0, 1)[None],
                                   n - nq, C, 1.0 / math.sqrt(d))
        ob, lb = o[q0:q0 + nq].transpose(0, 1)[None], lse[q0:q0 + nq].transpose(0, 1)[None]
        good, err, _, why = compare(ob, lb, o_ref, lse_ref, cfg["dtype"])
        worst = max(worst, err)
        if not good:
            ok = False
            notes.append(f"{where}: sequence {b}: {why}")
        o_tm = lib("attend_tm", qb[None], kb[None], vb[None], sb[None], n - nq)
        lse_tm = lib("attend_tm_lse", qb[None], kb[None], vb[None], sb[None], n - nq)
        if not (torch.equal(o_tm[0], o[q0:q0 + nq]) and torch.equal(lse_tm[0], lse[q0:q0 + nq])):
            ok = False
            notes.append(f"{where}: sequence {b} differs from attend_tm on it alone")
    if Tk:
        broken = cuk.clone()
        broken[0] = 1
        o_bad, lse_bad = lib("attend_varlen", q, k, v, sel, cuq, broken)
        torch.cuda.synchronize()
        if not (bool(torch.isnan(o_bad).all()) and bool(torch.isnan(lse_bad).all())):
            ok = False
            notes.append(f"{where}: cu_seqlens_k[0] = 1 did not give NaN everywhere")
    return ok, worst, notes


def check_case(lib, cfg, rng, shapes):
    import torch

    Hkv, G, d, dv, C, K = (cfg[x] for x in ("Hkv", "G", "d", "dv", "C", "K"))
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[cfg["dtype"]]
    scale = 1.0 / math.sqrt(d)
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    notes, ok, worst = [], True, 0.0
    for j in range(shapes):
        B, N, nq, off, mode = draw_shape(rng, cfg)
        q = torch.randn(B, Hkv * G, nq, d, generator=gen).to(dt).cuda()
        k = torch.randn(B, Hkv, N, d, generator=gen).to(dt).cuda()
        v = torch.randn(B, Hkv, N, dv, generator=gen).to(dt).cuda()
        sel = crafted_selection(gen, B, Hkv, nq, K, N, C, off).cuda()
        for entry, selection in (("attend", sel), ("prefill", None)):
            if selection is None:
                selection = lib("prefill_selection", q, k, off)
                o = lib("prefill", q, k, v, off)
            else:
                o = lib("attend", q, k, v, selection, off)
            lse = lib("attend_lse", q, k, v, selection, off)
            torch.cuda.synchronize()
            o_ref, lse_ref = reference(q, k, v, selection, off, C, scale)
            good, err, _, why = compare(o, lse, o_ref, lse_ref, cfg["dtype"])
            worst = max(worst, err)
            if not good:
                ok = False
                notes.append(f"{entry} B={B} N={N} Nq={nq} off={off} ({mode}): {why}")
            if entry == "attend":
                # The token-major library reads the same data transposed:
                # bitwise the same output and lse.
                tm = [x.transpose(1, 2).contiguous() for x in (q, k, v, selection)]
                o_tm = lib("attend_tm", *tm, off)
                lse_tm = lib("attend_tm_lse", *tm, off)
                if not (torch.equal(o_tm.transpose(1, 2), o)
                        and torch.equal(lse_tm.transpose(1, 2), lse)):
                    ok = False
                    notes.append(f"token-major B={B} N={N} Nq={nq}: differs from head-major")
        good, err, why = check_varlen(lib, cfg, rng, gen, first=j == 0)
        worst = max(worst, err)
        ok = ok and good
        notes += why
    desc = (f"{cfg['name']} Hkv={Hkv} G={G} d={d} dv={dv} C={C} K={K} {cfg['dtype']}: "
            f"{shapes} shapes, max |o - ref| {worst:.2e}")
    return ok, desc + ("" if ok else ": " + "; ".join(notes[:3]))


def check(args):
    import torch
    from pisa import aot

    with open(os.path.join(args.dir, "attention.json")) as f:
        data = json.load(f)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"attention check: input seed {seed}, {len(data['cases'])} libraries", flush=True)
    torch.manual_seed(seed)
    passed = failed = 0
    t0 = time.time()
    for cfg in data["cases"]:
        if args.only and cfg["name"] not in args.only:
            continue
        if time.time() - t0 > args.budget:
            print(f"budget of {args.budget} s spent: stopping", flush=True)
            break
        lib = aot.Library(os.path.join(args.dir, cfg["lib"]))
        ok, note = check_case(lib, cfg, random.Random(f"{seed}/{cfg['name']}"), args.shapes)
        passed += ok
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {note}", flush=True)
    print(f"attention check: {passed} passed, {failed} failed")
    return 0 if failed == 0 and passed else 1


# ------------------------------------------------------------------ bench

PAPER = {"name": "paper", "Hkv": 1, "G": 16, "d": 128, "dv": 128, "C": 64, "K": 8,
         "g": 2, "dtype": "bf16"}


def timed(fn, samples, fresh):
    """Median ms of fn() over `samples` calls, CUDA events around each, after
    a warm-up call; `fresh()` draws new inputs before each call (untimed)."""
    import torch

    fresh()
    fn()
    times = []
    for _ in range(samples):
        fresh()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(True), torch.cuda.Event(True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def paper_inputs(batch, n):
    """Fresh q [B, 16, N, 128], k and v [B, 1, N, 128] (bf16, on the GPU):
    the paper setting's inputs."""
    import torch

    def draw(heads):
        return torch.randn(batch, heads, n, 128, device="cuda").to(torch.bfloat16)

    return draw(16), draw(1), draw(1)


def bench(args):
    """Paper setting (B = 1, Hkv = 1, G = 16, d = dv = 128, C = 64, K = 8,
    bf16): the attention pass alone (over the prefill's own selection), the
    whole sparse prefill (pyramid + selection + attention, one library
    call), the NSA-style Triton peer (nsa_peer.py, fla's parallel_nsa_fwd
    design) over the same selection, and dense causal attention (PyTorch
    SDPA, flash backend) on the same q, k, v, in one run. The last column is
    the largest |o - o_peer| of the last sample (the two compute the same
    rows)."""
    import torch
    import torch.nn.functional as F
    from pisa import aot
    from device_checks import nsa_peer

    lib = aot.Library(os.path.join(args.dir, args.library))
    print(f"{args.library}:")
    print("| N | attention pass ms | NSA peer ms | peer / pass | sparse prefill ms "
          "| dense SDPA ms | dense / sparse | max |o - o_peer| |")
    print("|---|---|---|---|---|---|---|---|")
    for n in args.lengths:
        box = {}

        def fresh():
            box["q"], box["k"], box["v"] = paper_inputs(1, n)

        fresh()
        ws = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
        out = torch.empty(1, 16, n, 128, dtype=torch.bfloat16, device="cuda")
        sel = lib("prefill_selection", box["q"], box["k"], 0, workspace=ws)

        def refresh_selection():
            fresh()
            lib("prefill_selection", box["q"], box["k"], 0, out=sel, workspace=ws)

        attn = timed(lambda: lib("attend", box["q"], box["k"], box["v"], sel, 0, out=out,
                                 workspace=ws), args.samples, refresh_selection)
        peer_out = torch.empty_like(out)
        peer = timed(lambda: nsa_peer.sparse_attention(box["q"], box["k"], box["v"], sel, 0, 64,
                                                       out=peer_out), args.samples,
                     refresh_selection)
        lib("attend", box["q"], box["k"], box["v"], sel, 0, out=out, workspace=ws)
        differ = float((out.float() - peer_out.float()).abs().max())
        prefill = timed(lambda: lib("prefill", box["q"], box["k"], box["v"], 0, out=out,
                                    workspace=ws), args.samples, fresh)
        dense = float("nan")
        if n <= args.max_dense:
            from torch.nn.attention import SDPBackend, sdpa_kernel

            def sdpa():
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    F.scaled_dot_product_attention(
                        box["q"], box["k"].expand(1, 16, n, 128),
                        box["v"].expand(1, 16, n, 128), is_causal=True)
            dense = timed(sdpa, max(3, args.samples // 3), fresh)
        print(f"| {n} | {attn:.3f} | {peer:.3f} | {peer / attn:.2f} | {prefill:.3f} "
              f"| {dense:.2f} | {dense / prefill:.1f} | {differ:.1e} |", flush=True)
    return 0


def bench_last(args):
    """The paper setting's last `--queries` queries of each length attended
    alone (Nq = --queries at offset N - Nq; 1: a decode step's attention),
    over the rows the prefill's own selection gives them, with --batch
    sequences; the NSA-style peer over the same rows."""
    import torch
    from pisa import aot
    from device_checks import nsa_peer

    lib = aot.Library(os.path.join(args.dir, args.library))
    nq, batch = args.queries, args.batch
    print(f"{args.library}, the last {nq} queries, B = {batch}:")
    print("| N | attention ms | NSA peer ms | peer / pisa |")
    print("|---|---|---|---|")
    for n in args.lengths:
        box = {}
        ws = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")

        def fresh():
            q, box["k"], box["v"] = paper_inputs(batch, n)
            sel = lib("prefill_selection", q, box["k"], 0, workspace=ws)
            box["q"] = q[:, :, n - nq:, :].contiguous()
            box["sel"] = sel[:, :, n - nq:, :].contiguous()

        out = torch.empty(batch, 16, nq, 128, dtype=torch.bfloat16, device="cuda")
        attn = timed(lambda: lib("attend", box["q"], box["k"], box["v"], box["sel"], n - nq,
                                 out=out, workspace=ws), args.samples, fresh)
        peer_out = torch.empty_like(out)
        peer = timed(lambda: nsa_peer.sparse_attention(box["q"], box["k"], box["v"], box["sel"],
                                                       n - nq, 64, out=peer_out),
                     args.samples, fresh)
        print(f"| {n} | {attn:.4f} | {peer:.4f} | {peer / attn:.2f} |", flush=True)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("out")
    b.add_argument("--seed", type=int, required=True)
    b.add_argument("--count", type=int, default=30)
    b.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    b.add_argument("--pisa-compile", default="build/bin/pisa-compile")
    b.add_argument("--space", choices=("all", "registers"), default="all",
                   help="draw over the whole space or the register kernel's")
    sweep.add_kernel_config_option(b)
    b.add_argument("--union-queries", type=int, default=0,
                   help="pisa-compile --attention-union-queries: the query-tile "
                        "kernel of this many queries where it takes the shape")
    b.add_argument("--paper", action="store_true",
                   help="also the paper setting (libpaper.so, for bench)")
    b.add_argument("--paper-k", type=int, nargs="*", default=[], metavar="K",
                   help="also the paper setting with K selection entries a row "
                        "(case kK): lists longer than one warp's 32 entries")
    c = sub.add_parser("check")
    c.add_argument("dir")
    c.add_argument("--seed", type=int)
    c.add_argument("--shapes", type=int, default=3)
    c.add_argument("--only", nargs="*")
    c.add_argument("--budget", type=float, default=400)
    m = sub.add_parser("bench")
    m.add_argument("dir", help="holds libpaper.so (build --paper)")
    m.add_argument("--lengths", type=int, nargs="+",
                   default=[4096, 16384, 65536, 131072, 262144])
    m.add_argument("--samples", type=int, default=9)
    m.add_argument("--max-dense", type=int, default=262144)
    m.add_argument("--library", default="libpaper.so")
    t = sub.add_parser("bench-last")
    t.add_argument("dir", help="holds libpaper.so (build --paper)")
    t.add_argument("--lengths", type=int, nargs="+", default=[16384, 262144])
    t.add_argument("--queries", type=int, default=1)
    t.add_argument("--batch", type=int, default=1)
    t.add_argument("--samples", type=int, default=9)
    t.add_argument("--library", default="libpaper.so")
    args = parser.parse_args(argv)
    return {"build": build, "check": check, "bench": bench,
            "bench-last": bench_last}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
