"""How much of attention a block selection keeps: the paper's quality
diagnostic, on the GPU with PyTorch.

For queries q [B, Hq, Nq, d] at positions offset .. offset + Nq - 1 and
keys k [B, Hkv, N, d], and a selection [B, Hkv, Nq, K] of leaf blocks of
C keys (-1 padding), per query:

- **mass**: the share of each query head's full causal softmax mass
  (over keys j <= t) that the selected blocks hold, averaged over the G
  heads of the group;
- **recall@K**: the share of the exact top-K blocks by leaf LSE score
  (u_s = sum over the G heads of log sum over keys j <= t of block s of
  exp(scale q . k_j), the score PISA's walk approximates; the same forced
  blocks {0, b_t - 1, b_t} as the selection, the rest by score) that the
  selection holds.

The same two numbers are reported for a **flat mean-summary selector**
(choice, written here as the paper's baseline): every causal block
scored by sum over the G heads of scale q . mean(k in block), the forced
blocks plus the best K - |forced| of the rest.

    python3 -m pisa.quality LIB.so [--entry select] [--n 16384] [--queries 512]

draws Gaussian (or --inputs hot) q and k in the paper setting, selects
with the library's entry (q, k, offset) -> selection, and prints JSON.
From Python: `diagnose(q, k, selection, C, K)` returns the per-query
tensors and their means.
"""

import argparse
import json
import math
import sys

import torch


def forced_blocks(t, C):
    """[n, 3] the forced blocks {0, b_t - 1, b_t} of positions t (-1 where
    one does not exist or repeats)."""
    bt = t // C
    forced = torch.stack([torch.zeros_like(bt), bt - 1, bt], -1)
    forced[:, 1] = torch.where(bt >= 2, forced[:, 1], -1)
    forced[:, 2] = torch.where(bt >= 1, forced[:, 2], -1)
    return forced


def top_blocks(scores, t, C, K):
    """[n, K] blocks, ascending and -1 padded as hier_topk writes them: the
    forced ones and the best of the other causal blocks by `scores` [n, nb]
    (ties to the lower index)."""
    n, nb = scores.shape
    blocks = torch.arange(nb, device=scores.device)
    forced = forced_blocks(t, C)
    is_forced = (blocks[None, :, None] == forced[:, None, :]).any(-1)
    causal = blocks[None, :] * C <= t[:, None]
    ranked = scores.masked_fill(~causal | is_forced, -math.inf)
    slots = K - (forced >= 0).sum(-1)
    # At most K of the nb blocks (K may exceed them: then every one).
    kk = min(K, nb)
    order = torch.sort(ranked, dim=-1, descending=True, stable=True).indices[:, :kk]
    take = (torch.arange(kk, device=scores.device)[None, :] < slots[:, None]) & \
        torch.isfinite(torch.gather(ranked, 1, order))
    chosen = torch.where(take, order, -1)
    both = torch.cat([forced, chosen], -1)
    big = torch.iinfo(both.dtype).max
    both = torch.where(both < 0, big, both)
    if both.shape[1] < K:  # (torch's pad would round `big` through a float)
        both = torch.cat([both, torch.full((n, K - both.shape[1]), big,
                                           dtype=both.dtype, device=both.device)], -1)
    both = torch.sort(both, -1).values[:, :K]
    return torch.where(both == big, -1, both)


def _membership(selection, nb):
    """[..., nb] bool: which blocks a row of `selection` names."""
    sel = selection.long()
    valid = (sel >= 0) & (sel < nb)
    hit = torch.zeros(*sel.shape[:-1], nb + 1, dtype=torch.bool, device=sel.device)
    hit.scatter_(-1, torch.where(valid, sel, nb), True)
    return hit[..., :nb]


