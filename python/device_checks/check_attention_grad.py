"""pisa.sparse_attention_grad on the GPU against float64 autograd, over
configurations drawn from a seed, through one AOT library each.

  python3 -m device_checks.check_attention_grad build DIR --seed S --count N  # here
  python3 -m device_checks.check_attention_grad check DIR [--shapes 3]        # GPU
  python3 -m device_checks.check_attention_grad bench DIR                     # GPU, timing
  python3 -m device_checks.check_attention_grad compare OLD NEW               # GPU, two builds

A configuration (Hkv, G, d, dv, C, K, dtype) is drawn over the backward's
supported space and a little beyond it: a shape outside it must be a
compile-time error naming the limit (`build` fails otherwise). Every library
has dynamic B, N and Nq and these entries:
  attend, attend_lse (q, k, v, selection, offset)     the forward's o, lse
  grad_dq, grad_dk, grad_dv (q, k, v, selection, offset, o, lse, dO)
                                                      the backward's results
                                                      (f32)
  grad_all (the same operands)                        all three: the whole
                                                      backward
  grad_tm_dq, grad_tm_dk, grad_tm_dv, grad_tm_all     the same, token-major
                                                      (must equal the
                                                      head-major results
                                                      bitwise, transposed)
`check` draws --shapes shapes per library (N < C, N not a multiple of C,
chunks and single decode queries included) with crafted selections (-1
padding, duplicates, unsorted rows, entries out of range, empty rows), runs
the forward then the backward on the forward's o and lse, and compares dq,
dk and dv with autograd through a dense masked attention in float64 on the
same selection (an implementation independent of the kernels' formulas).
Pass rule (FlashAttention's test rule, on the relative Frobenius error):
each gradient's error at most twice that of the same math in PyTorch in the
input's dtype (autograd through matmuls and softmax in bf16/f16) plus 1e-3;
the backward run twice gives bitwise the same results (determinism).
Each shape also runs the packed entries (attend_varlen, grad_varlen:
pisa.sparse_attention_varlen and pisa.sparse_attention_grad_varlen) on a
packed batch (check_varlen: every sequence against autograd on it alone,
dq bitwise that of grad_tm_dq, NaN on broken cu_seqlens). A library built
with --dq-from-scores (marked in the manifest) takes a batch's dq from the
key kernel's dS tiles and a packed batch's from the dq pass: there each
sequence's dq alone meets the float64 rule too, instead of the bitwise
equality. `build --kernel-config OP:FIELD=VALUE` (repeatable) passes
pisa-compile's option of that name to every library.
"""

import argparse
import json
import math
import os
import random
import sys
import time

from device_checks import check_attention, sweep

DTYPES = ("f16", "bf16")
HEAD_DIMS = (32, 64, 96, 128, 192, 256)
VALUE_DIMS = (32, 64, 96, 128, 256)
BLOCK_SIZES = (16, 32, 64, 96, 128)
# Shapes the backward does not take, and the words its error must hold.
OUTSIDE = (
    ({"dtype": "f32"}, "takes f16 or bf16"),
    ({"C": 16, "G": 32}, "block size C = 16"),
    ({"d": 16}, "head dim d = 16"),
    ({"dv": 48}, "value dim dv = 48"),
    ({"G": 65, "Hkv": 1}, "G = 65"),
)
MAX_SHARED = 227 * 1024


