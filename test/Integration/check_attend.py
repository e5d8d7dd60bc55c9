"""Compares `pisa-run attend` with the NumPy references on fresh random inputs.

Per case: the selection pisa-run returns is checked against
pisa_reference.select (differences only at near ties), and the output and
log-sum-exp against pisa_reference.attend over that same selection, so that
attention is checked independently of selection ties. Cases with
--selection-in give crafted selections (-1 padding, out-of-range entries,
duplicates, unsorted rows, empty rows) to the attention op alone.
Tolerances: f32 output 1e-4 absolute, f16 output 5e-3 absolute (it is
rounded to f16), lse 1e-4 * (1 + |lse|) (accumulated in f32 from inputs
that are exact in float64).
"""

import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import pisa_reference  # noqa: E402

TIE_TOL = 5e-3

# name: B, Hkv, G, N, d, dv, C, K, g, dtype, (offset, Nq) or None, crafted
CASES = {
    "n1":           (1, 1, 1, 1, 8, 8, 16, 3, 2, "f32", None, False),
    "n_lt_c":       (1, 2, 3, 13, 16, 24, 16, 4, 2, "f32", None, False),
    "n_c_plus_1":   (2, 1, 2, 65, 32, 16, 64, 3, 2, "f16", None, False),
    "k_over_blocks": (1, 1, 4, 100, 16, 16, 8, 40, 4, "f32", None, False),
    "gqa_hundreds": (2, 2, 4, 700, 32, 32, 16, 6, 2, "f32", None, False),
    "g1_f16":       (1, 3, 1, 500, 64, 32, 32, 5, 3, "f16", None, False),
    "chunk":        (1, 2, 2, 900, 16, 16, 32, 6, 2, "f32", (850, 50), False),
    "decode":       (2, 1, 8, 777, 32, 64, 16, 8, 2, "f16", (776, 1), False),
    "crafted":      (2, 2, 2, 200, 16, 8, 16, 6, 2, "f32", None, True),
    "crafted_f16":  (1, 1, 3, 130, 32, 16, 32, 5, 2, "f16", (30, 100), True),
}


def crafted_selection(rng, B, Hkv, Nq, K, blocks):
    """Rows of every kind the contract names: valid ascending, -1 padded,
    out of range, duplicated, unsorted, empty."""
    sel = rng.integers(-3, blocks + 3, size=(B, Hkv, Nq, K)).astype(np.int32)
    sel[..., 0, :] = -1                                    # empty row
    if Nq > 1:
        sel[..., 1, :] = np.sort(sel[..., 1, :])           # ascending
    if Nq > 2:
        sel[..., 2, :] = min(1, blocks - 1)                # duplicates
    return sel


def run_case(name, pisa_run, work, seed, extra=()):
    B, Hkv, G, N, d, dv, C, K, g, dtype, window, crafted = CASES[name]
    rng = np.random.default_rng([seed, len(name)])
    np_dtype = np.float16 if dtype == "f16" else np.float32
    offset, nq = window if window else (0, N)
    q = rng.standard_normal((B, Hkv * G, nq, d)).astype(np_dtype)
    k = rng.standard_normal((B, Hkv, N, d)).astype(np_dtype)
    v = rng.standard_normal((B, Hkv, N, dv)).astype(np_dtype)
    paths = {x: os.path.join(work, f"{name}.{x}.npy") for x in ("q", "k", "v", "o", "l", "s")}
    for x, a in (("q", q), ("k", k), ("v", v)):
        np.save(paths[x], a)
    cmd = [pisa_run, "attend", "--q", paths["q"], "--k", paths["k"], "--v", paths["v"],
           "--block-size", str(C), "--topk", str(K), "--branching", str(g),
           "--query-offset", str(offset), "--out", paths["o"], "--lse-out", paths["l"]]
    if crafted:
        sel = crafted_selection(rng, B, Hkv, nq, K, -(-N // C))
        np.save(paths["s"], sel)
        cmd += ["--selection-in", paths["s"]]
    else:
        cmd += ["--selection-out", paths["s"]]
    proc = subprocess.run(cmd + list(extra), capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"FAIL {name}: pisa-run exited {proc.returncode}: {proc.stderr.strip()}")
        return False
    o, lse, sel = (np.load(paths[x]) for x in ("o", "l", "s"))
    problems = []
    if not crafted:
        want, gaps = pisa_reference.select(q, k, C, K, g, offset=offset)
        differs = (sel != want).any(-1)
        if (differs & ~((gaps > 0) & (gaps < TIE_TOL))).any():
            problems.append(f"selection differs beyond near ties in {int(differs.sum())} rows")
    want_o, want_lse = pisa_reference.attend(q, k, v, sel, C, offset=offset)
    o_tol = 5e-3 if dtype == "f16" else 1e-4
    if o.shape != want_o.shape or not np.all(np.abs(o - want_o) <= o_tol):
        problems.append(f"output off by {np.abs(o - want_o).max():.3g} (tol {o_tol})")
    finite = np.isfinite(want_lse)
    if not np.array_equal(np.isfinite(lse), finite):
        problems.append("lse -inf rows differ")
    elif not np.all(np.abs(lse[finite] - want_lse[finite]) <= 1e-4 * (1 + np.abs(want_lse[finite]))):
        problems.append(f"lse off by {np.abs(lse[finite] - want_lse[finite]).max():.3g}")
    empty_rows = int((~finite).sum())
    if empty_rows and not np.all(o[~finite] == 0):
        problems.append("an empty row is not zero")
    status = "ok  " if not problems else "FAIL"
    print(f"{status} {name}: {o.size // dv} rows, {empty_rows} empty"
          + ("" if not problems else ": " + "; ".join(problems)))
    return not problems


def main():
    return harness.run_cases(__doc__, CASES, run_case, static_shapes=True)


if __name__ == "__main__":
    sys.exit(main())
