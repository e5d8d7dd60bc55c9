"""Checks `pisa-run attend --cu-seqlens-q/k` (pisa.sparse_attention_varlen
and, with --grad-out, pisa.sparse_attention_grad_varlen on the CPU) against
float64 references on packed batches drawn from a seed.

Each drawn batch packs B sequences token-major (lengths from 0 up, each
sequence's queries its last Nq_b <= N_b positions: prefill, chunks, decode
and empty sequences mixed) with f32 or f16 values; per sequence, the
output and LSE are compared with pisa_reference.attend and (in about 70%
of the batches, run with --grad-out) dq, dk, dv with
pisa_reference.attend_grad over the selection the program returned (the
sequence's rows, head-major, query offset N_b - Nq_b; D from the output
the program stored). Pass rule: output
1e-4 (f32) or 5e-3 (f16) absolute, LSE 1e-4 relative, gradients the
relative Frobenius error of check_attend_grad.py. Broken cu_seqlens must
exit 2 and write nothing.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pisa_reference  # noqa: E402
from check_attend_grad import TOLERANCE, rel_error  # noqa: E402

OUTPUT_TOLERANCE = {"f32": 1e-4, "f16": 5e-3}


def draw(rng):
    C = int(rng.choice([1, 4, 8, 16]))
    B = int(rng.integers(1, 5))
    keys = [int(rng.choice([0, 1, C - 1 if C > 1 else 1, C + 1, int(rng.integers(1, 90))]))
            for _ in range(B)]
    queries = []
    for n in keys:
        kind = rng.integers(0, 3)
        queries.append(n if kind == 0 else min(n, 1) if kind == 1 else int(rng.integers(0, n + 1)))
    return dict(Hkv=int(rng.integers(1, 3)), G=int(rng.choice([1, 2, 4])),
                d=int(rng.choice([4, 8, 16])), dv=int(rng.choice([3, 8])), C=C,
                K=int(rng.choice([3, 4, 6])), g=int(rng.choice([2, 3])),
                dtype=str(rng.choice(["f32", "f16"])), keys=keys, queries=queries,
                grad=bool(rng.random() < 0.7))


def to_heads(rows):
    """[n, H, X] token-major rows as [1, H, n, X]."""
    return np.ascontiguousarray(rows.transpose(1, 0, 2)[None])


def run_case(name, cfg, pisa_run, work, seed):
    rng = np.random.default_rng([seed, int(name[1:])])
    Hkv, G, d, dv, C, K, g = (cfg[x] for x in ("Hkv", "G", "d", "dv", "C", "K", "g"))
    keys, queries = cfg["keys"], cfg["queries"]
    np_dtype = np.float16 if cfg["dtype"] == "f16" else np.float32
    cu = lambda n: np.concatenate([[0], np.cumsum(n)]).astype(np.int32)
    cuq, cuk = cu(queries), cu(keys)
    tq, tk = int(cuq[-1]), int(cuk[-1])
    q = rng.standard_normal((tq, Hkv * G, d)).astype(np_dtype)
    k = rng.standard_normal((tk, Hkv, d)).astype(np_dtype)
    v = rng.standard_normal((tk, Hkv, dv)).astype(np_dtype)
    do = rng.standard_normal((tq, Hkv * G, dv)).astype(np_dtype)
    paths = {x: os.path.join(work, f"{name}.{x}.npy")
             for x in ("q", "k", "v", "do", "cuq", "cuk", "o", "l", "s", "dq", "dk", "dv")}
    for x, a in (("q", q), ("k", k), ("v", v), ("do", do), ("cuq", cuq), ("cuk", cuk)):
        np.save(paths[x], a)
    cmd = [pisa_run, "attend", "--q", paths["q"], "--k", paths["k"], "--v", paths["v"],
           "--cu-seqlens-q", paths["cuq"], "--cu-seqlens-k", paths["cuk"],
           "--block-size", str(C), "--topk", str(K), "--branching", str(g),
           "--out", paths["o"], "--lse-out", paths["l"], "--selection-out", paths["s"]]
    if cfg["grad"]:
        cmd += ["--grad-out", paths["do"], "--dq-out", paths["dq"], "--dk-out", paths["dk"],
                "--dv-out", paths["dv"]]
    label = " ".join(f"{x}={cfg[x]}" for x in cfg)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"FAIL {name} {label}: pisa-run exited {proc.returncode}: {proc.stderr.strip()}")
        return False
    o, lse, sel = (np.load(paths[x]) for x in ("o", "l", "s"))
    if cfg["grad"]:
        dq, dk, dvv = (np.load(paths[x]) for x in ("dq", "dk", "dv"))
    else:
        dq, dk, dvv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
    problems = []
    want_dq, want_dk, want_dv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
    mag_dq, mag_dk, mag_dv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
    for b in range(len(keys)):
        q0, q1, k0, k1 = cuq[b], cuq[b + 1], cuk[b], cuk[b + 1]
        if q1 == q0:
            continue
        offset = int((k1 - k0) - (q1 - q0))
        args = (to_heads(q[q0:q1]), to_heads(k[k0:k1]), to_heads(v[k0:k1]),
                to_heads(sel[q0:q1]))
        want_o, want_l = pisa_reference.attend(*args, C, offset=offset)
        got_o = to_heads(o[q0:q1])
        got_l = lse[q0:q1].T[None]
        if np.abs(got_o - want_o).max(initial=0) > OUTPUT_TOLERANCE[cfg["dtype"]]:
            problems.append(f"sequence {b}: output off by {np.abs(got_o - want_o).max():.1e}")
        finite = np.isfinite(want_l)
        if (np.isfinite(got_l) != finite).any() or (
                np.abs(got_l - want_l)[finite] > 1e-4 * (1 + np.abs(want_l[finite]))).any():
            problems.append(f"sequence {b}: lse differs")
        if not cfg["grad"]:
            continue
        for magnitude, (x, y, z) in ((False, (want_dq, want_dk, want_dv)),
                                     (True, (mag_dq, mag_dk, mag_dv))):
            grads = pisa_reference.attend_grad(*args, to_heads(do[q0:q1]), C,
                                               offset=offset, out=got_o,
                                               magnitude=magnitude)
            x[q0:q1] = grads[0][0].transpose(1, 0, 2)
            y[k0:k1] = grads[1][0].transpose(1, 0, 2)
            z[k0:k1] = grads[2][0].transpose(1, 0, 2)
    errors = [rel_error(a, w, m) for a, w, m in ((dq, want_dq, mag_dq), (dk, want_dk, mag_dk),
                                                 (dvv, want_dv, mag_dv))]
    if max(errors) > TOLERANCE:
        problems.append("gradient errors " + ", ".join(f"{e:.1e}" for e in errors))
    ok = not problems
    print(f"{'ok  ' if ok else 'FAIL'} {name} {label}: {tq} query rows, {tk} key rows"
          + (", gradient errors " + ", ".join(f"{e:.1e}" for e in errors) if ok
             else ": " + "; ".join(problems)))
    return ok


def check_broken(pisa_run, work):
    """cu_seqlens that do not end at the rows packed: exit 2, nothing written."""
    rng = np.random.default_rng(1)
    paths = {x: os.path.join(work, f"broken.{x}.npy") for x in ("q", "k", "v", "cuq", "cuk", "o")}
    np.save(paths["q"], rng.standard_normal((5, 2, 8)).astype(np.float32))
    np.save(paths["k"], rng.standard_normal((7, 1, 8)).astype(np.float32))
    np.save(paths["v"], rng.standard_normal((7, 1, 4)).astype(np.float32))
    np.save(paths["cuq"], np.array([0, 2, 5], dtype=np.int32))
    np.save(paths["cuk"], np.array([0, 3, 6], dtype=np.int32))
    proc = subprocess.run([pisa_run, "attend", "--q", paths["q"], "--k", paths["k"],
                           "--v", paths["v"], "--cu-seqlens-q", paths["cuq"],
                           "--cu-seqlens-k", paths["cuk"], "--block-size", "4",
                           "--topk", "3", "--out", paths["o"]],
                          capture_output=True, text=True)
    lines = proc.stderr.strip().splitlines()
    ok = (proc.returncode == 2 and len(lines) == 1 and "cu-seqlens" in lines[0]
          and not os.path.exists(paths["o"]))
    print(f"{'ok  ' if ok else 'FAIL'} broken cu_seqlens: exit {proc.returncode}, "
          f"{lines[-1] if lines else 'no message'}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pisa-run", default="pisa-run")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--count", type=int, default=10)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as work:
        results = [run_case(f"v{n}", draw(rng), args.pisa_run, work, seed)
                   for n in range(args.count)]
        results.append(check_broken(args.pisa_run, work))
    failed = results.count(False)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