def plan_bytes(cfg):
    """The larger of the two kernels' shared memory (AttentionGrad.h,
    QueryGradPlan and KeyGradPlan), written again here as the oracle of the
    shared-memory limit."""
    G, d, dv, C, K = cfg["G"], cfg["d"], cfg["dv"], cfg["C"], cfg["K"]
    R = 16 if G <= 16 else 32 if G <= 32 else 64
    up = lambda x: -(-x // 16) * 16  # noqa: E731
    if G <= 16 and d % 16 == 0 and d <= 128 and dv % 16 == 0 and C in (16, 32, 64):
        # The query-tile kernel: two buffers of K and V, four warps' Q and
        # dO rows, the lists, the union and its masks.
        query = (2 * (up(C * (d + 8) * 2) + up(C * (dv + 8) * 2))
                 + up(4 * up(16 * (d + 8) * 2)) + up(4 * up(16 * (dv + 8) * 2))
                 + up(4 * K * 4) + up(16) + 2 * up(4 * K * 4) + up(4))
    else:
        query = sum(up(x) for x in (R * (d + 8) * 2, R * (dv + 8) * 2, C * (d + 8) * 2,
                                    C * (dv + 8) * 2, R * (C + 4) * 4, R * (C + 4) * 4,
                                    R * (C + 8) * 2, R * (d + 4) * 4, K * 4))
    tokens = 64 // (1 << (G - 1).bit_length())
    tiles = [up(x) for x in (C * (d + 8) * 2, C * (dv + 8) * 2, 64 * (d + 8) * 2,
                             64 * (dv + 8) * 2)]
    sums = [up(C * (d + 4) * 4), up(C * (dv + 4) * 4)]
    if C in (16, 32, 64) and d % 16 == 0 and dv % 16 == 0 and d + dv <= 256:
        # The register key kernel: its sums over the 16-bit tiles if they fit.
        key = sum(tiles) + 3 * up(64 * 4) + (0 if sum(sums) <= sum(tiles) else sum(sums))
        window = 32
    else:
        key = sum(tiles) + sum(up(x) for x in (64 * (C + 4) * 4, 64 * (C + 4) * 4,
                                               C * (64 + 8) * 2, C * (64 + 8) * 2)) + sum(sums)
        window = 4
    key += up((tokens - 1 + window * 32) * 4) + up(4)
    return max(query, key)


def registers_take_block_of_16(cfg):
    """Whether both register kernels of the backward take the sizes with
    C = 16 (AttentionGrad.h: queryTileGradFits, keyGradientsInRegisters),
    written again here as the oracle of that limit."""
    G, d, dv = cfg["G"], cfg["d"], cfg["dv"]
    return (cfg["dtype"] in DTYPES and G <= 16 and d % 16 == 0 and d <= 128
            and dv % 16 == 0 and d + dv <= 256)


def draw_group_size(rng):
    """G: a power of two up to 64 more often than not, else any in 1-64."""
    return rng.choice((1, 2, 4, 8, 16, 32, 64)) if rng.random() < 0.6 else rng.randint(1, 64)


def draw_config(rng, index):
    cfg = {"name": f"g{index:04d}", "Hkv": rng.randint(1, 2), "G": draw_group_size(rng),
           "d": rng.choice(HEAD_DIMS), "dv": rng.choice(VALUE_DIMS),
           "C": rng.choice(BLOCK_SIZES), "K": rng.randint(3, 32),
           "dtype": rng.choice(DTYPES)}
    if rng.random() < 0.12:
        change, words = rng.choice(OUTSIDE)
        cfg.update(change, expect_error=words)
        if cfg["C"] == 16 and "C" not in change:
            # Only the drawn violation: with C = 16 the forward's (checked
            # first) could refuse the block size before the backward's
            # own rule is reached.
            cfg["C"] = 32
    elif cfg["C"] == 16 and not registers_take_block_of_16(cfg):
        cfg["expect_error"] = "block size C = 16"
    elif plan_bytes(cfg) > MAX_SHARED:
        cfg["expect_error"] = "bytes of shared memory per block"
    return cfg


def draw_warpgroup_config(rng, index):
    """A configuration the warpgroup key kernel takes (AttentionGrad.h,
    keyGradientsOnWarpgroup: C = 64, d and dv multiples of 64 with d + dv
    <= 256, 16-bit inputs), the rest drawn as in draw_config."""
    d, dv = rng.choice(((64, 64), (64, 128), (128, 64), (128, 128), (64, 192), (192, 64)))
    cfg = {"name": f"w{index:04d}", "Hkv": rng.randint(1, 2), "G": draw_group_size(rng),
           "d": d, "dv": dv, "C": 64, "K": rng.randint(3, 32),
           "dtype": rng.choice(DTYPES)}
    if plan_bytes(cfg) > MAX_SHARED:
        cfg["expect_error"] = "bytes of shared memory per block"
    return cfg


def program(cfg):
    t, Hkv, G, d, dv = cfg["dtype"], cfg["Hkv"], cfg["G"], cfg["d"], cfg["dv"]
    C, K = cfg["C"], cfg["K"]
    Hq = Hkv * G
    q, k = f"tensor<?x{Hq}x?x{d}x{t}>", f"tensor<?x{Hkv}x?x{d}x{t}>"
    v, s = f"tensor<?x{Hkv}x?x{dv}x{t}>", f"tensor<?x{Hkv}x?x{K}xi32>"
    o, lse = f"tensor<?x{Hq}x?x{dv}x{t}>", f"tensor<?x{Hq}x?xf32>"
    dq, dk = f"tensor<?x{Hq}x?x{d}xf32>", f"tensor<?x{Hkv}x?x{d}xf32>"
    dvt = f"tensor<?x{Hkv}x?x{dv}xf32>"
    qt, kt = f"tensor<?x?x{Hq}x{d}x{t}>", f"tensor<?x?x{Hkv}x{d}x{t}>"
    vt, st = f"tensor<?x?x{Hkv}x{dv}x{t}>", f"tensor<?x?x{Hkv}x{K}xi32>"
    ot, lt = f"tensor<?x?x{Hq}x{dv}x{t}>", f"tensor<?x?x{Hq}xf32>"
    dqt, dkt = f"tensor<?x?x{Hq}x{d}xf32>", f"tensor<?x?x{Hkv}x{d}xf32>"
    dvtt = f"tensor<?x?x{Hkv}x{dv}xf32>"
    attend = (f"pisa.sparse_attention %q, %k, %v, %s, %off block_size = {C}\n"
              f"      : {q}, {k}, {v}, {s} -> {o}, {lse}")
    text = f"""func.func @attend(%q: {q}, %k: {k}, %v: {v}, %s: {s}, %off: index) -> {o} {{
  %o, %l = {attend}
  return %o : {o}
}}
func.func @attend_lse(%q: {q}, %k: {k}, %v: {v}, %s: {s}, %off: index) -> {lse} {{
  %o, %l = {attend}
  return %l : {lse}
}}
"""
    for suffix, tm, types in (("", "", (q, k, v, s, o, lse, dq, dk, dvt)),
                              ("_tm", " {token_major}", (qt, kt, vt, st, ot, lt, dqt, dkt,
                                                         dvtt))):
        tq, tk, tv, ts, to, tl, tdq, tdk, tdv = types
        grad = (f"pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) "
                f"block_size = {C}{tm}\n      : {tq}, {tk}, {tv}, {ts}, {to}, {tl}, {to} "
                f"-> {tdq}, {tdk}, {tdv}")
        args = (f"%q: {tq}, %k: {tk}, %v: {tv}, %s: {ts}, %off: index, %o: {to}, "
                f"%l: {tl}, %do: {to}")
        for name, index, rtype in (("dq", 0, tdq), ("dk", 1, tdk), ("dv", 2, tdv)):
            text += f"""func.func @grad{suffix}_{name}({args}) -> {rtype} {{
  %g:3 = {grad}
  return %g#{index} : {rtype}
}}
"""
        # The whole backward in one call (what a training step runs).
        text += f"""func.func @grad{suffix}_all({args}) -> ({tdq}, {tdk}, {tdv}) {{
  %g:3 = {grad}
  return %g#0, %g#1, %g#2 : {tdq}, {tdk}, {tdv}
}}
"""
    # Packed varlen: [T, H, X], lse [Tq, Hq], cu_seqlens [B + 1].
    qp, kp = f"tensor<?x{Hq}x{d}x{t}>", f"tensor<?x{Hkv}x{d}x{t}>"
    vp, sp = f"tensor<?x{Hkv}x{dv}x{t}>", f"tensor<?x{Hkv}x{K}xi32>"
    op, lp, cu = f"tensor<?x{Hq}x{dv}x{t}>", f"tensor<?x{Hq}xf32>", "tensor<?xi32>"
    dqp, dkp = f"tensor<?x{Hq}x{d}xf32>", f"tensor<?x{Hkv}x{d}xf32>"
    dvp = f"tensor<?x{Hkv}x{dv}xf32>"
    text += f"""func.func @attend_varlen(%q: {qp}, %k: {kp}, %v: {vp}, %s: {sp}, %cuq: {cu},
    %cuk: {cu}) -> ({op}, {lp}) {{
  %o, %l = pisa.sparse_attention_varlen %q, %k, %v, %s cu_seqlens(%cuq, %cuk)
      block_size = {C} : {qp}, {kp}, {vp}, {sp}, {cu}, {cu} -> {op}, {lp}
  return %o, %l : {op}, {lp}
}}
func.func @grad_varlen(%q: {qp}, %k: {kp}, %v: {vp}, %s: {sp}, %cuq: {cu}, %cuk: {cu},
    %o: {op}, %l: {lp}, %do: {op}) -> ({dqp}, {dkp}, {dvp}) {{
  %dq, %dk, %dv = pisa.sparse_attention_grad_varlen %q, %k, %v, %s cu_seqlens(%cuq, %cuk)
      out(%o, %l) grad(%do) block_size = {C}
      : {qp}, {kp}, {vp}, {sp}, {cu}, {cu}, {op}, {lp}, {op} -> {dqp}, {dkp}, {dvp}
  return %dq, %dk, %dv : {dqp}, {dkp}, {dvp}
}}
"""
    return text


def build(args):
    flags = []
    if args.union_queries:
        flags = ["--attention-union-queries", str(args.union_queries)]
    flags += sweep.kernel_config_flags(args)
    if args.dq_from_scores:
        flags.append("--grad-dq-from-scores")
    draw = draw_warpgroup_config if args.space == "warpgroup" else draw_config
    extra = [dict(PAPER)] if args.paper else []
    extra += [dict(PAPER, name=f"k{k}", K=k) for k in args.paper_k]
    built, rejected = sweep.build_drawn(args, draw, program, "attention_grad.json", extra,
                                        flags)
    if args.dq_from_scores:
        # check's packed-against-alone rule reads the mark.
        path = os.path.join(args.out, "attention_grad.json")
        with open(path) as f:
            manifest = json.load(f)
        for case in manifest["cases"]:
            case["dq_from_scores"] = True
        with open(path, "w") as f:
            json.dump(manifest, f, indent=1)
    problems = [c["name"] for c in built if "expect_error" in c]
    problems += [f"{c['name']} ({c['error']})" for c in rejected
                 if c.get("expect_error", "\0") not in c["error"]]
    if problems:
        print("wrongly built or rejected: " + ", ".join(problems))
        return 1
    return 0


# -------------------------------------------------------------- reference

def attended_mask(selection, offset, N, C):
    """[B, Hkv, Nq, N] bool: the keys each query attends (docs/semantics.md,
    section 6: the entries used, the causal mask)."""
    import torch

    B, Hkv, Nq, _ = selection.shape
    nb = -(-N // C)
    used = check_attention.used_blocks(selection.long(), nb)
    blocks = torch.zeros(B, Hkv, Nq, nb + 1, dtype=torch.bool, device=selection.device)
    blocks.scatter_(-1, torch.where(used, selection.long(), nb), used)
    mask = blocks[..., :nb].repeat_interleave(C, -1)[..., :N]
    key = torch.arange(N, device=selection.device)
    t = offset + torch.arange(Nq, device=selection.device)
    return mask & (key[None, None, None, :] <= t[None, None, :, None])


def autograd_grads(q, k, v, mask, do, scale, dtype):
    """(dq, dk, dv) by autograd through dense masked attention computed in
    `dtype` (float64: the reference; the inputs' dtype: the same math in
    PyTorch at low precision)."""
    import torch

    G = q.shape[1] // k.shape[1]
    qd, kd, vd = (x.detach().to(dtype).requires_grad_() for x in (q, k, v))
    m = mask.repeat_interleave(G, 1)
    s = (qd @ kd.repeat_interleave(G, 1).transpose(-1, -2)) * scale
    s = s.masked_fill(~m, -math.inf)
    p = torch.softmax(s, -1)
    p = torch.where(m.any(-1, keepdim=True), p, torch.zeros_like(p))
    o = p @ vd.repeat_interleave(G, 1)
    o.backward(do.to(dtype))
    return qd.grad, kd.grad, vd.grad


def within_rule(err, base):
    """The pass rule (FlashAttention's test rule): a finite relative error
    `err` at most twice `base` (the same math in PyTorch in the input's
    dtype) plus 1e-3."""
    return math.isfinite(err) and err <= 2 * base + 1e-3


def rel_error(x, ref):
    import torch

    den = float(torch.linalg.vector_norm(ref.double()))
    num = float(torch.linalg.vector_norm(x.double() - ref.double()))
    return num / den if den > 0 else num


def check_varlen(lib, cfg, rng, gen, first):
    """grad_varlen on a packed batch (check_attention.draw_packed_batch,
    query counts cut to keep the dense reference small) after attend_varlen:
    each sequence's dq, dk and dv within the pass rule of autograd on it
    alone (key rows of sequences without queries exactly 0), dq bitwise that
    of grad_tm_dq on the sequence alone, a second run bitwise the same, and
    with cu_seqlens_k[0] = 1 every gradient NaN. Returns (ok, worst errors,
    notes)."""
    import torch

    Hkv, G, d, dv, C, K = (cfg[x] for x in ("Hkv", "G", "d", "dv", "C", "K"))
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[cfg["dtype"]]
    scale = 1.0 / math.sqrt(d)
    lengths, queries = check_attention.draw_packed_batch(rng, C, first)
    for b, n in enumerate(lengths):
        while Hkv * G * queries[b] * n > 20_000_000 and queries[b] > 1:
            queries[b] //= 2
    Tq, Tk = sum(queries), sum(lengths)
    q = torch.randn(Tq, Hkv * G, d, generator=gen).to(dt).cuda()
    k = torch.randn(Tk, Hkv, d, generator=gen).to(dt).cuda()
    v = torch.randn(Tk, Hkv, dv, generator=gen).to(dt).cuda()
    do = torch.randn(Tq, Hkv * G, dv, generator=gen).to(dt).cuda()
    parts = [check_attention.crafted_selection(gen, 1, Hkv, nq, K, n, C, n - nq)[0]
             .transpose(0, 1) for n, nq in zip(lengths, queries) if nq]
    sel = (torch.cat(parts) if parts else torch.zeros(0, Hkv, K, dtype=torch.int32)).cuda()
    cuq, cuk = check_attention.cu_of(queries).cuda(), check_attention.cu_of(lengths).cuda()
    o, lse = lib("attend_varlen", q, k, v, sel, cuq, cuk)
    got = lib("grad_varlen", q, k, v, sel, cuq, cuk, o, lse, do)
    again = lib("grad_varlen", q, k, v, sel, cuq, cuk, o, lse, do)
    torch.cuda.synchronize()
    notes, ok, worst = [], True, [0.0, 0.0, 0.0]
    where = f"varlen N={lengths} Nq={queries}"
    if not all(torch.equal(x, y) for x, y in zip(got, again)):
        ok = False
        notes.append(f"{where}: two runs differ")
    for b, (n, nq) in enumerate(zip(lengths, queries)):
        q0, k0 = int(cuq[b]), int(cuk[b])
        if not nq:
            if not (bool((got[1][k0:k0 + n] == 0).all()) and bool((got[2][k0:k0 + n] == 0).all())):
                ok = False
                notes.append(f"{where}: sequence {b} has no query but nonzero dk or dv")
            continue
        head = lambda x: x.transpose(0, 1)[None]  # noqa: E731 [T, H, X] -> [1, H, T, X]
        qb, kb, vb, dob = head(q[q0:q0 + nq]), head(k[k0:k0 + n]), head(v[k0:k0 + n]), \
            head(do[q0:q0 + nq])
        sb = head(sel[q0:q0 + nq])
        mask = attended_mask(sb, n - nq, n, C)
        ref = autograd_grads(qb, kb, vb, mask, dob, scale, torch.float64)
        low = autograd_grads(qb, kb, vb, mask, dob, scale, dt)
        mine = (head(got[0][q0:q0 + nq]), head(got[1][k0:k0 + n]), head(got[2][k0:k0 + n]))
        for i, name in enumerate(("dq", "dk", "dv")):
            err, base = rel_error(mine[i], ref[i]), rel_error(low[i], ref[i])
            worst[i] = max(worst[i], err)
            if not within_rule(err, base):
                ok = False
                notes.append(f"{name} {where} sequence {b}: error {err:.2e} above "
                             f"2 x {base:.2e} + 1e-3")
        tm = [x[None] for x in (q[q0:q0 + nq], k[k0:k0 + n], v[k0:k0 + n], sel[q0:q0 + nq])]
        tm += [n - nq] + [x[None] for x in (o[q0:q0 + nq], lse[q0:q0 + nq], do[q0:q0 + nq])]
        alone = lib("grad_tm_dq", *tm)[0]
        if cfg.get("dq_from_scores"):
            # The batch's dq comes from the key kernel's dS tiles, the packed
            # batch's from the dq pass: the same sums rounded apart, which a
            # relative difference cannot judge where dq is rounding alone
            # (one key: dP = D), so it meets the float64 rule on its own.
            err = rel_error(head(alone), ref[0])
            base = rel_error(low[0], ref[0])
            if not within_rule(err, base):
                ok = False
                notes.append(f"{where}: sequence {b}'s grad_tm_dq alone: error {err:.2e} "
                             f"above 2 x {base:.2e} + 1e-3")
        elif not torch.equal(alone, got[0][q0:q0 + nq]):
            ok = False
            notes.append(f"{where}: sequence {b}'s dq differs from grad_tm_dq on it alone")
    if Tk:
        broken = cuk.clone()
        broken[0] = 1
        bad = lib("grad_varlen", q, k, v, sel, cuq, broken, o, lse, do)
        torch.cuda.synchronize()
        if not all(bool(torch.isnan(x).all()) for x in bad):
            ok = False
            notes.append(f"{where}: cu_seqlens_k[0] = 1 did not give NaN everywhere")
    return ok, worst, notes


# Queries past which key block 0 takes more segments than the others
# (kMaxKeySegments x kMinSegmentWords bit words of 32 queries,
# AttentionGrad.h).
LONG_QUERIES = 16 * 8 * 32


def grad_args(lib, gen, dt, sizes, N, nq, off):
    """The backward entries' operands on fresh inputs from `gen`: Gaussian
    q, k, v and dO of type `dt` on the GPU (`sizes` = B, Hkv, G, d, dv, C,
    K), check_attention's crafted selection, and the library's forward o
    and lse on them: (q, k, v, selection, offset, o, lse, dO)."""
    import torch

    B, Hkv, G, d, dv, C, K = sizes
    q = torch.randn(B, Hkv * G, nq, d, generator=gen).to(dt).cuda()
    k = torch.randn(B, Hkv, N, d, generator=gen).to(dt).cuda()
    v = torch.randn(B, Hkv, N, dv, generator=gen).to(dt).cuda()
    do = torch.randn(B, Hkv * G, nq, dv, generator=gen).to(dt).cuda()
    sel = check_attention.crafted_selection(gen, B, Hkv, nq, K, N, C, off).cuda()
    o = lib("attend", q, k, v, sel, off)
    lse = lib("attend_lse", q, k, v, sel, off)
    return (q, k, v, sel, off, o, lse, do)


def check_case(lib, cfg, rng, shapes):
    import torch

    Hkv, G, d, dv, C, K = (cfg[x] for x in ("Hkv", "G", "d", "dv", "C", "K"))
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[cfg["dtype"]]
    scale = 1.0 / math.sqrt(d)
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    notes, ok, worst = [], True, [0.0, 0.0, 0.0]
    drawn = []
    for _ in range(shapes):
        B, N, nq, off, mode = check_attention.draw_shape(rng, cfg)
        # The dense reference keeps Hq x Nq x N scores: keep it small.
        while Hkv * G * nq * N > 40_000_000 and nq > 1:
            nq = max(1, nq // 2)
            off = N - nq if mode == "prefill" else min(off, N - nq)
        drawn.append((B, N, nq, off, mode))
    # A prefill of more than LONG_QUERIES queries, where the key kernel
    # splits key block 0 into more segments than the others, wherever the
    # dense reference stays within 80M scores.
    long_n = LONG_QUERIES + rng.randint(32, 400)
    if Hkv * G * long_n * long_n <= 80_000_000:
        drawn.append((1, long_n, long_n, 0, "long prefill"))
    for B, N, nq, off, mode in drawn:
        args = grad_args(lib, gen, dt, (B, Hkv, G, d, dv, C, K), N, nq, off)
        q, k, v, sel, off, o, lse, do = args
        got = [lib(f"grad_{x}", *args) for x in ("dq", "dk", "dv")]
        again = [lib(f"grad_{x}", *args) for x in ("dq", "dk", "dv")]
        tm = [x.transpose(1, 2).contiguous() for x in (q, k, v, sel)]
        tm += [off, o.transpose(1, 2).contiguous(), lse.transpose(1, 2).contiguous(),
               do.transpose(1, 2).contiguous()]
        got_tm = [lib(f"grad_tm_{x}", *tm).transpose(1, 2) for x in ("dq", "dk", "dv")]
        torch.cuda.synchronize()
        mask = attended_mask(sel, off, N, C)
        ref = autograd_grads(q, k, v, mask, do, scale, torch.float64)
        low = autograd_grads(q, k, v, mask, do, scale, dt)
        shape = f"B={B} N={N} Nq={nq} off={off} ({mode})"
        for i, name in enumerate(("dq", "dk", "dv")):
            err, base = rel_error(got[i], ref[i]), rel_error(low[i], ref[i])
            worst[i] = max(worst[i], err)
            if not within_rule(err, base):
                ok = False
                notes.append(f"{name} {shape}: error {err:.2e} above 2 x {base:.2e} + 1e-3")
            if not torch.equal(got[i], again[i]):
                ok = False
                notes.append(f"{name} {shape}: two runs differ")
            if not torch.equal(got[i], got_tm[i]):
                ok = False
                notes.append(f"{name} {shape}: token-major differs from head-major")
    for j in range(shapes):
        good, errors, why = check_varlen(lib, cfg, rng, gen, first=j == 0)
        worst = [max(x, y) for x, y in zip(worst, errors)]
        ok = ok and good
        notes += why
    desc = (f"{cfg['name']} Hkv={Hkv} G={G} d={d} dv={dv} C={C} K={K} {cfg['dtype']}: "
            f"{shapes} shapes, relative error dq {worst[0]:.1e} dk {worst[1]:.1e} "
            f"dv {worst[2]:.1e}")
    return ok, desc + ("" if ok else ": " + "; ".join(notes[:3]))


def check(args):
    import torch
    from pisa import aot

    with open(os.path.join(args.dir, "attention_grad.json")) as f:
        data = json.load(f)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"attention grad check: input seed {seed}, {len(data['cases'])} libraries",
          flush=True)
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
    print(f"attention grad check: {passed} passed, {failed} failed")
    return 0 if failed == 0 and passed else 1


# ------------------------------------------------------------------ bench

PAPER = {"name": "paper", "Hkv": 1, "G": 16, "d": 128, "dv": 128, "C": 64, "K": 8,
         "dtype": "bf16"}


def bench_inputs(n, free_first=False):
    """The bench's inputs at the paper setting, fresh on the GPU: q and dO
    [1, 16, n, 128], k and v [1, 1, n, 128] (bf16), and a hier_topk-like
    selection [1, 1, n, 8] (block 0 unless `free_first`, the query's own
    block and random earlier ones, ascending)."""
    import torch

    q = torch.randn(1, 16, n, 128, device="cuda").to(torch.bfloat16)
    k = torch.randn(1, 1, n, 128, device="cuda").to(torch.bfloat16)
    v = torch.randn(1, 1, n, 128, device="cuda").to(torch.bfloat16)
    do = torch.randn(1, 16, n, 128, device="cuda").to(torch.bfloat16)
    nb = -(-n // 64)
    own = torch.arange(n, device="cuda") // 64
    pick = (torch.rand(n, 8, device="cuda") * (own[:, None] + 1)).long()
    if not free_first:
        pick[:, 0] = 0
    pick[:, 1] = own
    sel = torch.sort(pick, -1)[0].clamp(max=nb - 1).to(torch.int32)[None, None]
    return q, k, v, do, sel


def bench_packed(args, lib):
    """--packed B: B sequences of T / B tokens each (prefill), batched
    ([B, H, T / B, d]: attend, grad_all) against packed ([T, H, d] with
    cu_seqlens: attend_varlen, grad_varlen) on the same data and selections
    (the bench's recipe per sequence); medians of CUDA-event times after a
    warm-up, fresh inputs before each sample."""
    import torch

    B = args.packed
    print(f"{args.library}, {B} sequences per batch:")
    print("| T | batched forward ms | packed forward ms | batched backward ms "
          "| packed backward ms |")
    print("|---|---|---|---|---|")
    for total in args.lengths:
        n = total // B
        box = {}
        ws = torch.empty(5 << 30, dtype=torch.uint8, device="cuda")
        cu = torch.arange(0, B + 1, device="cuda", dtype=torch.int32) * n

        def fresh():
            for name, heads in (("q", 16), ("k", 1), ("v", 1), ("do", 16)):
                box[name] = torch.randn(B, heads, n, 128, device="cuda").to(torch.bfloat16)
            nb = -(-n // 64)
            own = torch.arange(n, device="cuda") // 64
            pick = (torch.rand(B, n, 8, device="cuda") * (own[:, None] + 1)).long()
            pick[..., 0], pick[..., 1] = 0, own
            box["sel"] = torch.sort(pick, -1)[0].clamp(max=nb - 1).to(torch.int32)[:, None]
            box["o"] = lib("attend", box["q"], box["k"], box["v"], box["sel"], 0, workspace=ws)
            box["lse"] = lib("attend_lse", box["q"], box["k"], box["v"], box["sel"], 0,
                             workspace=ws)
            # The same data packed: [B, H, n, X] -> [B n, H, X].
            for name in ("q", "k", "v", "do", "sel", "o"):
                box["p" + name] = box[name].transpose(1, 2).reshape(B * n, *box[name].shape[1::2])
            box["plse"] = box["lse"].transpose(1, 2).reshape(B * n, 16)

        fresh()
        times = [
            check_attention.timed(lambda: lib("attend", box["q"], box["k"], box["v"],
                                              box["sel"], 0, workspace=ws), args.samples, fresh),
            check_attention.timed(lambda: lib("attend_varlen", box["pq"], box["pk"], box["pv"],
                                              box["psel"], cu, cu, workspace=ws),
                                  args.samples, fresh),
            check_attention.timed(lambda: lib("grad_all", box["q"], box["k"], box["v"],
                                              box["sel"], 0, box["o"], box["lse"], box["do"],
                                              workspace=ws), args.samples, fresh),
            check_attention.timed(lambda: lib("grad_varlen", box["pq"], box["pk"], box["pv"],
                                              box["psel"], cu, cu, box["po"], box["plse"],
                                              box["pdo"], workspace=ws), args.samples, fresh),
        ]
        print(f"| {total} | " + " | ".join(f"{t:.3f}" for t in times) + " |", flush=True)
        torch.cuda.empty_cache()
    return 0


def bench(args):
    """Paper setting (B = 1, Hkv = 1, G = 16, d = dv = 128, C = 64, K = 8,
    bf16) over hier_topk-like selections (each query's own block, block 0
    and random earlier blocks, ascending): the forward (`attend`), the
    whole backward (`grad_all`: dq, dk and dv), the kernels dq needs alone
    (`grad_dq`: the dq pass; with dq from the key kernel's dS tiles, the
    whole backward but dk's and dv's last writes), and
    dense causal attention's backward (PyTorch SDPA, flash
    backend) on the same q, k, v, in one run; medians of CUDA-event times
    after a warm-up, fresh inputs before each sample. With --token-major,
    the backward's token-major entries (`grad_tm_all`, `grad_tm_dq`) on
    token-major copies of the same inputs. With --fla DIR (a
    directory holding fla-org's `fla` package source), fla's
    parallel_nsa_fwd and parallel_nsa_bwd on the same inputs and selection
    (token-major copies; fla attends every entry of a row, duplicates
    included, where the contract attends each block once)."""
    import torch
    import torch.nn.functional as F
    from pisa import aot

    fla = None
    if args.fla:
        sys.path.insert(0, args.fla)
        from fla.ops.nsa import parallel as fla
    lib = aot.Library(os.path.join(args.dir, args.library))
    if args.packed:
        return bench_packed(args, lib)
    print(f"{args.library}" + (" (the backward token-major)" if args.token_major else "") + ":")
    print("| N | forward ms | backward ms | of which dq pass ms | backward / forward "
          "| dense SDPA backward ms |" + (" fla forward ms | fla backward ms |" if fla else ""))
    print("|---|---|---|---|---|---|" + ("---|---|" if fla else ""))
    for n in args.lengths:
        box = {}
        # The backward's scratch grows with N (the query lists, the
        # segments' sums, D; with dq from dS tiles, Nq K G C of them); an
        # entry that returns fewer results keeps the others there too.
        q, k, v, do, sel = bench_inputs(n)
        lse = q[..., 0].float()
        sizes = [lib.workspace_size(f, q, k, v, sel) for f in ("attend", "attend_lse")]
        sizes += [lib.workspace_size(f"grad_{x}", q, k, v, sel, do, lse, do)
                  for x in ("all", "dq")]
        ws = torch.empty(max(sizes) + 256, dtype=torch.uint8, device="cuda")
        del lse
        del q, k, v, do, sel

        def fresh():
            box["q"], box["k"], box["v"], box["do"], box["sel"] = bench_inputs(
                n, args.free_first)
            box["o"] = lib("attend", box["q"], box["k"], box["v"], box["sel"], 0, workspace=ws)
            box["lse"] = lib("attend_lse", box["q"], box["k"], box["v"], box["sel"], 0,
                             workspace=ws)
            if args.token_major:
                for x in ("q", "k", "v", "sel", "o", "lse", "do"):
                    box["t" + x] = box[x].transpose(1, 2).contiguous()

        def backward(result):
            if args.token_major:
                return lambda: lib(f"grad_tm_{result}", box["tq"], box["tk"], box["tv"],
                                   box["tsel"], 0, box["to"], box["tlse"], box["tdo"],
                                   workspace=ws)
            return lambda: lib(f"grad_{result}", box["q"], box["k"], box["v"], box["sel"], 0,
                               box["o"], box["lse"], box["do"], workspace=ws)

        fresh()
        fwd = check_attention.timed(
            lambda: lib("attend", box["q"], box["k"], box["v"], box["sel"], 0, workspace=ws),
            args.samples, fresh)
        bwd = check_attention.timed(backward("all"), args.samples, fresh)
        dq_pass = check_attention.timed(backward("dq"), args.samples, fresh)
        dense = float("nan")
        if n <= args.max_dense:
            from torch.nn.attention import SDPBackend, sdpa_kernel

            def sdpa_backward():
                q, k, v = (box[x].detach().requires_grad_() for x in ("q", "k", "v"))
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    o = F.scaled_dot_product_attention(
                        q, k.expand(1, 16, n, 128), v.expand(1, 16, n, 128), is_causal=True)
                box["dense_o"], box["dense_args"] = o, (q, k, v)

            def timed_backward():
                box["dense_o"].backward(box["do"])

            def fresh_dense():
                fresh()
                sdpa_backward()
            dense = check_attention.timed(timed_backward, max(3, args.samples // 3),
                                          fresh_dense)
        peer = ""
        if fla:
            scale = 128 ** -0.5

            def token_major():
                fresh()
                box["t"] = [box[x].transpose(1, 2).contiguous() for x in ("q", "k", "v", "do")]
                box["idx"] = box["sel"].transpose(1, 2).contiguous().long()
                box["fla_o"], box["fla_lse"] = fla.parallel_nsa_fwd(
                    *box["t"][:3], box["idx"], 8, 64, scale)[:2]

            token_major()
            fla_fwd = check_attention.timed(
                lambda: fla.parallel_nsa_fwd(*box["t"][:3], box["idx"], 8, 64, scale),
                args.samples, token_major)
            fla_bwd = check_attention.timed(
                lambda: fla.parallel_nsa_bwd(*box["t"][:3], box["fla_o"], box["fla_lse"],
                                             box["t"][3], box["idx"], 8, 64, scale),
                args.samples, token_major)
            peer = f" {fla_fwd:.3f} | {fla_bwd:.3f} |"
        print(f"| {n} | {fwd:.3f} | {bwd:.3f} | {dq_pass:.3f} | {bwd / fwd:.2f} "
              f"| {dense:.2f} |{peer}", flush=True)
    if args.selections:
        recorded_selections(args, lib)
    return 0


def recorded_selections(args, lib):
    """The same times over recorded selections (an .npz of [T, 1, K] int32
    rows, as `retrieval_lm.py --dump-selections` writes), fresh q, k, v and
    dO before each sample: how much the query tiles gain where consecutive
    queries share their blocks."""
    import numpy as np
    import torch

    recorded = np.load(args.selections)
    ws = torch.empty(5 << 30, dtype=torch.uint8, device="cuda")
    print(f"\n{os.path.basename(args.selections)}:")
    print("| selection | forward ms | backward ms | of which dq pass ms |")
    print("|---|---|---|---|")
    for name in recorded.files:
        rows = torch.from_numpy(recorded[name]).cuda()
        n = rows.shape[0]
        sel = rows.permute(1, 0, 2).contiguous()[None]
        box = {}

        def fresh():
            box["q"] = torch.randn(1, 16, n, 128, device="cuda").to(torch.bfloat16)
            box["k"] = torch.randn(1, 1, n, 128, device="cuda").to(torch.bfloat16)
            box["v"] = torch.randn(1, 1, n, 128, device="cuda").to(torch.bfloat16)
            box["do"] = torch.randn(1, 16, n, 128, device="cuda").to(torch.bfloat16)
            box["o"] = lib("attend", box["q"], box["k"], box["v"], sel, 0, workspace=ws)
            box["lse"] = lib("attend_lse", box["q"], box["k"], box["v"], sel, 0, workspace=ws)

        def call(entry):
            return lambda: lib(entry, box["q"], box["k"], box["v"], sel, 0, box["o"],
                               box["lse"], box["do"], workspace=ws)

        fwd = check_attention.timed(
            lambda: lib("attend", box["q"], box["k"], box["v"], sel, 0, workspace=ws),
            args.samples, fresh)
        bwd = check_attention.timed(call("grad_all"), args.samples, fresh)
        dq_pass = check_attention.timed(call("grad_dq"), args.samples, fresh)
        print(f"| {name} | {fwd:.3f} | {bwd:.3f} | {dq_pass:.3f} |", flush=True)


def compare(args):
    """Two builds of the paper library on the same inputs at large N (the
    bench's selections, fresh each length): dq must be bitwise the same (the
    query kernel reads nothing the key half writes), dk and dv agree within
    a relative Frobenius difference of --tolerance (a change that only
    reorders a block's f32 sums), the new build run twice gives bitwise the
    same dk and dv, and each build's workspace bytes are printed."""
    import torch
    from pisa import aot

    old = aot.Library(os.path.join(args.old, args.library))
    new = aot.Library(os.path.join(args.new, args.library))
    failures = 0
    for n in args.lengths:
        torch.manual_seed(n)
        q, k, v, do, sel = bench_inputs(n)
        o = new("attend", q, k, v, sel, 0)
        lse = new("attend_lse", q, k, v, sel, 0)
        inputs = (q, k, v, sel, 0, o, lse, do)
        sizes = [lib.workspace_size("grad_dk", q, k, v, sel, o, lse, do)
                 for lib in (old, new)]
        got = {}
        for tag, lib in (("old", old), ("new", new)):
            got[tag] = [lib(f"grad_{x}", *inputs) for x in ("dq", "dk", "dv")]
            torch.cuda.synchronize()
        again = [new(f"grad_{x}", *inputs) for x in ("dk", "dv")]
        same_dq = torch.equal(got["old"][0], got["new"][0])
        diffs = [float((a.double() - b.double()).norm() / b.double().norm())
                 for a, b in zip(got["new"], got["old"])]
        repeat = all(torch.equal(a, b) for a, b in zip(again, got["new"][1:]))
        finite = all(bool(torch.isfinite(x).all()) for x in got["new"])
        ok = same_dq and repeat and finite and max(diffs[1:]) <= args.tolerance
        failures += not ok
        print(f"N={n}: workspace old {sizes[0] / 2**20:.1f} MiB new {sizes[1] / 2**20:.1f} MiB; "
              f"dq bitwise {same_dq} (relative difference {diffs[0]:.2e}); dk, dv relative "
              f"difference {diffs[1]:.2e}, {diffs[2]:.2e}; new run twice bitwise {repeat}; finite {finite} -> "
              f"{'ok' if ok else 'FAIL'}", flush=True)
        del got, again, q, k, v, do, o, lse
        torch.cuda.empty_cache()
    print("compare:", "all agree" if not failures else f"{failures} length(s) FAIL")
    return 1 if failures else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("out")
    b.add_argument("--seed", type=int, default=1)
    b.add_argument("--count", type=int, default=12)
    b.add_argument("--paper", action="store_true", help="add the paper setting")
    b.add_argument("--paper-k", type=int, nargs="*", default=[], metavar="K",
                   help="add the paper setting with K selection entries a row "
                        "(case kK): lists longer than one warp's 32 entries")
    b.add_argument("--space", choices=("all", "warpgroup"), default="all",
                   help="draw over every supported shape, or only those the "
                        "warpgroup (wgmma) key kernel takes")
    sweep.add_kernel_config_option(b)
    b.add_argument("--union-queries", type=int, default=0,
                   help="pisa-compile --attention-union-queries: query tiles of this "
                        "many queries (the dq pass's instead of a warp per query)")
    b.add_argument("--dq-from-scores", action="store_true",
                   help="pisa-compile --grad-dq-from-scores: dq from the key kernel's dS "
                        "tiles instead of a dq pass")
    b.add_argument("--jobs", type=int, default=2)
    b.add_argument("--pisa-compile", default=os.path.join("build", "bin", "pisa-compile"))
    c = sub.add_parser("check")
    c.add_argument("dir")
    c.add_argument("--seed", type=int)
    c.add_argument("--shapes", type=int, default=3)
    c.add_argument("--budget", type=float, default=480)
    c.add_argument("--only", nargs="*")
    r = sub.add_parser("bench")
    r.add_argument("dir")
    r.add_argument("--library", default="libpaper.so")
    r.add_argument("--lengths", type=int, nargs="*", default=[4096, 16384, 65536, 262144])
    r.add_argument("--samples", type=int, default=10)
    r.add_argument("--max-dense", type=int, default=32768)
    r.add_argument("--fla", help="a directory holding fla-org's fla package source")
    r.add_argument("--free-first", action="store_true",
                   help="draw block 0 like the other blocks instead of forcing it in every "
                        "row (PISA's selection forces it): how much the key kernel's split "
                        "of block 0 matters")
    r.add_argument("--token-major", action="store_true",
                   help="time the backward's token-major entries (grad_tm_dk, grad_tm_dq: "
                        "[B, N, H, d] operands, as fla and the torch module take them); the "
                        "forward stays head-major")
    r.add_argument("--packed", type=int, metavar="B",
                   help="time B sequences of T / B tokens batched against packed "
                        "(cu_seqlens) instead")
    r.add_argument("--selections", metavar="FILE.npz",
                   help="also time over recorded selections ([T, 1, K] int32 each)")
    m = sub.add_parser("compare")
    m.add_argument("old")
    m.add_argument("new")
    m.add_argument("--library", default="libpaper.so")
    m.add_argument("--lengths", type=int, nargs="*", default=[4096, 65536, 262144])
    m.add_argument("--tolerance", type=float, default=1e-5)
    args = ap.parse_args(argv)
    return {"build": build, "check": check, "bench": bench,
            "compare": compare}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
