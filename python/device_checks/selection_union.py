"""How many distinct blocks a tile of consecutive queries attends: the
measure behind attention on shared query tiles (a tile of Q_tile queries x
G heads attends the union of its queries' blocks, each block read once per
tile instead of once per query).

  python3 -m device_checks.selection_union SELECTIONS.npz [--block-size 64]

Each array of the .npz is a selection [T, Hkv, K] of queries at positions
0..T-1 (python/training/retrieval_lm.py run --only pisa --dump-selections
writes one per layer of a trained model and one of random inputs). Entries
count as docs/semantics.md section 6 says (in order, in range, increasing),
and a block only when it starts at or before the query. For each Q_tile,
prints the mean number of distinct blocks per tile and KV head, and that
over Q_tile x K: the share of the per-query gather's block reads a tile
kernel would make.
"""

import argparse
import sys

import numpy as np


def used(sel, block_size):
    """[T, Hkv, K] bool: the entries attention uses."""
    T = sel.shape[0]
    nb = -(-T // block_size)
    out = np.zeros(sel.shape, dtype=bool)
    last = np.full(sel.shape[:-1], -1, dtype=np.int64)
    t = np.arange(T)[:, None]
    for e in range(sel.shape[-1]):
        s = sel[..., e].astype(np.int64)
        u = (s >= 0) & (s < nb) & (s > last) & (s * block_size <= t)
        out[..., e] = u
        last = np.where(u, s, last)
    return out


def union_sizes(sel, block_size, tile):
    """Mean distinct blocks per tile of `tile` consecutive queries (per KV
    head), and the mean blocks per query."""
    T, Hkv, K = sel.shape
    mask = used(sel, block_size)
    per_query = mask.sum(-1).mean()
    n = T // tile * tile
    blocks = np.where(mask, sel, -1)[:n].reshape(n // tile, tile, Hkv, K)
    blocks = blocks.transpose(0, 2, 1, 3).reshape(n // tile, Hkv, tile * K)
    blocks = np.sort(blocks, -1)
    distinct = (np.diff(blocks, axis=-1) != 0) & (blocks[..., 1:] >= 0)
    count = distinct.sum(-1) + (blocks[..., 0] >= 0)
    return float(count.mean()), float(per_query)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("selections")
    ap.add_argument("--block-size", type=int, default=64)
    ap.add_argument("--tiles", type=int, nargs="*", default=[1, 2, 4, 8, 16, 32])
    args = ap.parse_args(argv)
    data = np.load(args.selections)
    print("| selection | blocks / query | " + " | ".join(
        f"Q_tile {t}: union (share)" for t in args.tiles) + " |")
    print("|---|---|" + "---|" * len(args.tiles))
    for name in data.files:
        sel = data[name]
        cells = []
        per_query = 0.0
        for t in args.tiles:
            union, per_query = union_sizes(sel, args.block_size, t)
            cells.append(f"{union:.1f} ({union / (t * per_query):.2f})")
        print(f"| {name} (T = {sel.shape[0]}) | {per_query:.2f} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
