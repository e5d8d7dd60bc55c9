"""The differentiable torch op of a sparse prefill library on the GPU:
`torch.ops.pisa.F(q, k, v, offset)` then `o.backward(dO)`, against float64
autograd on the same selection, over configurations drawn from a seed.

  python3 -m device_checks.check_training build DIR --seed S --count N  # here
                                       [--dq-from-scores] [--kernel-config OP:FIELD=VALUE]...
  python3 -m device_checks.check_training check DIR [--shapes 2]        # GPU
  python3 -m device_checks.check_training bench DIR                     # GPU, timing
  python3 -m device_checks.check_training calls DIR --only NAME...      # GPU, sanitizers

Each library is one program like docs/examples/sparse-prefill.mlir (the
pyramid, hier_topk and sparse attention; dynamic B, N and Nq; head- or
token-major), or attention alone over a selection argument (crafted rows:
-1 padding, duplicates, unsorted, out of range, empty), compiled by
pisa-compile, which adds its training entry points
(F_forward, F_backward). `check` loads it with `pisa.torch.load_library` and,
per drawn shape (N not a multiple of C, chunks with an offset):
  - q.grad, k.grad, v.grad of `torch.ops.pisa.F` against autograd through a
    dense masked attention in float64 on the selection F_forward returned:
    error at most 2 x (the same math in PyTorch in bf16/f16) + 1e-3;
  - the same gradients, bitwise, under torch.compile(fullgraph=True), through
    torch.utils.checkpoint, and from a CUDA graph (make_graphed_callables)
    replayed on new inputs against eager on those inputs;
  - `pisa.torch.PisaAttention` on [B, T, H, d] tensors equal to the op
    (programs that compute their selection);
  - torch.library.opcheck on F_forward, F_backward and F (first shape).
A configuration drawn `packed` is the varlen program instead (packed [T, H,
d] tensors and cu_seqlens: pisa.sparse_attention_varlen), checked per
sequence by check_packed_case.
"""

import argparse
import json
import math
import os
import random
import sys
import time

from device_checks import check_attention, check_attention_grad, sweep


def draw_config(rng, index):
    G = rng.choice((1, 2, 4, 8, 16))
    return {"name": f"t{index:02d}", "Hkv": rng.choice((1, 2)), "G": G,
            "d": rng.choice((64, 128)), "C": rng.choice((16, 32, 64)),
            "K": rng.choice((4, 8)), "dtype": rng.choice(("bf16", "f16")),
            "token_major": rng.random() < 0.5, "given_selection": rng.random() < 0.3,
            "packed": rng.random() < 0.35}


def packed_program(cfg):
    """The varlen prefill (pyramid_build_varlen, hier_topk_varlen,
    sparse_attention_varlen) over packed [T, H, d] tensors, or with
    `given_selection` varlen attention over a selection argument."""
    t, Hkv, G, d, C, K = (cfg[x] for x in ("dtype", "Hkv", "G", "d", "C", "K"))
    q, k = f"tensor<?x{Hkv * G}x{d}x{t}>", f"tensor<?x{Hkv}x{d}x{t}>"
    s, lse, cu = f"tensor<?x{Hkv}x{K}xi32>", f"tensor<?x{Hkv * G}xf32>", "tensor<?xi32>"
    p = f"tensor<?x{Hkv}x{d}xf32>"
    attend = (f"%o, %l = pisa.sparse_attention_varlen %q, %k, %v, %s cu_seqlens(%cuq, %cuk) "
              f"block_size = {C}\n      : {q}, {k}, {k}, {s}, {cu}, {cu} -> {q}, {lse}")
    if cfg["given_selection"]:
        return f"""func.func @prefill(%q: {q}, %k: {k}, %v: {k}, %s: {s}, %cuq: {cu}, %cuk: {cu}) -> {q} {{
  {attend}
  return %o : {q}
}}
"""
    return f"""func.func @prefill(%q: {q}, %k: {k}, %v: {k}, %cuq: {cu}, %cuk: {cu}) -> {q} {{
  %p = pisa.pyramid_build_varlen %k cu_seqlens(%cuk) block_size = {C} branching = 2
      : {k}, {cu} -> {p}
  %s = pisa.hier_topk_varlen %q, %k, %p cu_seqlens(%cuq, %cuk) topk = {K} block_size = {C}
      branching = 2 : {q}, {k}, {p}, {cu}, {cu} -> {s}
  {attend}
  return %o : {q}
}}
"""