def diagnose(q, k, selection, C, K, scale=None, offset=0, rows=None):
    """Per-query mass and recall@K of `selection` and of the flat selector,
    for the query indices `rows` (all when None), in float64."""
    B, Hq, Nq, d = q.shape
    Hkv, N = k.shape[1], k.shape[2]
    G = Hq // Hkv
    nb = -(-N // C)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    rows = torch.arange(Nq, device=q.device) if rows is None else rows
    kd = k.double()
    padded = torch.zeros(B, Hkv, nb * C, d, dtype=torch.float64, device=k.device)
    padded[:, :, :N] = kd
    counts = (N - torch.arange(nb, device=k.device) * C).clamp(max=C).double()
    means = padded.view(B, Hkv, nb, C, d).sum(3) / counts[:, None]
    key = torch.arange(N, device=q.device)
    out = {"pisa_mass": [], "flat_mass": [], "pisa_recall": [], "flat_recall": []}
    exacts = []
    for b in range(B):
        for kv in range(Hkv):
            qg = q[b, kv * G:(kv + 1) * G, rows].double()          # [G, n, d]
            t = offset + rows
            logits = scale * torch.einsum("gnd,jd->gnj", qg, kd[b, kv])
            logits = logits.masked_fill(key[None, None, :] > t[None, :, None], -math.inf)
            full = torch.logsumexp(logits, -1)                       # [G, n]
            padded_logits = torch.full((G, len(rows), nb * C), -math.inf,
                                       dtype=torch.float64, device=q.device)
            padded_logits[..., :N] = logits
            block_lse = torch.logsumexp(padded_logits.view(G, len(rows), nb, C), -1)
            block_mass = torch.exp(block_lse - full[..., None])      # [G, n, nb]
            exact = top_blocks(block_lse.sum(0), t, C, K)
            exacts.append(exact)
            # Summed over the G heads by the einsum: [n, nb].
            flat_scores = scale * torch.einsum("gnd,sd->ns", qg, means[b, kv])
            flat = top_blocks(flat_scores, t, C, K)
            truth = _membership(exact, nb)
            for name, sel in (("pisa", selection[b, kv, rows]), ("flat", flat)):
                member = _membership(sel, nb)
                mass = (block_mass * member[None]).sum(-1).mean(0)
                recall = (member & truth).sum(-1) / truth.sum(-1).clamp(min=1)
                out[f"{name}_mass"].append(mass)
                out[f"{name}_recall"].append(recall.double())
    per_query = {name: torch.cat(v) for name, v in out.items()}
    summary = {name: float(v.mean()) for name, v in per_query.items()}
    # The exact top blocks ([B * Hkv * n, K + 3]: forced, then chosen),
    # e.g. to check the diagnostic itself (its recall is 1).
    per_query["exact"] = torch.cat(exacts)
    return per_query, summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("library", help="an AOT library with a selection entry")
    parser.add_argument("--entry", default="select",
                        help="(q [B, Hq, ?, d], k [B, Hkv, ?, d], offset) -> selection")
    parser.add_argument("--n", type=int, nargs="+", default=[4096, 16384])
    parser.add_argument("--heads", type=int, default=16, help="G (Hkv = 1)")
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--block-size", type=int, default=64)
    parser.add_argument("--topk", type=int, default=8)
    parser.add_argument("--queries", type=int, default=512,
                        help="query positions sampled per length")
    parser.add_argument("--inputs", choices=("gaussian", "hot"), default="gaussian")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from pisa import aot

    lib = aot.Library(args.library)
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    results = []
    for n in args.n:
        q = torch.randn(1, args.heads, n, args.head_dim, device="cuda", generator=gen)
        k = torch.randn(1, 1, n, args.head_dim, device="cuda", generator=gen)
        if args.inputs == "hot":
            # Mostly small keys and a few large ones per block (sinks).
            k *= 0.1
            hot = torch.randint(0, n, (max(1, 2 * n // args.block_size),), device="cuda",
                                generator=gen)
            k[:, :, hot] = 3.0 * torch.randn(1, 1, len(hot), args.head_dim,
                                             device="cuda", generator=gen)
        q, k = q.bfloat16(), k.bfloat16()
        selection = lib(args.entry, q, k, 0)
        rows = torch.randperm(n, device="cuda", generator=gen)[:args.queries].sort().values
        _, summary = diagnose(q, k, selection, args.block_size, args.topk, rows=rows)
        results.append({"N": n, "inputs": args.inputs, "queries": len(rows), **summary})
        print(json.dumps(results[-1]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
