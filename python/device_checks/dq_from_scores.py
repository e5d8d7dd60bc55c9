"""The backward's dq pass from stored dS tiles, measured before it is built.

  python3 -m device_checks.dq_from_scores DIR [--lengths ...] [--samples S]   # GPU

DIR holds the paper-setting backward library (`check_attention_grad build
--paper`: libpaper.so). The key kernel computes every attended (query,
block) pair's dS = P (dP - D) for its G heads already (dK += dS^T Q); if
it also stored that tile (G x C, bf16: the operand the dq product takes,
2 KiB at the paper setting) at the pair's place in its block's query list,
dq = scale * sum_j dS_j K_j would need only K's rows and the tiles: half
of the K and V bytes the dq pass gathers today, one product a pair instead
of three, and no exp. D (rowsum dO o, which the dq pass now writes for the
key kernel) would come from a pass of its own before the key kernel.

For each N, on the bench's selections (check_attention_grad bench: block
0, the query's own block, six random earlier ones), one run times:

- the library's whole backward (`grad_dk`) and its dq pass (`grad_dq`);
- `D pass`: a Triton kernel computing D from dO and o (what must move out
  of the dq pass);
- `dS writes`: writing the attended pairs' tiles (2 KiB each, in list
  order: contiguous) once, the bytes the key kernel would add;
- `dq from dS`: a Triton kernel, a warp a query (as the dq pass), reading
  each attended block's dS tile at its list place and K's rows, dq +=
  dS K on tensor cores.

CUDA events, a warm-up call, median of --samples, fresh inputs (and list
places) before each sample. Before timing, --check-length checks the
Triton dq on a short sequence: dS from float32 PyTorch math placed at the
list places, its dq against float64 autograd and against the library's
dq (relative Frobenius errors).
"""

import argparse
import os
import sys

from device_checks import check_attention
from device_checks import check_attention_grad

C, D, K, G = 64, 128, 8, 16


def kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def dq_from_ds(ds_ptr, k_ptr, sel_ptr, pos_ptr, dq_ptr, n, scale, K: tl.constexpr,
                   C: tl.constexpr, D: tl.constexpr, G: tl.constexpr):
        q = tl.program_id(0).to(tl.int64)
        heads = tl.arange(0, G)
        keys = tl.arange(0, C)
        cols = tl.arange(0, D)
        acc = tl.zeros([G, D], dtype=tl.float32)
        last = -1
        for j in tl.static_range(K):
            s = tl.load(sel_ptr + q * K + j)
            # docs/semantics.md, section 6: an entry is used when it
            # ascends, attended when its block starts at or before q.
            used = (s > last) & (s >= 0) & (s.to(tl.int64) * C <= q)
            last = tl.where(s > last, s, last)
            p = tl.load(pos_ptr + q * K + j)
            ds = tl.load(ds_ptr + p * (G * C) + heads[:, None] * C + keys[None, :],
                         mask=used, other=0.0)
            row = s.to(tl.int64) * C + keys
            kk = tl.load(k_ptr + row[:, None] * D + cols[None, :],
                         mask=used & (row < n)[:, None], other=0.0)
            acc = tl.dot(ds, kk, acc)
        tl.store(dq_ptr + (heads[:, None] * n + q) * D + cols[None, :], acc * scale)

    @triton.jit
    def delta(do_ptr, o_ptr, d_ptr, rows, R: tl.constexpr, D: tl.constexpr):
        r = tl.program_id(0).to(tl.int64) * R + tl.arange(0, R)
        cols = tl.arange(0, D)
        at = r[:, None] * D + cols[None, :]
        inside = (r < rows)[:, None]
        x = tl.load(do_ptr + at, mask=inside, other=0.0).to(tl.float32)
        y = tl.load(o_ptr + at, mask=inside, other=0.0).to(tl.float32)
        tl.store(d_ptr + r, tl.sum(x * y, 1), mask=r < rows)

    return dq_from_ds, delta


def list_places(sel, n):
    """[n, K] int64: each attended (query, entry) pair's place in the
    concatenated per-block query lists (blocks in order, a block's queries
    in order), as the list kernels order them; unused entries after."""
    import torch

    s = sel.reshape(n, K).long()
    nb = -(-n // C)
    prev = torch.cat([torch.full((n, 1), -1, device=s.device, dtype=torch.long),
                      torch.cummax(s, dim=1).values[:, :-1]], dim=1)
    pos = torch.arange(n, device=s.device).unsqueeze(1)
    used = (s > prev) & (s >= 0) & (s * C <= pos)
    key = torch.where(used, s, nb) * n + pos
    order = torch.argsort(key.flatten(), stable=True)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), device=s.device)
    return rank.reshape(n, K), used


