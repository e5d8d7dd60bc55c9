"""A flat prefill selector, the peer of PISA's selection: the
design of fla's NSA selector (`parallel_nsa_topk`). Every query scores the
mean-pooled key of every block up to its own, a block's importance is the
sum over the group's G heads of its softmax probability over those blocks,
and the K most important are kept (blocks 0, b_t - 1 and b_t forced, as
docs/semantics.md section 3 forces them), ascending, -1 padded.

One Triton program per (query, batch x KV head) makes two passes over the
blocks on tensor cores: each head's LSE, then the importance, merged into a
running top K by sorting packed (importance, block) keys. Its work is
O(N^2 / C), the flat cost that PISA's walk avoids. fla is not installed on
the H200 machine (no network), so this is written from that description,
for `bench_gpu --flat-peer` to time beside the selection in the same run.
"""

import math

_CHUNK = 64  # blocks a step; also the most K this peer keeps


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def select(q_ptr, kc_ptr, out_ptr, n_queries, n_blocks, scale_log2,
               G: tl.constexpr, D: tl.constexpr, C: tl.constexpr,
               BC: tl.constexpr, K: tl.constexpr):
        t = tl.program_id(0).to(tl.int64)
        bh = tl.program_id(1).to(tl.int64)  # batch * Hkv + KV head
        rows = bh * G + tl.arange(0, G)     # rows of q [B, Hq, Nq, D]
        cols = tl.arange(0, D)
        q = tl.load(q_ptr + (rows[:, None] * n_queries + t) * D + cols[None, :])
        last = t // C
        kc = kc_ptr + bh * n_blocks * D
        m = tl.full([G], float("-inf"), tl.float32)
        l = tl.zeros([G], tl.float32)
        for start in range(0, last + 1, BC):
            blocks = start + tl.arange(0, BC)
            real = blocks <= last
            k = tl.load(kc + blocks[:, None] * D + cols[None, :], mask=real[:, None], other=0.0)
            s = tl.where(real[None, :], tl.dot(q, tl.trans(k)) * scale_log2, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, 1))
            l = l * tl.exp2(m - m_new) + tl.sum(tl.exp2(s - m_new[:, None]), 1)
            m = m_new
        lse = m + tl.log2(l)
        best = tl.full([BC], -1, tl.int64)  # packed keys; -1 is below any block's
        for start in range(0, last + 1, BC):
            blocks = start + tl.arange(0, BC)
            real = blocks <= last
            k = tl.load(kc + blocks[:, None] * D + cols[None, :], mask=real[:, None], other=0.0)
            s = tl.where(real[None, :], tl.dot(q, tl.trans(k)) * scale_log2, float("-inf"))
            p = tl.sum(tl.exp2(s - lse[:, None]), 0)
            forced = (blocks == 0) | (blocks == last) | (blocks == last - 1)
            p = tl.where(forced, float("inf"), p)
            # A non-negative float's bits order as its value; the low word
            # ranks the lower block first on a tie.
            bits = p.to(tl.int32, bitcast=True).to(tl.int64)
            key = tl.where(real, (bits << 32) | (0x7FFFFFFF - blocks), -1)
            both = tl.sort(tl.reshape(tl.join(best, key), [2 * BC]), descending=True)
            best, _ = tl.split(tl.permute(tl.reshape(both, [2, BC]), [1, 0]))
        index = tl.where(best >= 0, 0x7FFFFFFF - (best & 0x7FFFFFFF), -1)
        slot = tl.arange(0, BC)
        tl.store(out_ptr + (bh * n_queries + t) * K + slot, index, mask=slot < K)

    return select


_SELECT = None