def program(cfg):
    """A sparse prefill over dynamic B, N and Nq (selection then attention),
    or with `given_selection` attention over a selection argument; with
    `packed`, packed_program."""
    if cfg.get("packed"):
        return packed_program(cfg)
    t, Hkv, G, d, C, K = (cfg[x] for x in ("dtype", "Hkv", "G", "d", "C", "K"))
    Hq = Hkv * G
    if cfg["token_major"]:
        q, k = f"tensor<?x?x{Hq}x{d}x{t}>", f"tensor<?x?x{Hkv}x{d}x{t}>"
        s, tm = f"tensor<?x?x{Hkv}x{K}xi32>", " {token_major}"
    else:
        q, k = f"tensor<?x{Hq}x?x{d}x{t}>", f"tensor<?x{Hkv}x?x{d}x{t}>"
        s, tm = f"tensor<?x{Hkv}x?x{K}xi32>", ""
    lse = f"tensor<?x?x{Hq}xf32>" if cfg["token_major"] else f"tensor<?x{Hq}x?xf32>"
    p = f"tensor<?x{Hkv}x?x{d}xf32>"
    if cfg["given_selection"]:
        return f"""func.func @prefill(%q: {q}, %k: {k}, %v: {k}, %s: {s}, %off: index) -> {q} {{
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = {C}{tm}
      : {q}, {k}, {k}, {s} -> {q}, {lse}
  return %o : {q}
}}
"""
    return f"""func.func @prefill(%q: {q}, %k: {k}, %v: {k}, %off: index) -> {q} {{
  %p = pisa.pyramid_build %k block_size = {C} branching = 2{tm} : {k} -> {p}
  %s = pisa.hier_topk %q, %k, %p, %off topk = {K} block_size = {C} branching = 2{tm}
      : {q}, {k}, {p} -> {s}
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = {C}{tm}
      : {q}, {k}, {k}, {s} -> {q}, {lse}
  return %o : {q}
}}
"""


PAPER = {"name": "paper", "Hkv": 1, "G": 16, "d": 128, "C": 64, "K": 8, "dtype": "bf16",
         "token_major": False, "given_selection": False}


def build(args):
    flags = ["--grad-dq-from-scores"] if args.dq_from_scores else []
    flags += sweep.kernel_config_flags(args)
    _, rejected = sweep.build_drawn(args, draw_config, program, "training.json",
                                    [dict(PAPER)] if args.paper else [], flags)
    for c in rejected:
        print(f"  {c['name']}: {c['error']}")
    return 0 if not rejected else 1


def head_major(x):
    return x.transpose(1, 2).contiguous()


def grads_of(fn, inputs, do):
    """(o, dq, dk, dv) of fn on fresh leaves equal to `inputs`."""
    leaves = [x.detach().clone().requires_grad_() for x in inputs]
    o = fn(*leaves)
    o.backward(do)
    return [o.detach()] + [x.grad for x in leaves]


def check_shape(op, forward, cfg, q, k, v, do, off, given):
    """Notes on what failed for one shape (empty: all held), and the worst
    relative errors. `given`: the selection argument, or None when the
    program computes it."""
    import torch

    tm, C, d = cfg["token_major"], cfg["C"], cfg["d"]
    extra = () if given is None else (given,)
    notes = []

    def call(a, b, c):
        return op(a, b, c, *extra, off)

    eager = grads_of(call, (q, k, v), do)
    sel = forward(q, k, v, *extra, off)[2] if given is None else given
    hm = [head_major(x) if tm else x for x in (q, k, v, do, sel)]
    N = hm[1].shape[2]
    mask = check_attention_grad.attended_mask(hm[4], off, N, C)
    ref = check_attention_grad.autograd_grads(*hm[:3], mask, hm[3], 1 / math.sqrt(d),
                                              torch.float64)
    low = check_attention_grad.autograd_grads(*hm[:3], mask, hm[3], 1 / math.sqrt(d),
                                              q.dtype)
    worst = []
    for name, got, r, lo in zip(("dq", "dk", "dv"), eager[1:], ref, low):
        got = head_major(got) if tm else got
        err = check_attention_grad.rel_error(got, r)
        base = check_attention_grad.rel_error(lo, r)
        worst.append(err)
        if not check_attention_grad.within_rule(err, base):
            notes.append(f"{name}: error {err:.2e} above 2 x {base:.2e} + 1e-3")

    torch._dynamo.reset()  # each shape and library compiles afresh
    compiled = torch.compile(call, fullgraph=True, dynamic=False)
    again = {
        "torch.compile": grads_of(compiled, (q, k, v), do),
        "checkpoint": grads_of(lambda a, b, c: torch.utils.checkpoint.checkpoint(
            call, a, b, c, use_reentrant=False), (q, k, v), do),
    }
    for what, got in again.items():
        if not all(torch.equal(x, y) for x, y in zip(got, eager)):
            notes.append(f"{what} differs from eager")

    # A CUDA graph of forward and backward, replayed on new inputs.
    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    graphed = torch.cuda.make_graphed_callables(call, tuple(leaves))
    fresh = [torch.randn_like(x) for x in (q, k, v)]
    want = grads_of(call, fresh, do)
    got = grads_of(graphed, fresh, do)
    if not all(torch.equal(x, y) for x, y in zip(got, want)):
        notes.append("the CUDA graph's replay differs from eager")
    return notes, worst


