"""Checks `pisa-run attend --grad-out` (pisa.sparse_attention_grad on the
CPU) against float64 references on configurations drawn from a seed.

Each drawn configuration (B, Hkv, G, N, d, dv, C, K, g, f32 or f16, a
prefill, a chunk or a decode window, and in about a third of them a crafted
selection: -1 padding, out-of-range, duplicated and unsorted entries, empty
rows) runs the forward and the backward as one program on fresh Gaussian
inputs; dq, dk and dv are compared with pisa_reference.attend_grad (dense
masked matrices in float64) over the selection the program used. The
reference itself is checked first against central finite differences of
L = sum(dO * o) through pisa_reference.attend. The comparison takes
D = rowsum(dO o) from the output o the program stored, as the op does: an
f16 o is rounded, and against D from the exact P the error of dS = P (dP - D)
has no bound relative to dS where dP is close to D. Pass rule: the relative
Frobenius error of each gradient at most 1e-4 (relative to 1% of the
gradient of the terms' absolute values where that is larger: with one key
the exact dq and dk are 0 and both sides rounding noise). Bad input (dO of another shape or type,
a gradient output without dO, a gradient output that is an input) must
exit 2, change no file and write nothing.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pisa_reference  # noqa: E402
from check_attend import crafted_selection  # noqa: E402

TOLERANCE = 1e-4


def draw(rng):
    """One configuration of the supported space, edge cases often."""
    C = int(rng.choice([1, 2, 3, 4, 7, 8, 16, 32]))
    N = int(rng.choice([1, max(1, C - 1), C, C + 1, int(rng.integers(2, 6 * C + 3)),
                        int(rng.integers(2, 200)), int(rng.integers(2, 200))]))
    blocks = -(-N // C)
    K = int(rng.choice([3, 4, 5, blocks, blocks + 2]))
    K = max(3, K)
    window = str(rng.choice(["prefill", "chunk", "decode"]))
    if window == "prefill" or N == 1:
        offset, nq = 0, N
    elif window == "decode":
        offset, nq = N - 1, 1
    else:
        nq = int(rng.integers(1, N + 1))
        offset = int(rng.integers(0, N - nq + 1))
    return dict(B=int(rng.integers(1, 3)), Hkv=int(rng.integers(1, 4)),
                G=int(rng.choice([1, 2, 3, 4, 8])), N=N, d=int(rng.choice([1, 4, 8, 16, 24, 32])),
                dv=int(rng.choice([1, 3, 8, 16])), C=C, K=K, g=int(rng.choice([2, 3, 4])),
                dtype=str(rng.choice(["f32", "f16"])), offset=offset, nq=nq,
                crafted=bool(rng.random() < 0.35))


def rel_error(got, want, magnitude=None):
    """|got - want| / |want| (Frobenius), or over 1% of |magnitude| (the
    gradient of the terms' absolute values) where the terms cancel: with
    one key, dS = P (dP - D) is rounding noise around 0."""
    norm = np.linalg.norm(want)
    if magnitude is not None:
        norm = max(norm, 1e-2 * np.linalg.norm(magnitude))
    return np.linalg.norm(got - want) / (norm if norm > 0 else 1.0)


def check_reference(seed):
    """attend_grad against central differences of sum(dO * attend(...))."""
    rng = np.random.default_rng([seed, 1])
    B, Hkv, G, N, d, dv, C, K = 1, 2, 2, 11, 5, 3, 3, 3
    q = rng.standard_normal((B, Hkv * G, N, d))
    k = rng.standard_normal((B, Hkv, N, d))
    v = rng.standard_normal((B, Hkv, N, dv))
    do = rng.standard_normal((B, Hkv * G, N, dv))
    sel = crafted_selection(rng, B, Hkv, N, K, -(-N // C))
    sel[..., 3:, :] = np.sort(rng.integers(0, -(-N // C), size=(B, Hkv, N - 3, K)), -1)
    loss = lambda q, k, v: float((do * pisa_reference.attend(q, k, v, sel, C)[0]).sum())
    grads = pisa_reference.attend_grad(q, k, v, sel, do, C)
    worst = 0.0
    for which, (x, g) in enumerate(zip((q, k, v), grads)):
        for flat in rng.choice(x.size, size=min(x.size, 30), replace=False):
            idx = np.unravel_index(flat, x.shape)
            args = [q, k, v]
            plus, minus = x.copy(), x.copy()
            plus[idx] += 1e-6
            minus[idx] -= 1e-6
            args[which] = plus
            up = loss(*args)
            args[which] = minus
            numeric = (up - loss(*args)) / 2e-6
            worst = max(worst, abs(numeric - g[idx]) / (1.0 + abs(numeric)))
    ok = worst < 1e-6
    print(f"{'ok  ' if ok else 'FAIL'} reference: attend_grad vs finite differences, "
          f"largest error {worst:.1e}")
    return ok


def run_case(name, cfg, pisa_run, work, seed, extra):
    rng = np.random.default_rng([seed, int(name[1:])])
    B, Hkv, G, N, d, dv, C, K, g = (cfg[x] for x in ("B", "Hkv", "G", "N", "d", "dv", "C", "K", "g"))
    offset, nq = cfg["offset"], cfg["nq"]
    np_dtype = np.float16 if cfg["dtype"] == "f16" else np.float32
    q = rng.standard_normal((B, Hkv * G, nq, d)).astype(np_dtype)
    k = rng.standard_normal((B, Hkv, N, d)).astype(np_dtype)
    v = rng.standard_normal((B, Hkv, N, dv)).astype(np_dtype)
    do = rng.standard_normal((B, Hkv * G, nq, dv)).astype(np_dtype)
    paths = {x: os.path.join(work, f"{name}.{x}.npy")
             for x in ("q", "k", "v", "do", "o", "l", "s", "dq", "dk", "dv")}
    for x, a in (("q", q), ("k", k), ("v", v), ("do", do)):
        np.save(paths[x], a)
    cmd = [pisa_run, "attend", "--q", paths["q"], "--k", paths["k"], "--v", paths["v"],
           "--block-size", str(C), "--topk", str(K), "--branching", str(g),
           "--query-offset", str(offset), "--out", paths["o"], "--lse-out", paths["l"],
           "--grad-out", paths["do"], "--dq-out", paths["dq"], "--dk-out", paths["dk"],
           "--dv-out", paths["dv"]]
    if cfg["crafted"]:
        np.save(paths["s"], crafted_selection(rng, B, Hkv, nq, K, -(-N // C)))
        cmd += ["--selection-in", paths["s"]]
    else:
        cmd += ["--selection-out", paths["s"]]
    label = " ".join(f"{x}={cfg[x]}" for x in cfg)
    proc = subprocess.run(cmd + list(extra), capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"FAIL {name} {label}: pisa-run exited {proc.returncode}: {proc.stderr.strip()}")
        return False
    sel = np.load(paths["s"])
    o = np.load(paths["o"])
    want = pisa_reference.attend_grad(q, k, v, sel, do, C, offset=offset, out=o)
    scale = pisa_reference.attend_grad(q, k, v, sel, do, C, offset=offset, out=o,
                                       magnitude=True)
    errors = [rel_error(np.load(paths[x]), w, m)
              for x, w, m in zip(("dq", "dk", "dv"), want, scale)]
    ok = max(errors) <= TOLERANCE
    print(f"{'ok  ' if ok else 'FAIL'} {name} {label}: relative error dq {errors[0]:.1e} "
          f"dk {errors[1]:.1e} dv {errors[2]:.1e}")
    return ok


def check_bad_input(pisa_run, work):
    """dO of another shape or type, or gradient outputs without dO: exit 2,
    one line on stderr, no output written."""
    rng = np.random.default_rng(0)
    arrays = {"q": (1, 2, 9, 8), "k": (1, 1, 9, 8), "v": (1, 1, 9, 4)}
    paths = {}
    for x, shape in arrays.items():
        paths[x] = os.path.join(work, f"bad.{x}.npy")
        np.save(paths[x], rng.standard_normal(shape).astype(np.float32))
    bad = {"shape": rng.standard_normal((1, 2, 9, 5)).astype(np.float32),
           "dtype": rng.standard_normal((1, 2, 9, 4)).astype(np.float16)}
    base = [pisa_run, "attend", "--q", paths["q"], "--k", paths["k"], "--v", paths["v"],
            "--block-size", "4", "--topk", "3"]
    outs = [os.path.join(work, f"bad.{x}.npy") for x in ("o", "dq", "dk", "dv")]
    runs = []
    for kind, array in bad.items():
        path = os.path.join(work, f"bad.do_{kind}.npy")
        np.save(path, array)
        runs.append((kind, ["--grad-out", path]))
    runs.append(("without dO", []))
    good_do = os.path.join(work, "bad.do_good.npy")
    np.save(good_do, rng.standard_normal((1, 2, 9, 4)).astype(np.float32))
    runs.append(("dq output is the q input", ["--grad-out", good_do]))
    q_bytes = open(paths["q"], "rb").read()
    ok = True
    for kind, more in runs:
        dq_out = paths["q"] if kind.startswith("dq output") else outs[1]
        proc = subprocess.run(base + more + ["--out", outs[0], "--dq-out", dq_out,
                                             "--dk-out", outs[2], "--dv-out", outs[3]],
                              capture_output=True, text=True)
        if open(paths["q"], "rb").read() != q_bytes:
            print(f"FAIL bad input ({kind}): the q input changed")
            ok = False
        lines = proc.stderr.strip().splitlines()
        written = [p for p in outs if os.path.exists(p)]
        good = proc.returncode == 2 and len(lines) == 1 and not written
        ok &= good
        print(f"{'ok  ' if good else 'FAIL'} bad input ({kind}): exit {proc.returncode}, "
              f"{lines[-1] if lines else 'no message'}"
              + (f", wrote {written}" if written else ""))
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pisa-run", default="pisa-run")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--count", type=int, default=12)
    parser.add_argument("--static-shapes", action="store_true")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    extra = ["--static-shapes"] if args.static_shapes else []
    results = [check_reference(seed)]
    with tempfile.TemporaryDirectory() as work:
        for n in range(args.count):
            results.append(run_case(f"c{n}", draw(rng), args.pisa_run, work, seed, extra))
        results.append(check_bad_input(args.pisa_run, work))
    failed = results.count(False)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
