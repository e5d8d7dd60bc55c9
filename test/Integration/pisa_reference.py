"""An independent NumPy reference of the PISA selection contract.

Written from docs/semantics.md for tests only: it shares no code with the
compiler. Everything is float64. Besides the selection it reports, per
query, the smallest score gap at any top-K boundary it decided, so that a
checker can tell an exact tie (the tie rule must hold) from a near tie
(float32 rounding may legitimately flip it).
"""

import math

import numpy as np


def pyramid_levels(keys, C, g):
    """Level summaries [B, H, M_l, d] for l = 1..L (index 0 is level 1)."""
    B, H, N, d = keys.shape
    k = keys.astype(np.float64)
    m1 = -(-N // C)
    leaves = np.zeros((B, H, m1, d))
    for i in range(m1):
        leaves[:, :, i] = k[:, :, i * C:min((i + 1) * C, N)].mean(axis=2)
    levels = [leaves]
    while levels[-1].shape[2] > 1:
        below = levels[-1]
        m = -(-below.shape[2] // g)
        up = np.zeros((B, H, m, d))
        for i in range(m):
            up[:, :, i] = below[:, :, g * i:min(g * i + g, below.shape[2])].mean(axis=2)
        levels.append(up)
    return levels


def _group_lse(qg, children, scale):
    """sum over heads of logsumexp over children; -inf when no children."""
    if children.shape[0] == 0:
        return -math.inf
    logits = scale * (qg @ children.T)          # [G, n]
    m = logits.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(logits - m).sum(axis=1))
    return float(lse.sum())


def select(q, keys, C, K, g=2, scale=None, offset=0):
    """Returns (selection int32 [B, Hkv, Nq, K], min_gap float64 [B, Hkv, Nq])."""
    B, Hq, Nq, d = q.shape
    _, Hkv, N, _ = keys.shape
    G = Hq // Hkv
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    levels = pyramid_levels(keys, C, g)
    L = len(levels)
    qd = q.astype(np.float64)
    kd = keys.astype(np.float64)
    out = np.full((B, Hkv, Nq, K), -1, dtype=np.int32)
    gaps = np.full((B, Hkv, Nq), math.inf)

    for b in range(B):
        for h in range(Hkv):
            for i in range(Nq):
                t = offset + i
                bt = min(t // C, levels[0].shape[2] - 1)
                qg = qd[b, h * G:(h + 1) * G, i]
                gap = [math.inf]

                def score(level, node):
                    if level == 1:
                        first, last = node * C, min(node * C + C, N)
                        last = min(last, t + 1)
                        return _group_lse(qg, kd[b, h, first:max(first, last)], scale)
                    below = levels[level - 2][b, h]
                    span = C * g ** (level - 2)
                    kids = [r for r in range(g * node, min(g * node + g, below.shape[0]))
                            if r * span <= t]
                    return _group_lse(qg, below[kids], scale)

                def best(level, nodes, slots):
                    u = {n: score(level, n) for n in nodes}
                    ranked = sorted(nodes, key=lambda n: (-u[n], n))
                    if len(ranked) > slots:
                        gap[0] = min(gap[0], u[ranked[slots - 1]] - u[ranked[slots]])
                    return sorted(ranked[:slots])

                A = [0]
                for level in range(L, 1, -1):
                    span = g ** (level - 1)
                    V = [n for n in A if n * span <= bt]
                    kept = V if len(V) <= K else best(level, V, K)
                    size_below = levels[level - 2].shape[2]
                    A = [c for n in kept for c in range(g * n, min(g * n + g, size_below))]
                V = [n for n in A if n <= bt]
                forced = sorted({x for x in (0, bt - 1, bt) if 0 <= x <= bt})
                rest = [n for n in V if n not in forced]
                slots = K - len(forced)
                picked = rest if len(rest) <= slots else best(1, rest, slots)
                chosen = sorted(forced + picked)
                out[b, h, i, :len(chosen)] = chosen
                gaps[b, h, i] = gap[0]
    return out, gaps


def attend(q, keys, values, selection, C, scale=None, offset=0):
    """Block-sparse attention of docs/semantics.md section 6, in float64.

    Returns (output [B, Hq, Nq, dv], lse [B, Hq, Nq]); rows with no key give
    zeros and -inf."""
    B, Hq, Nq, d = q.shape
    _, Hkv, N, dv = values.shape
    G = Hq // Hkv
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    blocks = -(-N // C)
    qd, kd, vd = (a.astype(np.float64) for a in (q, keys, values))
    out = np.zeros((B, Hq, Nq, dv))
    lse = np.full((B, Hq, Nq), -math.inf)
    for b in range(B):
        for kv in range(Hkv):
            for i in range(Nq):
                t = offset + i
                used, last = [], -1
                for s in selection[b, kv, i]:
                    s = int(s)
                    if 0 <= s < blocks and s > last:
                        used.append(s)
                        last = s
                idx = [j for s in used for j in range(s * C, min(s * C + C, N)) if j <= t]
                if not idx:
                    continue
                for h in range(kv * G, (kv + 1) * G):
                    logits = scale * (kd[b, kv, idx] @ qd[b, h, i])
                    m = logits.max()
                    w = np.exp(logits - m)
                    lse[b, h, i] = m + math.log(w.sum())
                    out[b, h, i] = (w / w.sum()) @ vd[b, kv, idx]
    return out, lse


def invalid_rows(selection, N, C, K, offset=0):
    """Rows of a selection [B, Hkv, Nq, K] that break section 3's shape of a
    result, whatever the scores: min(K, b_t + 1) distinct blocks in 0..b_t,
    ascending, the forced set {0, b_t - 1, b_t} included, then -1 padding.
    Returns a boolean array [B, Hkv, Nq]."""
    sel = np.asarray(selection).astype(np.int64)
    Nq = sel.shape[2]
    bt = np.minimum((offset + np.arange(Nq)) // C, -(-N // C) - 1)
    bt = bt[None, None, :, None]
    want = np.minimum(K, bt[..., 0] + 1)
    slot = np.arange(K)
    used = slot < want[..., None]
    bad = np.zeros(sel.shape[:3], dtype=bool)
    bad |= np.any(used & ((sel < 0) | (sel > bt)), axis=-1)
    bad |= np.any(~used & (sel != -1), axis=-1)
    ascending = np.diff(sel, axis=-1) > 0
    bad |= np.any(used[..., 1:] & ~ascending, axis=-1)
    for forced in (np.zeros_like(bt), bt - 1, bt):
        present = np.any(sel == forced, axis=-1)
        bad |= (forced[..., 0] >= 0) & ~present
    return bad


def attended_mask(selection, N, C, Nq, offset=0):
    """[B, Hkv, Nq, N] booleans: the keys each query attends (docs/
    semantics.md section 6: entries used in order, causal, below N)."""
    B, Hkv = selection.shape[:2]
    blocks = -(-N // C)
    mask = np.zeros((B, Hkv, Nq, N), dtype=bool)
    for b in range(B):
        for kv in range(Hkv):
            for i in range(Nq):
                last = -1
                for s in selection[b, kv, i]:
                    s = int(s)
                    if 0 <= s < blocks and s > last:
                        mask[b, kv, i, s * C:min(s * C + C, N)] = True
                        last = s
                mask[b, kv, i, offset + i + 1:] = False
    return mask


def attend_grad(q, keys, values, selection, grad_out, C, scale=None, offset=0,
                out=None, magnitude=False):
    """The gradients (dq, dk, dv) of docs/semantics.md section 6.1, in
    float64, as dense masked matrices: P = softmax(scale Q K^T) over the
    attended keys, dP = dO V^T, dS = P (dP - D), dQ = scale dS K,
    dK = scale dS^T Q and dV = P^T dO, summed over each KV head's G query
    heads. D is rowsum(dO o) with `out` as o when it is given (the op's
    operand, as the program stored it), else the exact rowsum(P dP). With
    `magnitude`, the same sums over the terms' absolute values (dS = P
    (|dP| + |D|), |k|, |q|, |dO|): the scale a gradient's rounding error
    compares with where its terms cancel."""
    B, Hq, Nq, d = q.shape
    _, Hkv, N, dv = values.shape
    G = Hq // Hkv
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    qd, kd, vd, dod = (a.astype(np.float64) for a in (q, keys, values, grad_out))
    mask = attended_mask(selection, N, C, Nq, offset)
    dq = np.zeros((B, Hq, Nq, d))
    dk = np.zeros((B, Hkv, N, d))
    dvv = np.zeros((B, Hkv, N, dv))
    for b in range(B):
        for h in range(Hq):
            kv = h // G
            m = mask[b, kv]
            s = np.where(m, scale * qd[b, h] @ kd[b, kv].T, -np.inf)
            rowmax = np.where(m.any(1), s.max(1), 0.0)
            p = np.where(m, np.exp(s - rowmax[:, None]), 0.0)
            total = p.sum(1)
            p = p / np.where(total > 0, total, 1.0)[:, None]
            dp = dod[b, h] @ vd[b, kv].T
            if out is None:
                rows = (p * dp).sum(1)
            else:
                rows = (dod[b, h] * out[b, h].astype(np.float64)).sum(1)
            ds = p * (dp - rows[:, None])
            k_, q_, do_ = kd[b, kv], qd[b, h], dod[b, h]
            if magnitude:
                ds = p * (np.abs(dp) + np.abs(rows)[:, None])
                k_, q_, do_ = np.abs(k_), np.abs(q_), np.abs(do_)
            dq[b, h] = scale * ds @ k_
            dk[b, kv] += scale * ds.T @ q_
            dvv[b, kv] += p.T @ do_
    return dq, dk, dvv
