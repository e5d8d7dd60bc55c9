"""A flat decode selector, the peer of PISA's decode step:
every block of every sequence scored from all its keys, then the top K.

It scores a block exactly as PISA scores a leaf (docs/semantics.md,
section 2: the sum over the group's G heads of the LSE of scale * q . k over
the block's keys), forces blocks 0, b_t - 1 and b_t as section 3 does, and
keeps the K best in ascending order, -1 past the blocks there are. So it is
the exhaustive selection that PISA's walk approximates, at O(N) per step:
one Triton program per (block, sequence x KV head) on tensor cores, then
torch.topk, torch.sort. fla's NSA selector (the issue's peer) is not
installed on the H200 machine; this one reads the same N keys a step and
does less work a key (no normalisation over all keys), and measures below
the issue's figures for fla's (docs/performance.md).

Used by `check_decode bench` beside the decode step, in the same run.
"""

import math


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def leaf_scores(q_ptr, k_ptr, lens_ptr, out_ptr, kv_heads, capacity, max_blocks,
                    scale_log2, G: tl.constexpr, D: tl.constexpr, C: tl.constexpr):
        blk = tl.program_id(0)
        bh = tl.program_id(1).to(tl.int64)  # sequence * Hkv + KV head
        n = tl.load(lens_ptr + bh // kv_heads)
        num_blocks = (n + C - 1) // C
        heads = tl.arange(0, G)
        cols = tl.arange(0, D)
        keys = blk * C + tl.arange(0, C)
        real = keys < n
        q = tl.load(q_ptr + (bh * G + heads)[:, None] * D + cols[None, :])
        k = tl.load(k_ptr + bh * capacity * D + keys[:, None].to(tl.int64) * D + cols[None, :],
                    mask=real[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale_log2
        s = tl.where(real[None, :], s, float("-inf"))
        m = tl.max(s, 1)
        m = tl.where(m == float("-inf"), 0.0, m)
        lse = m + tl.log2(tl.sum(tl.exp2(s - m[:, None]), 1))
        score = tl.sum(lse, 0) * 0.6931471805599453
        last = (n - 1) // C
        forced = (blk == 0) | (blk == last) | (blk == last - 1)
        score = tl.where(forced, float("inf"), score)
        score = tl.where(blk < num_blocks, score, float("-inf"))
        tl.store(out_ptr + bh * max_blocks + blk, score)

    return leaf_scores


_LEAF_SCORES = None


def flat_select(q, keys, lens, block_size, topk, max_len, scores=None):
    """Selection [B, Hkv, 1, K] (int64) of q [B, Hkv * G, 1, d] over keys
    [B, Hkv, capacity, d] (16-bit; G >= 16 and d, C powers of two, as
    tl.dot and tl.arange take them), sequence b holding keys 0 .. lens[b] - 1
    (lens an int32 device tensor, every length in 1 .. max_len). `scores`
    ([B * Hkv, ceil(max_len / C)] float32) may be given to avoid an
    allocation (a CUDA graph)."""
    import torch

    if topk < 3:
        raise ValueError(f"K = {topk}: the selection takes K >= 3 (the forced blocks)")
    global _LEAF_SCORES
    if _LEAF_SCORES is None:
        _LEAF_SCORES = _kernel()
    B, Hq, _, d = q.shape
    Hkv, capacity = keys.shape[1], keys.shape[2]
    G = Hq // Hkv
    blocks = -(-max_len // block_size)
    if scores is None:
        scores = torch.empty(B * Hkv, blocks, dtype=torch.float32, device=q.device)
    _LEAF_SCORES[(blocks, B * Hkv)](
        q, keys, lens, scores, Hkv, capacity, blocks,
        math.log2(math.e) / math.sqrt(d), G=G, D=d, C=block_size)
    k = min(topk, blocks)
    values, index = torch.topk(scores, k, dim=1)
    index = torch.where(values > float("-inf"), index, blocks)
    index = torch.sort(index, dim=1).values
    index = torch.where(index < blocks, index, -1)
    if k < topk:
        index = torch.nn.functional.pad(index, (0, topk - k), value=-1)
    return index.view(B, Hkv, 1, topk)


def overlap(pisa, flat):
    """Mean over rows of the share of the flat selection's blocks (the
    exact top K by leaf score, forced ones included) that PISA's row holds;
    both [..., K], -1 padded."""
    from pisa.quality import _membership

    nb = int(max(pisa.max(), flat.max())) + 1
    want = _membership(flat.reshape(-1, flat.shape[-1]), nb)
    held = _membership(pisa.reshape(-1, pisa.shape[-1]).to(flat.device), nb)
    share = (want & held).sum(-1) / want.sum(-1).clamp(min=1)
    return float(share.double().mean())


def _reference_scores(q, keys, n, C):
    """The leaf scores of one sequence in float64 (torch), unforced."""
    import torch

    Hkv, d = keys.shape[1], keys.shape[3]
    G = q.shape[1] // Hkv
    out = []
    for h in range(Hkv):
        qh = q[0, h * G:(h + 1) * G, 0].double()
        s = qh @ keys[0, h, :n].double().T / math.sqrt(d)
        blocks = [torch.logsumexp(s[:, j:j + C], 1).sum() for j in range(0, n, C)]
        out.append(torch.stack(blocks))
    return torch.stack(out)


def main(argv=None):
    """Self-check on the GPU: for shapes drawn from a seed (N not a multiple
    of C, N < C, K >= the blocks), the Triton scores equal float64
    ones within 1e-3 relative, and the selection is the forced blocks and
    the K best of the float64 scores, bar near-ties."""
    import argparse
    import random
    import torch

    from pisa.quality import top_blocks

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=24)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    failed = 0
    for case in range(args.count):
        Hkv, G = rng.choice([1, 2, 4]), rng.choice([16, 32])
        d, C, K = rng.choice([64, 128]), rng.choice([16, 32, 64]), rng.choice([3, 8, 16])
        n = rng.choice([rng.randint(1, C - 1), rng.randint(C, 40 * C), C * rng.randint(1, 30)])
        q = torch.randn(1, Hkv * G, 1, d, device="cuda").to(torch.bfloat16)
        keys = torch.randn(1, Hkv, n + rng.randint(0, 3 * C), d, device="cuda").to(torch.bfloat16)
        lens = torch.tensor([n], dtype=torch.int32, device="cuda")
        blocks = -(-n // C)
        scores = torch.empty(Hkv, blocks, device="cuda")
        sel = flat_select(q, keys, lens, C, K, n, scores)
        ref = _reference_scores(q, keys, n, C)
        last = (n - 1) // C
        forced = {0, last, last - 1} & set(range(blocks))
        finite = [j for j in range(blocks) if j not in forced]
        got = scores[:, finite].double()
        ok = torch.allclose(got, ref[:, finite], rtol=1e-3, atol=1e-3)
        # The expected rows: hier_topk's final selection over the float64
        # scores (quality.top_blocks), one row per KV head at t = n - 1.
        t = torch.full((Hkv,), n - 1, dtype=torch.long)
        take = top_blocks(ref.cpu(), t, C, K).tolist()
        for h in range(Hkv):
            row = sel[0, h, 0].tolist()
            if row != take[h]:
                # A near-tie at the cut may differ: the K-th and the next
                # reference scores within the score tolerance.
                order = sorted(finite, key=lambda j: -float(ref[h, j]))
                cut = max(0, K - len(forced))
                near = (0 < cut < len(order) and
                        abs(float(ref[h, order[cut - 1]] - ref[h, order[cut]])) < 2e-3)
                ok = ok and near
        failed += not ok
        why = "" if ok else f": {sel[0, :, 0].tolist()} against {take}"
        print(f"{'ok ' if ok else 'FAIL'} Hkv={Hkv} G={G} d={d} C={C} K={K} N={n}{why}")
    print(f"flat_decode: {args.count - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    import sys
    sys.exit(main())