def check_packed_case(lib_path, cfg, rng, shapes, namespace):
    """The packed library's op F(q, k, v[, selection], cu_q, cu_k): per
    drawn packed batch, each sequence's gradients against float64 autograd
    on it alone (the pass rule of check_shape), equal under torch.compile,
    checkpointing and a replayed CUDA graph, PisaAttention (module(q, k, v,
    cu_seqlens, cu_seqlens_k)) equal to the op, opcheck on the first."""
    import torch
    import pisa.torch as pt

    pt.load_library(lib_path, namespace)
    ops = getattr(torch.ops, namespace)
    op, forward = ops.prefill, ops.prefill_forward
    Hkv, G, d, C, K = (cfg[x] for x in ("Hkv", "G", "d", "C", "K"))
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[cfg["dtype"]]
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    notes, worst = [], [0.0, 0.0, 0.0]
    for i in range(shapes):
        lengths, queries = check_attention.draw_packed_batch(rng, C, i == 0)
        Tq, Tk = sum(queries), sum(lengths)
        q = torch.randn(Tq, Hkv * G, d, generator=gen).to(dt).cuda()
        k = torch.randn(Tk, Hkv, d, generator=gen).to(dt).cuda()
        v = torch.randn(Tk, Hkv, d, generator=gen).to(dt).cuda()
        do = torch.randn(Tq, Hkv * G, d, generator=gen).to(dt).cuda()
        cuq, cuk = check_attention.cu_of(queries).cuda(), check_attention.cu_of(lengths).cuda()
        extra = ()
        if cfg["given_selection"]:
            parts = [check_attention.crafted_selection(gen, 1, Hkv, nq, K, n, C, n - nq)[0]
                     .transpose(0, 1) for n, nq in zip(lengths, queries) if nq]
            extra = ((torch.cat(parts) if parts else
                      torch.zeros(0, Hkv, K, dtype=torch.int32)).cuda(),)

        def call(a, b, c):
            return op(a, b, c, *extra, cuq, cuk)

        where = f"N={lengths} Nq={queries}"
        eager = grads_of(call, (q, k, v), do)
        sel = extra[0] if extra else forward(q, k, v, cuq, cuk)[2]
        for b, (n, nq) in enumerate(zip(lengths, queries)):
            if not nq:
                continue
            q0, k0 = int(cuq[b]), int(cuk[b])
            head = lambda x: x.transpose(0, 1)[None]  # noqa: E731
            hm = [head(q[q0:q0 + nq]), head(k[k0:k0 + n]), head(v[k0:k0 + n]),
                  head(do[q0:q0 + nq])]
            mask = check_attention_grad.attended_mask(head(sel[q0:q0 + nq]), n - nq, n, C)
            ref = check_attention_grad.autograd_grads(*hm[:3], mask, hm[3], 1 / math.sqrt(d),
                                                      torch.float64)
            low = check_attention_grad.autograd_grads(*hm[:3], mask, hm[3], 1 / math.sqrt(d),
                                                      dt)
            mine = (head(eager[1][q0:q0 + nq]), head(eager[2][k0:k0 + n]),
                    head(eager[3][k0:k0 + n]))
            for j, name in enumerate(("dq", "dk", "dv")):
                err = check_attention_grad.rel_error(mine[j], ref[j])
                base = check_attention_grad.rel_error(low[j], ref[j])
                worst[j] = max(worst[j], err)
                if not check_attention_grad.within_rule(err, base):
                    notes.append(f"{where} sequence {b} {name}: error {err:.2e} above "
                                 f"2 x {base:.2e} + 1e-3")
        torch._dynamo.reset()
        compiled = torch.compile(call, fullgraph=True, dynamic=False)
        again = {
            "torch.compile": grads_of(compiled, (q, k, v), do),
            "checkpoint": grads_of(lambda a, b, c: torch.utils.checkpoint.checkpoint(
                call, a, b, c, use_reentrant=False), (q, k, v), do),
        }
        if not extra:
            module = pt.PisaAttention(lib_path, "prefill", namespace)
            again["PisaAttention"] = grads_of(lambda a, b, c: module(a, b, c, cuq, cuk),
                                              (q, k, v), do)
        for what, got in again.items():
            if not all(torch.equal(x, y) for x, y in zip(got, eager)):
                notes.append(f"{where}: {what} differs from eager")
        if Tq:
            leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
            graphed = torch.cuda.make_graphed_callables(call, tuple(leaves))
            fresh = [torch.randn_like(x) for x in (q, k, v)]
            if not all(torch.equal(x, y) for x, y in zip(grads_of(graphed, fresh, do),
                                                          grads_of(call, fresh, do))):
                notes.append(f"{where}: the CUDA graph's replay differs from eager")
        if i == 0:
            try:
                torch.library.opcheck(op.default, (q, k, v, *extra, cuq, cuk))
            except Exception as e:  # noqa: BLE001 - reported, not raised
                notes.append(f"opcheck prefill: {str(e).splitlines()[0]}")
    ok = not notes
    desc = (f"{cfg['name']} packed Hkv={Hkv} G={G} d={d} C={C} K={K} {cfg['dtype']}"
            f"{' given selection' if cfg['given_selection'] else ''}: {shapes} batches, "
            f"relative error dq {worst[0]:.1e} dk {worst[1]:.1e} dv {worst[2]:.1e}")
    return ok, desc + ("" if ok else ": " + "; ".join(notes[:4]))


