"""Compares `pisa-run select` with the NumPy reference on fresh random inputs.

Each case draws new inputs (the seed is printed, --seed reproduces a run),
runs pisa-run, and compares every selected row with pisa_reference.select.
A differing row passes only when the reference itself saw a near tie
(0 < score gap < TOL) at one of its top-K boundaries for that query:
float32 rounding may flip those. Exact ties (gap 0) must follow the tie
rule, lower index first, and are never excused.
"""

import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import pisa_reference  # noqa: E402

TOL = 5e-3

# name: B, Hkv, G, N, d, C, K, g, dtype, (offset, Nq) or None, ties
CASES = {
    "n1":             (1, 1, 1, 1, 4, 64, 3, 2, "f32", None, False),
    "n_c_minus_1":    (1, 1, 3, 63, 64, 64, 8, 2, "f16", None, False),
    "n_c":            (1, 1, 16, 64, 128, 64, 8, 2, "f32", None, False),
    "n_c_plus_1":     (1, 1, 1, 65, 64, 64, 3, 4, "f32", None, False),
    "hundreds_gqa":   (2, 2, 3, 300, 64, 8, 8, 2, "f32", None, False),
    "k_over_blocks":  (1, 1, 16, 300, 4, 8, 100, 4, "f16", None, False),
    "c1":             (1, 1, 1, 200, 4, 1, 3, 2, "f32", None, False),
    "c1_g4":          (1, 2, 3, 50, 64, 1, 8, 4, "f16", None, False),
    "thousands_g4":   (1, 1, 3, 3000, 64, 8, 8, 4, "f32", None, False),
    "paper_f16":      (1, 1, 16, 2048, 128, 64, 8, 2, "f16", None, False),
    "offset_chunk":   (1, 1, 16, 1000, 64, 64, 4, 2, "f32", (990, 10), False),
    "offset_decode":  (1, 2, 3, 777, 64, 8, 8, 2, "f16", (776, 1), False),
    "ties":           (1, 1, 3, 512, 64, 8, 8, 2, "f32", None, True),
    "ties_f16_g4":    (1, 1, 1, 1024, 16, 8, 5, 4, "f16", None, True),
}


def make_inputs(rng, B, Hkv, G, N, d, C, dtype, window, ties):
    np_dtype = np.float16 if dtype == "f16" else np.float32
    offset, nq = window if window else (0, N)
    q = rng.standard_normal((B, Hkv * G, nq, d)).astype(np_dtype)
    if ties:
        # Every leaf block holds the same keys, in steps of 1/8 so that block
        # sums and means are exact: all complete blocks and pyramid nodes
        # score exactly alike, and only the tie rule decides.
        base = rng.integers(-16, 17, size=(C, d)) / 8.0
        k = np.broadcast_to(base[np.arange(N) % C], (B, Hkv, N, d)).astype(np_dtype)
    else:
        k = rng.standard_normal((B, Hkv, N, d)).astype(np_dtype)
    return q, np.ascontiguousarray(k), offset


def run_case(name, pisa_run, workdir, seed, extra=()):
    B, Hkv, G, N, d, C, K, g, dtype, window, ties = CASES[name]
    rng = np.random.default_rng(seed)
    q, k, offset = make_inputs(rng, B, Hkv, G, N, d, C, dtype, window, ties)
    qp, kp, op = (os.path.join(workdir, f"{name}.{s}.npy") for s in ("q", "k", "out"))
    # --token-major: the same problem passed as [B, T, H, d] (and read back).
    token_major = "--token-major" in extra
    swap = (lambda a: np.ascontiguousarray(a.transpose(0, 2, 1, 3))) if token_major else (lambda a: a)
    np.save(qp, swap(q))
    np.save(kp, swap(k))
    cmd = [pisa_run, "select", "--q", qp, "--k", kp, "--block-size", str(C),
           "--topk", str(K), "--branching", str(g), "--query-offset", str(offset),
           "--out", op, *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"FAIL {name}: pisa-run exited {proc.returncode}: {proc.stderr.strip()}")
        return False
    got = swap(np.load(op))
    want, gaps = pisa_reference.select(q, k, C, K, g, offset=offset)
    if got.shape != want.shape or got.dtype != np.int32:
        print(f"FAIL {name}: got {got.dtype}{got.shape}, want int32{want.shape}")
        return False
    differs, excused, wrong = harness.near_tie_rule(got, want, gaps, TOL)
    rows = differs.size
    worst = float(gaps[excused].min()) if excused.any() else None
    if wrong.any():
        b, h, i = np.argwhere(wrong)[0]
        print(f"FAIL {name}: {int(wrong.sum())}/{rows} rows differ beyond near ties; "
              f"first at b={b} h={h} i={i}: got {got[b, h, i].tolist()} "
              f"want {want[b, h, i].tolist()} (reference gap {gaps[b, h, i]:.3g})")
        return False
    note = f", {int(excused.sum())} near-tie rows (smallest gap {worst:.2g})" if worst else ""
    exact = int((gaps == 0).sum())
    print(f"ok   {name}: {rows} rows equal{note}; {exact} rows decided by exact ties")
    return True


def main():
    return harness.run_cases(__doc__, CASES, run_case, static_shapes=True,
                             token_major=True)


if __name__ == "__main__":
    sys.exit(main())
