"""`pisa-run select` on finite inputs whose scaled products overflow f32
(entries near 1e19, so q . k is inf and the LSE inf - inf = NaN): every
row must still be a valid selection (pisa_reference.invalid_rows), with NaN
scores ranked as -inf (docs/semantics.md section 3). Before that rule, NaN
ranks kept more than K nodes and wrote past the arrays holding them, which
corrupted pisa-run's heap."""

import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import pisa_reference  # noqa: E402

# name: B, Hkv, G, N, d, C, K, g, dtype, magnitude
CASES = {
    "all_overflow":   (1, 2, 2, 300, 32, 8, 6, 2, "f32", 1e19),
    "some_overflow":  (2, 1, 3, 700, 16, 4, 5, 3, "f32", None),
    "huge_f16_logits": (1, 1, 4, 500, 64, 8, 8, 2, "f16", 2e4),
}


def run_case(name, pisa_run, workdir, seed, extra=()):
    B, Hkv, G, N, d, C, K, g, dtype, magnitude = CASES[name]
    rng = np.random.default_rng(seed)
    np_dtype = np.float16 if dtype == "f16" else np.float32
    q = rng.standard_normal((B, Hkv * G, N, d))
    k = rng.standard_normal((B, Hkv, N, d))
    if magnitude is None:
        # Huge keys in a few random blocks only: NaN scores beside finite ones.
        for blk in rng.choice(-(-N // C), size=5, replace=False):
            k[:, :, blk * C:(blk + 1) * C] *= 1e19
            q[:, :, blk * C:(blk + 1) * C] *= 1e19
    else:
        q, k = q * magnitude, k * magnitude
    limit = np.finfo(np_dtype).max
    q, k = (np.clip(x, -limit, limit).astype(np_dtype) for x in (q, k))
    paths = [os.path.join(workdir, f"{x}.npy") for x in ("q", "k", "s")]
    np.save(paths[0], q)
    np.save(paths[1], k)
    try:
        # A corrupted heap made pisa-run hang at exit: bounded here.
        r = subprocess.run([pisa_run, "select", "--q", paths[0], "--k", paths[1],
                            "--block-size", str(C), "--topk", str(K),
                            "--branching", str(g), "--out", paths[2], *extra],
                           capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        print(f"FAIL {name}: pisa-run did not finish in 60 s")
        return False
    if r.returncode != 0:
        print(f"FAIL {name}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
        return False
    bad = pisa_reference.invalid_rows(np.load(paths[2]), N, C, K)
    print(f"{'ok  ' if not bad.any() else 'FAIL'} {name}: {bad.size} rows, "
          f"{int(bad.sum())} invalid")
    return not bad.any()


if __name__ == "__main__":
    sys.exit(harness.run_cases(__doc__, CASES, run_case))