def check_case(lib_path, cfg, rng, shapes, namespace):
    import torch
    import pisa.torch as pt

    pt.load_library(lib_path, namespace)
    ops = getattr(torch.ops, namespace)
    op, forward, backward = ops.prefill, ops.prefill_forward, ops.prefill_backward
    Hkv, G, d, C = cfg["Hkv"], cfg["G"], cfg["d"], cfg["C"]
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[cfg["dtype"]]
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    notes, worst = [], [0.0, 0.0, 0.0]
    for i in range(shapes):
        B = rng.choice((1, 2))
        N = rng.randrange(1, 2049)
        nq = N if rng.random() < 0.6 else rng.randrange(1, N + 1)
        off = N - nq

        def make(heads, rows, dim):
            x = torch.randn(B, heads, rows, dim, generator=gen).to(dt).cuda()
            return head_major(x) if cfg["token_major"] else x

        q, k, v, do = make(Hkv * G, nq, d), make(Hkv, N, d), make(Hkv, N, d), make(Hkv * G, nq, d)
        given = None
        if cfg["given_selection"]:
            given = check_attention.crafted_selection(gen, B, Hkv, nq, cfg["K"], N, C,
                                                      off).cuda()
            given = head_major(given) if cfg["token_major"] else given
        extra = () if given is None else (given,)
        shape_notes, errs = check_shape(op, forward, cfg, q, k, v, do, off, given)
        worst = [max(a, b) for a, b in zip(worst, errs)]
        notes += [f"B={B} N={N} Nq={nq}: {n}" for n in shape_notes]
        if i == 0:
            for name, o, args in (("prefill_forward", forward, (q, k, v, *extra, off)),
                                  ("prefill", op, (q, k, v, *extra, off))):
                try:
                    torch.library.opcheck(o.default, args)
                except Exception as e:  # noqa: BLE001 - reported, not raised
                    notes.append(f"opcheck {name}: {str(e).splitlines()[0]}")
            out = forward(q, k, v, *extra, off)
            bargs = (q, k, v, *extra, off, *out[2:], out[0], out[1], do)
            try:
                torch.library.opcheck(backward.default, bargs)
            except Exception as e:  # noqa: BLE001
                notes.append(f"opcheck prefill_backward: {str(e).splitlines()[0]}")
            if given is not None:
                continue  # PisaAttention takes (q, k, v) only
            # The module over token-major tensors.
            module = pt.PisaAttention(lib_path, "prefill", namespace)
            tq, tk, tv, tdo = (x if cfg["token_major"] else head_major(x) for x in (q, k, v, do))
            got = grads_of(module, (tq, tk, tv), tdo)
            want = grads_of(lambda a, b, c: op(a, b, c, off), (q, k, v), do)
            if not cfg["token_major"]:
                got = [head_major(x) for x in got]
            if not all(torch.equal(x, y) for x, y in zip(got, want)):
                notes.append("PisaAttention differs from the op")
    ok = not notes
    desc = (f"{cfg['name']} Hkv={Hkv} G={G} d={d} C={C} K={cfg['K']} {cfg['dtype']}"
            f"{' token-major' if cfg['token_major'] else ''}"
            f"{' given selection' if cfg['given_selection'] else ''}: {shapes} shapes, relative "
            f"error dq {worst[0]:.1e} dk {worst[1]:.1e} dv {worst[2]:.1e}")
    return ok, desc + ("" if ok else ": " + "; ".join(notes[:4]))


