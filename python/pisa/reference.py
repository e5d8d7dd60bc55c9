"""An independent PyTorch implementation of the PISA selection contract.

Written from docs/semantics.md for checking the compiled kernels at sizes
the NumPy test reference cannot reach: queries are processed in chunks,
vectorised over their candidates, in float64 on the GPU. Returns the
selection and, per query, the smallest score gap at any top-K boundary
(inf when no boundary was decided), so that a checker can excuse
disagreements at near ties and only there.
"""

import math

import torch


def pyramid(keys, C, g, dtype=torch.float64):
    """Level summaries [B, H, M_l, d] (in `dtype`) for l = 1..L."""
    B, H, N, d = keys.shape
    k = keys.to(dtype)
    m1 = -(-N // C)
    padded = torch.zeros(B, H, m1 * C, d, dtype=dtype, device=k.device)
    padded[:, :, :N] = k
    counts = (N - torch.arange(m1, device=k.device) * C).clamp(max=C).to(dtype)
    levels = [padded.view(B, H, m1, C, d).sum(3) / counts[:, None]]
    while levels[-1].shape[2] > 1:
        below = levels[-1]
        m = below.shape[2]
        up = -(-m // g)
        padded = torch.zeros(B, H, up * g, d, dtype=dtype, device=k.device)
        padded[:, :, :m] = below
        counts = (m - torch.arange(up, device=k.device) * g).clamp(max=g).to(dtype)
        levels.append(padded.view(B, H, up, g, d).sum(3) / counts[:, None])
    return levels


def _score(qg, children, exists, causal, scale):
    """Group-summed LSE: qg [n, G, d], children [n, a, c, d] -> [n, a]."""
    logits = scale * torch.einsum("nhd,nacd->nhac", qg, children)
    mask = (exists & causal)[:, None]
    logits = logits.masked_fill(~mask, -math.inf)
    return torch.logsumexp(logits, dim=-1).sum(1)


def lse_score(q, children, candidates, level, C, g, scale=None, offset=0,
              with_magnitude=False):
    """pisa.lse_score (docs/semantics.md, section 2) in float64.

    q [B, Hq, Nq, d]; children [B, Hkv, R, d], the raw keys at level 1,
    else the level - 1 summaries; candidates [B, Hkv, Nq, S] node indices of
    `level`. Returns u [B, Hkv, Nq, S]: the group sum of each head's LSE over
    the node's existing children whose first key is at or before the query's
    position, -inf for a negative entry or a node without such a child. With
    `with_magnitude`, also the largest |scaled logit| each entry summed over
    (0 where none), the scale of its rounding error.
    """
    B, Hq, Nq, d = q.shape
    Hkv, R = children.shape[1], children.shape[2]
    G = Hq // Hkv
    S = candidates.shape[3]
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    fanout, span = (C, 1) if level == 1 else (g, C * g ** (level - 2))
    dev = q.device
    u = torch.full((B, Hkv, Nq, S), -math.inf, dtype=torch.float64, device=dev)
    mag = torch.zeros((B, Hkv, Nq, S), dtype=torch.float64, device=dev)
    if min(B, Nq, S, R) == 0:
        return (u, mag) if with_magnitude else u
    qd = q.to(torch.float64).view(B, Hkv, G, Nq, d)
    cd = children.to(torch.float64)
    step = max(1, (1 << 24) // (G * max(R, S * fanout)))
    ahead = torch.arange(fanout, device=dev)
    for i0 in range(0, Nq, step):
        i1 = min(Nq, i0 + step)
        n = i1 - i0
        logits = scale * torch.einsum("bkgid,bkrd->bkgir", qd[:, :, :, i0:i1], cd)
        cand = candidates[:, :, i0:i1].to(torch.int64)
        child = cand[..., None] * fanout + ahead              # [B, Hkv, n, S, f]
        idx = child.clamp(0, R - 1)
        t = offset + torch.arange(i0, i1, device=dev)
        valid = (cand[..., None] >= 0) & (child < R) & (idx * span <= t[:, None, None])
        picked = logits.gather(-1, idx.view(B, Hkv, 1, n, -1).expand(B, Hkv, G, n, -1))
        picked = picked.view(B, Hkv, G, n, S, fanout)
        mask = valid[:, :, None]
        u[:, :, i0:i1] = torch.logsumexp(picked.masked_fill(~mask, -math.inf), -1).sum(2)
        if with_magnitude:
            mag[:, :, i0:i1] = picked.abs().masked_fill(~mask, 0).amax((2, 5))
    return (u, mag) if with_magnitude else u


def _best(nodes, valid, u, slots):
    """Keeps the `slots` (per row) best valid nodes; ties to the lower index.
    Returns (kept ascending with invalid = -1, gap at the boundary)."""
    u = u.masked_fill(~valid, -math.inf)
    order = torch.sort(u, dim=1, descending=True, stable=True)
    rank = torch.empty_like(order.indices)
    rank.scatter_(1, order.indices,
                  torch.arange(u.shape[1], device=u.device).expand_as(rank))
    keep = valid & (rank < slots[:, None])
    n_valid = valid.sum(1)
    decided = n_valid > slots
    big = torch.iinfo(torch.int64).max
    if u.shape[1] < 2:  # nothing to decide
        kept = torch.where(keep, nodes, -1)
        return kept, torch.full_like(u[:, 0], math.inf)
    s = slots.clamp(min=1, max=u.shape[1] - 1)
    hi = order.values.gather(1, (s - 1)[:, None])[:, 0]
    lo = order.values.gather(1, s[:, None])[:, 0]
    gap = torch.where(decided, hi - lo, torch.full_like(hi, math.inf))
    kept = torch.sort(torch.where(keep, nodes, big), dim=1).values
    return torch.where(kept == big, -1, kept), gap


def select(q, k, C, K, g=2, scale=None, offset=0, chunk=None,
           dtype=torch.float64, rows=None):
    """Selection int32 [B, Hkv, R, K] and min gap [B, Hkv, R] for the query
    indices `rows` (default: all Nq). float64 by default (checking); float32
    to time PISA written in plain PyTorch ops."""
    B, Hq, Nq, d = q.shape
    Hkv, N = k.shape[1], k.shape[2]
    G = Hq // Hkv
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    dev = q.device
    rows = torch.arange(Nq, device=dev) if rows is None else rows.to(dev)
    Nq = rows.numel()
    if chunk is None:
        # The leaf level holds chunk x g*K x C x d values: about 1 GiB.
        chunk = max(16, min(4096, 2 ** 27 // (g * K * C * d)))
    levels = pyramid(k, C, g, dtype)
    L, m1 = len(levels), levels[0].shape[2]
    out = torch.full((B, Hkv, Nq, K), -1, dtype=torch.int32, device=dev)
    gaps = torch.full((B, Hkv, Nq), math.inf, dtype=dtype, device=dev)
    kd = k.to(dtype)
    for b in range(B):
        for h in range(Hkv):
            for i0 in range(0, Nq, chunk):
                i1 = min(Nq, i0 + chunk)
                n = i1 - i0
                t = offset + rows[i0:i1]
                bt = (t // C).clamp(max=m1 - 1)
                qg = q[b, h * G:(h + 1) * G][:, rows[i0:i1]].to(dtype).transpose(0, 1)
                nodes = torch.zeros(n, 1, dtype=torch.int64, device=dev)
                alive = torch.ones(n, 1, dtype=torch.bool, device=dev)
                gap = torch.full((n,), math.inf, dtype=dtype, device=dev)
                for level in range(L, 1, -1):
                    below = levels[level - 2][b, h]
                    valid = alive & (nodes * g ** (level - 1) <= bt[:, None])
                    kids = nodes[:, :, None] * g + torch.arange(g, device=dev)
                    exists = kids < below.shape[0]
                    causal = kids * (C * g ** (level - 2)) <= t[:, None, None]
                    u = _score(qg, below[kids.clamp(max=below.shape[0] - 1)],
                               exists, causal, scale)
                    slots = torch.full((n,), K, dtype=torch.int64, device=dev)
                    kept, level_gap = _best(nodes, valid, u, slots)
                    # At most K kept (ascending, -1 after them): the next
                    # level has g * K candidates, not g^(L - l).
                    kept = kept[:, :K]
                    gap = torch.minimum(gap, level_gap)
                    nodes = (kept.clamp(min=0)[:, :, None] * g
                             + torch.arange(g, device=dev)).reshape(n, -1)
                    alive = ((kept >= 0)[:, :, None].expand(-1, -1, g).reshape(n, -1)
                             & (nodes < below.shape[0]))
                forced = (nodes == 0) | (nodes == bt[:, None]) | (nodes == bt[:, None] - 1)
                valid = alive & (nodes <= bt[:, None]) & ~forced
                keys_idx = nodes[:, :, None] * C + torch.arange(C, device=dev)
                exists = keys_idx < N
                causal = keys_idx <= t[:, None, None]
                u = _score(qg, kd[b, h][keys_idx.clamp(max=N - 1)], exists, causal, scale)
                n_forced = 1 + (bt >= 1).long() + (bt >= 2).long()
                kept, leaf_gap = _best(nodes, valid, u, K - n_forced)
                gap = torch.minimum(gap, leaf_gap)
                f = torch.stack([torch.zeros_like(bt), bt - 1, bt], 1)
                f_ok = torch.stack([torch.ones_like(bt, dtype=torch.bool), bt >= 2, bt >= 1], 1)
                big = torch.iinfo(torch.int64).max
                every = torch.cat([torch.where(kept >= 0, kept, big),
                                   torch.where(f_ok, f, big)], 1)
                if every.shape[1] < K:  # fewer candidates than K: pad
                    pad = torch.full((n, K - every.shape[1]), big, device=dev)
                    every = torch.cat([every, pad], 1)
                every = torch.sort(every, dim=1).values[:, :K]
                out[b, h, i0:i1] = torch.where(every == big, -1, every).int()
                gaps[b, h, i0:i1] = gap
    return out, gaps
