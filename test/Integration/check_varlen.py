"""Compares `pisa-run select --cu-seqlens-q/k` (a packed batch of variable
lengths, docs/semantics.md section 7) with the NumPy reference of the
batched contract, sequence by sequence, on fresh random inputs.

Batches are drawn from the seed (printed; --seed reproduces a run) over the
supported space: B in 0..5, per-sequence lengths mixing 0, 1, C - 1, C,
C + 1 and hundreds, queries per sequence all (prefill), one (decode), a
chunk or none, G, Hkv, d, C, K >= blocks, g, f32 and f16. Sequence b's
Nq_b queries sit at positions N_b - Nq_b .. N_b - 1. A differing row passes
only at a near tie of the reference (0 < gap < TOL), as in check_select.
"""

import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import pisa_reference  # noqa: E402

TOL = 5e-3
# Named batches: regressions and edges first, then drawn ones.
CASES = ["edges", "empty_batch", "all_decode", "mixed_ties"] + \
        [f"drawn{i}" for i in range(8)]


def draw_batch(rng, name):
    """(lengths N_b, query counts Nq_b, config) of a named case."""
    C = int(rng.choice([1, 4, 8, 16, 64]))
    cfg = {"C": C, "K": int(rng.choice([3, 5, 8, 40])), "g": int(rng.choice([2, 3, 4])),
           "Hkv": int(rng.choice([1, 2])), "G": int(rng.choice([1, 3, 4])),
           "d": int(rng.choice([4, 16, 64])), "dtype": str(rng.choice(["f32", "f16"])),
           "ties": False}
    if name == "edges":
        cfg.update(C=8, K=4, g=2)
        lengths = [0, 1, 7, 8, 9, 300]
        queries = [0, 1, 7, 1, 5, 300]
    elif name == "empty_batch":
        lengths, queries = [], []
    elif name == "all_decode":
        lengths = [int(x) for x in rng.integers(1, 600, size=4)]
        queries = [1] * 4
    elif name == "mixed_ties":
        cfg.update(ties=True, dtype="f32")
        lengths = [int(x) for x in rng.integers(1, 400, size=3)]
        queries = [n for n in lengths]
    else:
        B = int(rng.integers(1, 6))
        pool = [0, 1, max(C - 1, 1), C, C + 1]
        lengths = [int(rng.choice(pool)) if rng.random() < 0.4 else int(rng.integers(1, 700))
                   for _ in range(B)]
        queries = []
        for n in lengths:
            kind = rng.choice(4, p=[0.4, 0.25, 0.25, 0.1])
            queries.append(n if kind == 0 else min(n, 1) if kind == 1 else
                           int(rng.integers(0, n + 1)) if kind == 2 else 0)
    return lengths, queries, cfg


def packed(rng, lengths, heads, d, np_dtype, ties, C):
    rows = sum(lengths)
    if ties:
        # Every leaf block holds the same keys, exact in f32: only the tie
        # rule decides (as check_select's ties cases).
        base = rng.integers(-16, 17, size=(C, heads, d)) / 8.0
        parts = [base[np.arange(n) % C] for n in lengths]
        x = np.concatenate(parts) if parts else np.zeros((0, heads, d))
    else:
        x = rng.standard_normal((rows, heads, d))
    return np.ascontiguousarray(x.reshape(rows, heads, d).astype(np_dtype))


def cu(counts):
    return np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int32)


def run_case(name, pisa_run, workdir, seed, extra=()):
    rng = np.random.default_rng([seed, CASES.index(name)])
    lengths, queries, cfg = draw_batch(rng, name)
    C, K, g, G, Hkv, d = (cfg[x] for x in ("C", "K", "g", "G", "Hkv", "d"))
    np_dtype = np.float16 if cfg["dtype"] == "f16" else np.float32
    k = packed(rng, lengths, Hkv, d, np_dtype, cfg["ties"], C)
    q = packed(rng, queries, Hkv * G, d, np_dtype, False, C)
    cuq, cuk = cu(queries), cu(lengths)
    paths = {s: os.path.join(workdir, f"{name}.{s}.npy") for s in ("q", "k", "cuq", "cuk", "out")}
    for s, a in (("q", q), ("k", k), ("cuq", cuq), ("cuk", cuk)):
        np.save(paths[s], a)
    cmd = [pisa_run, "select", "--q", paths["q"], "--k", paths["k"],
           "--cu-seqlens-q", paths["cuq"], "--cu-seqlens-k", paths["cuk"],
           "--block-size", str(C), "--topk", str(K), "--branching", str(g),
           "--out", paths["out"], *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"FAIL {name}: pisa-run exited {proc.returncode}: {proc.stderr.strip()}")
        return False
    got = np.load(paths["out"])
    if got.shape != (q.shape[0], Hkv, K) or got.dtype != np.int32:
        print(f"FAIL {name}: got {got.dtype}{got.shape}, want int32{(q.shape[0], Hkv, K)}")
        return False
    rows = differ = near = exact = 0
    for b, (n, nq) in enumerate(zip(lengths, queries)):
        if nq == 0:
            continue
        qb = q[cuq[b]:cuq[b + 1]].transpose(1, 0, 2)[None]
        kb = k[cuk[b]:cuk[b + 1]].transpose(1, 0, 2)[None]
        want, gaps = pisa_reference.select(qb, kb, C, K, g, offset=n - nq)
        mine = got[cuq[b]:cuq[b + 1]].transpose(1, 0, 2)[None]
        differs, excused, wrong = harness.near_tie_rule(mine, want, gaps, TOL)
        rows += differs.size
        differ += int(differs.sum())
        near += int(excused.sum())
        exact += int((gaps == 0).sum())
        if wrong.any():
            _, h, i = np.argwhere(wrong)[0]
            print(f"FAIL {name}: sequence {b} (N={n}, Nq={nq}) query {i} head {h}: "
                  f"got {mine[0, h, i].tolist()} want {want[0, h, i].tolist()} "
                  f"(reference gap {gaps[0, h, i]:.3g})")
            return False
    print(f"ok   {name}: B={len(lengths)} C={C} K={K} g={g} G={G} Hkv={Hkv} d={d} "
          f"{cfg['dtype']}: {rows} rows equal ({near} near-tie rows); {exact} rows "
          f"decided by exact ties")
    return True


def main():
    return harness.run_cases(__doc__, CASES, run_case, static_shapes=False)


if __name__ == "__main__":
    sys.exit(main())