def check(args):
    import torch

    with open(os.path.join(args.dir, "training.json")) as f:
        data = json.load(f)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"training check: input seed {seed}, {len(data['cases'])} libraries", flush=True)
    torch.manual_seed(seed)
    passed = failed = 0
    t0 = time.time()
    for cfg in data["cases"]:
        if time.time() - t0 > args.budget:
            print(f"budget of {args.budget} s spent: stopping", flush=True)
            break
        case = check_packed_case if cfg.get("packed") else check_case
        ok, note = case(os.path.join(args.dir, cfg["lib"]), cfg,
                        random.Random(f"{seed}/{cfg['name']}"), args.shapes,
                        f"pisa_{cfg['name']}")
        passed += ok
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {note}", flush=True)
    print(f"training check: {passed} passed, {failed} failed")
    return 0 if failed == 0 and passed else 1


def bench(args):
    """One training step of the attention (selection, attention, backward:
    `o = op(q, k, v, 0); o.backward(dO)`) at the paper setting, beside dense
    SDPA's forward and backward (flash, K and V repeated to 16 heads); CUDA
    events, a warm-up step, fresh inputs before every sample, median."""
    import statistics

    import torch
    import torch.nn.functional as F
    import pisa.torch as pt

    pt.load_library(os.path.join(args.dir, args.library), "pisa_bench")
    op = torch.ops.pisa_bench.prefill

    def timed(step, fresh):
        times = []
        for i in range(args.samples + 1):
            fresh()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            torch.cuda.synchronize()
            if i:  # the first is the warm-up
                times.append(start.elapsed_time(end))
        return statistics.median(times)

    print("| N | pisa step ms (selection, attention, backward) | of which forward ms "
          "| dense SDPA step ms | dense / pisa |")
    print("|---|---|---|---|---|")
    for N in args.lengths:
        q = torch.empty(1, 16, N, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.empty(1, 1, N, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        v = torch.empty(1, 1, N, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        do = torch.empty(1, 16, N, 128, device="cuda", dtype=torch.bfloat16)

        def fresh():
            with torch.no_grad():
                for x in (q, k, v, do):
                    x.normal_()
            for x in (q, k, v):
                x.grad = None

        def step():
            op(q, k, v, 0).backward(do)

        def forward():
            with torch.no_grad():
                op(q, k, v, 0)

        pisa_ms, fwd_ms = timed(step, fresh), timed(forward, fresh)
        dense_ms = float("nan")
        if N <= args.max_dense:
            kd = k.detach().repeat_interleave(16, 1).requires_grad_()
            vd = v.detach().repeat_interleave(16, 1).requires_grad_()

            def dense():
                F.scaled_dot_product_attention(q, kd, vd, is_causal=True).backward(do)

            with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
                dense_ms = timed(dense, fresh)
        print(f"| {N // 1024}K | {pisa_ms:.3f} | {fwd_ms:.3f} | {dense_ms:.2f} | "
              f"{dense_ms / pisa_ms:.1f} |", flush=True)
    return 0


def calls(args):
    """F_forward then F_backward of each named library once per drawn shape
    through pisa.aot, no autograd or compilation: for compute-sanitizer."""
    import torch
    from pisa import aot

    with open(os.path.join(args.dir, "training.json")) as f:
        cases = {c["name"]: c for c in json.load(f)["cases"]}
    rng = random.Random(args.seed)
    for name in args.only:
        cfg = cases[name]
        lib = aot.Library(os.path.join(args.dir, cfg["lib"]))
        dt = {"f16": torch.float16, "bf16": torch.bfloat16}[cfg["dtype"]]
        Hkv, G, d = cfg["Hkv"], cfg["G"], cfg["d"]
        for i in range(args.shapes if cfg.get("packed") else 0):
            lengths, queries = check_attention.draw_packed_batch(rng, cfg["C"], i == 0)
            q, k, v, do = (torch.randn(sum(rows), heads, d, device="cuda").to(dt)
                           for rows, heads in ((queries, Hkv * G), (lengths, Hkv),
                                               (lengths, Hkv), (queries, Hkv * G)))
            cu = (check_attention.cu_of(queries).cuda(), check_attention.cu_of(lengths).cuda())
            extra = ()
            if cfg["given_selection"]:
                gen = torch.Generator().manual_seed(rng.randrange(2**31))
                parts = [check_attention.crafted_selection(gen, 1, Hkv, nq, cfg["K"], n,
                                                           cfg["C"], n - nq)[0].transpose(0, 1)
                         for n, nq in zip(lengths, queries) if nq]
                extra = ((torch.cat(parts) if parts else
                          torch.zeros(0, Hkv, cfg["K"], dtype=torch.int32)).cuda(),)
            out = lib("prefill_forward", q, k, v, *extra, *cu)
            grads = lib("prefill_backward", q, k, v, *extra, *cu, *out[2:], out[0], out[1], do)
            torch.cuda.synchronize()
            print(f"{name} N={lengths} Nq={queries}: dq norm "
                  f"{float(grads[0].float().norm()):.3e}", flush=True)
        for _ in range(0 if cfg.get("packed") else args.shapes):
            B, N = rng.choice((1, 2)), rng.randrange(1, 1500)
            nq = rng.randrange(1, N + 1)

            def make(heads, rows):
                x = torch.randn(B, heads, rows, d, device="cuda").to(dt)
                return x.transpose(1, 2).contiguous() if cfg["token_major"] else x

            q, k, v, do = make(Hkv * G, nq), make(Hkv, N), make(Hkv, N), make(Hkv * G, nq)
            extra = ()
            if cfg["given_selection"]:
                gen = torch.Generator().manual_seed(rng.randrange(2**31))
                sel = check_attention.crafted_selection(gen, B, Hkv, nq, cfg["K"], N,
                                                        cfg["C"], N - nq).cuda()
                extra = (sel.transpose(1, 2).contiguous() if cfg["token_major"] else sel,)
            out = lib("prefill_forward", q, k, v, *extra, N - nq)
            grads = lib("prefill_backward", q, k, v, *extra, N - nq, *out[2:], out[0],
                        out[1], do)
            torch.cuda.synchronize()
            print(f"{name} B={B} N={N} Nq={nq}: dq norm {float(grads[0].float().norm()):.3e}",
                  flush=True)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("out")
    b.add_argument("--seed", type=int, default=1)
    b.add_argument("--count", type=int, default=6)
    b.add_argument("--paper", action="store_true", help="add the paper setting (for bench)")
    b.add_argument("--dq-from-scores", action="store_true",
                   help="pisa-compile --grad-dq-from-scores: the backward entries' dq from "
                        "the key kernel's dS tiles where the kernels take the sizes")
    sweep.add_kernel_config_option(b)
    b.add_argument("--jobs", type=int, default=2)
    b.add_argument("--pisa-compile", default=os.path.join("build", "bin", "pisa-compile"))
    c = sub.add_parser("check")
    c.add_argument("dir")
    c.add_argument("--seed", type=int)
    c.add_argument("--shapes", type=int, default=2)
    c.add_argument("--budget", type=float, default=480)
    r = sub.add_parser("bench")
    r.add_argument("dir")
    r.add_argument("--library", default="libpaper.so")
    r.add_argument("--lengths", type=int, nargs="*",
                   default=[4096, 16384, 65536, 131072, 262144])
    r.add_argument("--samples", type=int, default=7)
    r.add_argument("--max-dense", type=int, default=32768)
    k = sub.add_parser("calls", help="forward and backward calls alone (for sanitizers)")
    k.add_argument("dir")
    k.add_argument("--only", nargs="+", required=True)
    k.add_argument("--seed", type=int, default=1)
    k.add_argument("--shapes", type=int, default=1)
    args = ap.parse_args(argv)
    if args.cmd == "calls":
        return calls(args)
    if args.cmd == "build":
        os.makedirs(args.out, exist_ok=True)
        return build(args)
    return check(args) if args.cmd == "check" else bench(args)


if __name__ == "__main__":
    sys.exit(main())