def pooled_keys(keys, block_size):
    """The mean of each block's keys [B, Hkv, ceil(N / C), d], in the keys'
    dtype (the last block averages the keys it has)."""
    import torch

    B, Hkv, n, d = keys.shape
    blocks = -(-n // block_size)
    padded = torch.nn.functional.pad(keys.float(), (0, 0, 0, blocks * block_size - n))
    sums = padded.view(B, Hkv, blocks, block_size, d).sum(3)
    counts = torch.full((blocks,), float(block_size), device=keys.device)
    counts[-1] = n - (blocks - 1) * block_size
    return (sums / counts[:, None]).to(keys.dtype)


def select(q, keys, block_size, topk):
    """Selection [B, Hkv, N, K] (int64) of q [B, Hkv * G, N, d] over keys
    [B, Hkv, N, d] (16-bit; G >= 16, d and C powers of two, K <= 64), query
    t at position t."""
    import torch

    if not 3 <= topk <= _CHUNK:
        raise ValueError(f"K = {topk}: this peer keeps 3 to {_CHUNK} blocks")
    global _SELECT
    if _SELECT is None:
        _SELECT = _kernel()
    B, Hq, n, d = q.shape
    Hkv = keys.shape[1]
    kc = pooled_keys(keys, block_size)
    out = torch.empty(B, Hkv, n, topk, dtype=torch.int64, device=q.device)
    _SELECT[(n, B * Hkv)](q, kc, out, n, kc.shape[2], math.log2(math.e) / math.sqrt(d),
                          G=Hq // Hkv, D=d, C=block_size, BC=_CHUNK, K=topk)
    # Ascending, -1 last.
    out = torch.where(out < 0, torch.iinfo(torch.int64).max, out).sort(-1).values
    return torch.where(out == torch.iinfo(torch.int64).max, -1, out)


def main(argv=None):
    """Self-check on the GPU: for shapes drawn from a seed (N not a multiple
    of C, N < C, K >= the blocks there are), each row is the K most
    important blocks of a float64 reference over the same pooled keys, bar
    near-ties at the cut."""
    import argparse
    import random
    import torch

    from pisa.quality import forced_blocks, top_blocks

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=16)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    failed = 0
    for _ in range(args.count):
        B, Hkv, G = rng.choice([1, 2]), rng.choice([1, 2]), rng.choice([16, 32])
        d, C, K = rng.choice([64, 128]), rng.choice([16, 32, 64]), rng.choice([3, 8, 16])
        n = rng.choice([rng.randint(1, C - 1), rng.randint(C, 60 * C), C * rng.randint(1, 40)])
        q = torch.randn(B, Hkv * G, n, d, device="cuda").to(torch.bfloat16)
        keys = torch.randn(B, Hkv, n, d, device="cuda").to(torch.bfloat16)
        got = select(q, keys, C, K)
        kc = pooled_keys(keys, C)
        blocks = kc.shape[2]
        s = torch.einsum("bhgtd,bhjd->bhtgj", q.double().view(B, Hkv, G, n, d),
                         kc.double()) / math.sqrt(d)
        t = torch.arange(n, device="cuda")
        causal = torch.arange(blocks, device="cuda")[None, :] * C <= t[:, None]
        s = s.masked_fill(~causal[None, None, :, None, :], float("-inf"))
        # Rows in (batch, KV head, query) order; the contract's selection
        # (forced blocks, then the best, lower block first on a tie).
        imp = torch.softmax(s, -1).sum(3).reshape(-1, blocks)
        row_t = t.repeat(B * Hkv)
        want = top_blocks(imp, row_t, C, K).view(B, Hkv, n, K)
        same = (got == want).all(-1)
        # A row may differ on a near-tie at the cut: it holds the forced
        # blocks, and the importance of its blocks sums to the reference's
        # within the tolerance.
        flat = got.reshape(-1, K)
        forced = forced_blocks(row_t, C)
        holds = ((flat[:, None, :] == forced[:, :, None]).any(-1) | (forced < 0)).all(-1)

        def total(rows):
            v = torch.gather(imp, -1, rows.clamp(0, blocks - 1))
            return torch.where(rows >= 0, v, 0.0).sum(-1)
        near = holds & ((total(flat) - total(want.reshape(-1, K))).abs() < 2e-3)
        near = near.view(B, Hkv, n)
        valid = ((got >= -1) & (got < blocks)).all(-1)
        ok = bool((valid & (same | near)).all())
        failed += not ok
        print(f"{'ok ' if ok else 'FAIL'} B={B} Hkv={Hkv} G={G} d={d} C={C} K={K} N={n}: "
              f"{int(same.sum())} of {same.numel()} rows exact")
    print(f"flat_prefill: {args.count - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    import sys
    sys.exit(main())