def check(lib, kernels_, n, seed):
    import torch

    dq_from_ds, _ = kernels_
    torch.manual_seed(seed)
    scale = D ** -0.5
    q, k, v, do, sel = check_attention_grad.bench_inputs(n)
    ws = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    o = lib("attend", q, k, v, sel, 0, workspace=ws)
    lse = lib("attend_lse", q, k, v, sel, 0, workspace=ws)
    dq_lib = lib("grad_dq", q, k, v, sel, 0, o, lse, do, workspace=ws)
    mask = check_attention_grad.attended_mask(sel, 0, n, C)[0, 0]
    # dS in float32 (the key kernel's accumulation type), from the dense
    # masked attention.
    qf, kf, vf, dof = q[0].float(), k[0, 0].float(), v[0, 0].float(), do[0].float()
    s = (qf @ kf.T) * scale
    s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, -1)
    p = torch.where(mask.any(-1, keepdim=True), p, torch.zeros_like(p))
    of = p @ vf
    ds = p * ((dof @ vf.T) - (dof * of).sum(-1, keepdim=True))
    places, used = list_places(sel, n)
    cols = sel[0, 0].long()[:, :, None] * C + torch.arange(C, device="cuda")
    inside = (cols < n) & used[:, :, None]
    tiles = torch.gather(ds, 2, cols.clamp(max=n - 1).reshape(1, n, K * C).expand(G, n, K * C))
    tiles = tiles.reshape(G, n, K, C).permute(1, 2, 0, 3) * inside[:, :, None, :]
    buf = torch.zeros(n * K, G, C, device="cuda", dtype=torch.bfloat16)
    buf[places.flatten()] = tiles.reshape(n * K, G, C).to(torch.bfloat16)
    dq = torch.empty(G, n, D, device="cuda", dtype=torch.float32)
    dq_from_ds[(n,)](buf, k, sel, places, dq, n, scale, K=K, C=C, D=D, G=G, num_warps=1)
    ref, _, _ = check_attention_grad.autograd_grads(q, k, v, mask[None, None], do, scale,
                                                    torch.float64)
    same, _, _ = check_attention_grad.autograd_grads(q, k, v, mask[None, None], do, scale,
                                                     torch.bfloat16)
    err = check_attention_grad.rel_error(dq[None], ref)
    print(f"check at N = {n}: dq from dS against float64 autograd {err:.2e}; the library's "
          f"dq {check_attention_grad.rel_error(dq_lib, ref):.2e}; PyTorch bf16 "
          f"{check_attention_grad.rel_error(same, ref):.2e}; dq from dS against the "
          f"library's {check_attention_grad.rel_error(dq[None], dq_lib):.2e}", flush=True)
    return err < 2 * check_attention_grad.rel_error(same, ref)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir")
    parser.add_argument("--lengths", type=int, nargs="+", default=[16384, 65536, 262144])
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--check-length", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    import torch
    from pisa import aot

    lib = aot.Library(os.path.join(args.dir, "libpaper.so"))
    kernels_ = kernels()
    dq_from_ds, delta = kernels_
    ok = check(lib, kernels_, args.check_length, args.seed)
    print("| N | backward ms | dq pass ms | D pass ms | dS writes ms | dq from dS ms, 1 warp "
          "| 2 warps | dS GiB |")
    print("|---|---|---|---|---|---|---|---|")
    scale = D ** -0.5
    for n in args.lengths:
        box = {}
        ws = torch.empty(5 << 30, dtype=torch.uint8, device="cuda")
        buf = torch.empty(n * K, G, C, device="cuda", dtype=torch.bfloat16)
        dq = torch.empty(G, n, D, device="cuda", dtype=torch.float32)
        dd = torch.empty(G * n, device="cuda", dtype=torch.float32)

        def fresh():
            box["q"], box["k"], box["v"], box["do"], box["sel"] = \
                check_attention_grad.bench_inputs(n)
            box["o"] = lib("attend", box["q"], box["k"], box["v"], box["sel"], 0, workspace=ws)
            box["lse"] = lib("attend_lse", box["q"], box["k"], box["v"], box["sel"], 0,
                             workspace=ws)
            box["places"], used = list_places(box["sel"], n)
            box["pairs"] = int(used.sum().item())

        def grad(result):
            return lambda: lib(f"grad_{result}", box["q"], box["k"], box["v"], box["sel"], 0,
                               box["o"], box["lse"], box["do"], workspace=ws)

        fresh()
        bwd = check_attention.timed(grad("dk"), args.samples, fresh)
        dq_pass = check_attention.timed(grad("dq"), args.samples, fresh)
        d_pass = check_attention.timed(
            lambda: delta[(-(-G * n // 64),)](box["do"], box["o"], dd, G * n, R=64, D=D,
                                             num_warps=4), args.samples, fresh)
        writes = check_attention.timed(
            lambda: buf.view(-1)[:box["pairs"] * G * C].fill_(1.0), args.samples, fresh)
        buf.normal_()
        proto = [check_attention.timed(
            lambda: dq_from_ds[(n,)](buf, box["k"], box["sel"], box["places"], dq, n, scale,
                                     K=K, C=C, D=D, G=G, num_warps=warps),
            args.samples, fresh) for warps in (1, 2)]
        print(f"| {n} | {bwd:.3f} | {dq_pass:.3f} | {d_pass:.3f} | {writes:.3f} | "
              f"{proto[0]:.3f} | {proto[1]:.3f} | {box['pairs'] * G * C * 2 / 2**30:.2f} |",
              flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
