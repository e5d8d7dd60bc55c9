"""A selected-block attention peer in Triton, the design of fla-org's
`parallel_nsa_fwd`: one program per (query, batch x KV
head) holding the group's G head rows, a loop over the query's selection
entries, each block's keys and values loaded, S = Q K^T and O += P V with
tl.dot, the online softmax in registers. Written here from that
description (fla is not installed on the H200 machine, which has no
network), so that `check_attention bench` times it beside the attention
pass in the same run instead of quoting the issue's figures.

It takes the selection rows our selection writes (ascending, -1 padding)
and attends an entry's keys j <= t, as docs/semantics.md section 6 does for
such rows; `python3 -m device_checks.nsa_peer --seed S` checks it against
check_attention.reference (float64) over drawn shapes.
"""

import argparse
import math
import random


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def attend(q_ptr, k_ptr, v_ptr, sel_ptr, o_ptr, lse_ptr, n_keys, n_queries, offset,
               kv_heads, scale_log2, G: tl.constexpr, D: tl.constexpr, DV: tl.constexpr,
               C: tl.constexpr, K: tl.constexpr):
        t = tl.program_id(0).to(tl.int64)
        bh = tl.program_id(1).to(tl.int64)          # batch * Hkv + KV head
        b = bh // kv_heads
        h = bh % kv_heads
        pos = offset + t
        rows = tl.arange(0, G)
        dk = tl.arange(0, D)
        dv = tl.arange(0, DV)
        keys = tl.arange(0, C)
        heads = (b * kv_heads + h) * G + rows       # rows of q [B, Hq, Nq, D]
        q = tl.load(q_ptr + (heads[:, None] * n_queries + t) * D + dk[None, :])
        k_base = k_ptr + bh * n_keys * D
        v_base = v_ptr + bh * n_keys * DV
        m = tl.full([G], float("-inf"), tl.float32)
        l = tl.zeros([G], tl.float32)
        acc = tl.zeros([G, DV], tl.float32)
        for i in range(K):
            s = tl.load(sel_ptr + (bh * n_queries + t) * K + i).to(tl.int64)
            start = s * C
            if (s >= 0) & (start <= pos):
                j = start + keys
                seen = (j <= pos) & (j < n_keys)
                kb = tl.load(k_base + j[None, :] * D + dk[:, None], mask=seen[None, :], other=0.0)
                sc = tl.dot(q, kb) * scale_log2
                sc = tl.where(seen[None, :], sc, float("-inf"))
                m_new = tl.maximum(m, tl.max(sc, 1))
                p = tl.exp2(sc - m_new[:, None])
                alpha = tl.exp2(m - m_new)
                l = l * alpha + tl.sum(p, 1)
                vb = tl.load(v_base + j[:, None] * DV + dv[None, :], mask=seen[:, None], other=0.0)
                acc = acc * alpha[:, None] + tl.dot(p.to(vb.dtype), vb)
                m = m_new
        empty = l == 0.0
        out = tl.where(empty[:, None], 0.0, acc / tl.where(empty, 1.0, l)[:, None])
        tl.store(o_ptr + (heads[:, None] * n_queries + t) * DV + dv[None, :],
                 out.to(o_ptr.dtype.element_ty))
        lse = tl.where(empty, float("-inf"), (m + tl.log2(tl.where(empty, 1.0, l))) * 0.6931471805599453)
        tl.store(lse_ptr + heads * n_queries + t, lse)

    return attend


_ATTEND = None


def sparse_attention(q, k, v, selection, offset, block_size, scale=None, out=None, lse=None):
    """(o, lse) of q [B, Hq, Nq, d] over k [B, Hkv, N, d], v [B, Hkv, N, dv]
    and selection [B, Hkv, Nq, K] (ascending rows, -1 padding), all
    contiguous; G, d, dv and C powers of two with G >= 16 (tl.dot)."""
    import torch

    global _ATTEND
    if _ATTEND is None:
        _ATTEND = _kernel()
    B, Hq, Nq, d = q.shape
    Hkv, N, dv = k.shape[1], k.shape[2], v.shape[3]
    K = selection.shape[3]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    if out is None:
        out = torch.empty(B, Hq, Nq, dv, dtype=q.dtype, device=q.device)
    if lse is None:
        lse = torch.empty(B, Hq, Nq, dtype=torch.float32, device=q.device)
    _ATTEND[(Nq, B * Hkv)](q, k, v, selection, out, lse, N, Nq, offset, Hkv,
                           scale * 1.4426950408889634, G=Hq // Hkv, D=d, DV=dv,
                           C=block_size, K=K)
    return out, lse


def main(argv=None):
    """Self-check against the float64 reference of section 6 over drawn
    shapes (G in 16, 32; d, dv in 64, 128; C in 32, 64; N not a multiple
    of C, N < C, chunks and single queries)."""
    import torch

    from device_checks import check_attention as ca

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=24)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    failed = 0
    for i in range(args.count):
        Hkv, G = rng.randint(1, 2), rng.choice((16, 32))
        d, dv, C, K = rng.choice((64, 128)), rng.choice((64, 128)), rng.choice((32, 64)), rng.randint(3, 12)
        N = rng.choice((rng.randint(1, C - 1), rng.randint(C, 3000)))
        Nq = rng.choice((1, rng.randint(1, N)))
        offset = N - Nq
        dtype = rng.choice((torch.float16, torch.bfloat16))
        q = torch.randn(1, Hkv * G, Nq, d, generator=gen).to(dtype).cuda()
        k = torch.randn(1, Hkv, N, d, generator=gen).to(dtype).cuda()
        v = torch.randn(1, Hkv, N, dv, generator=gen).to(dtype).cuda()
        # Ascending rows holding the query's own block, -1 padding.
        nb = -(-N // C)
        sel = torch.full((1, Hkv, Nq, K), -1, dtype=torch.int32)
        for h in range(Hkv):
            for t in range(Nq):
                row = sorted({(offset + t) // C} | {rng.randrange(nb) for _ in range(K - 1)})
                sel[0, h, t, :len(row)] = torch.tensor(row, dtype=torch.int32)
        sel = sel.cuda()
        o, lse = sparse_attention(q, k, v, sel, offset, C)
        o_ref, lse_ref = ca.reference(q, k, v, sel, offset, C, 1.0 / math.sqrt(d))
        name = "bf16" if dtype == torch.bfloat16 else "f16"
        ok, worst, worst_lse, note = ca.compare(o, lse, o_ref, lse_ref, name)
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} Hkv={Hkv} G={G} d={d} dv={dv} C={C} K={K} "
              f"N={N} Nq={Nq} {name}: max |o - ref| {worst:.2e} {note}")
    print(f"nsa peer check: {args.count - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
