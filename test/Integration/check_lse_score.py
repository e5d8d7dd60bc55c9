"""Runs pisa.lse_score through pisa-cpu-pipeline and mlir-runner on fresh
random inputs and compares every score with a NumPy float64 evaluation of
the contract (docs/semantics.md, section 2). Tolerance: 1e-4 relative.
"""

import argparse
import math
import os
import re
import subprocess
import sys

import numpy as np

# name: B, Hkv, G, Nq, d, rows, level, C, g, S, offset
CASES = {
    "leaves_partial_block": (1, 1, 3, 6, 8, 13, 1, 4, 2, 5, 7),
    "level2_g2": (2, 2, 2, 5, 4, 7, 2, 3, 2, 4, 14),
    "level3_g3": (1, 1, 1, 9, 16, 5, 3, 2, 3, 3, 20),
}


def tensor_literal(a, elem):
    if a.dtype.kind == "i":
        body = np.array2string(a, separator=",", threshold=1 << 30)
    else:
        body = np.array2string(a, separator=",", threshold=1 << 30,
                               floatmode="unique")
    shape = "x".join(str(s) for s in a.shape)
    return f"dense<{body.replace(chr(10), '')}> : tensor<{shape}x{elem}>"


def reference(q, children, cand, level, C, g, offset):
    B, Hq, Nq, d = q.shape
    Hkv, rows = children.shape[1], children.shape[2]
    G = Hq // Hkv
    fanout = C if level == 1 else g
    span = 1 if level == 1 else C * g ** (level - 2)
    out = np.zeros(cand.shape)
    for b in range(B):
        for h in range(Hkv):
            for i in range(Nq):
                t = offset + i
                for s in range(cand.shape[3]):
                    node = cand[b, h, i, s]
                    kids = [r for r in range(node * fanout, node * fanout + fanout)
                            if node >= 0 and r < rows and r * span <= t]
                    if not kids:
                        out[b, h, i, s] = -math.inf
                        continue
                    total = 0.0
                    for head in range(h * G, h * G + G):
                        x = [float(np.dot(q[b, head, i].astype(np.float64),
                                          children[b, h, r].astype(np.float64))) / math.sqrt(d)
                             for r in kids]
                        m = max(x)
                        total += m + math.log(sum(math.exp(v - m) for v in x))
                    out[b, h, i, s] = total
    return out


def run_case(name, pisa_opt, runner, libs, rng):
    B, Hkv, G, Nq, d, rows, level, C, g, S, offset = CASES[name]
    q = rng.standard_normal((B, Hkv * G, Nq, d)).astype(np.float32)
    children = rng.standard_normal((B, Hkv, rows, d)).astype(np.float32)
    nodes = -(-rows // (C if level == 1 else g))
    # Valid nodes, padding (-1) and a node past the end (no children).
    cand = rng.integers(-1, nodes + 1, size=(B, Hkv, Nq, S)).astype(np.int32)
    ty = lambda a, e: "x".join(str(s) for s in a.shape) + "x" + e
    module = f"""
func.func @main() {{
  %q = arith.constant {tensor_literal(q, "f32")}
  %c = arith.constant {tensor_literal(children, "f32")}
  %n = arith.constant {tensor_literal(cand, "i32")}
  %off = arith.constant {offset} : index
  %u = pisa.lse_score %q, %c, %n, %off level = {level} block_size = {C} branching = {g}
      : tensor<{ty(q, "f32")}>, tensor<{ty(children, "f32")}>, tensor<{ty(cand, "i32")}>
      -> tensor<{ty(cand, "f32")}>
  %m = bufferization.to_buffer %u : tensor<{ty(cand, "f32")}> to memref<{ty(cand, "f32")}>
  %r = memref.cast %m : memref<{ty(cand, "f32")}> to memref<*xf32>
  call @printMemrefF32(%r) : (memref<*xf32>) -> ()
  return
}}
func.func private @printMemrefF32(memref<*xf32>)
"""
    lowered = subprocess.run([pisa_opt, "--pisa-cpu-pipeline"], input=module,
                             capture_output=True, text=True)
    if lowered.returncode != 0:
        print(f"FAIL {name}: pisa-opt: {lowered.stderr.strip()[:500]}")
        return False
    ran = subprocess.run([runner, "-e", "main", "-entry-point-result=void",
                          f"-shared-libs={libs}"], input=lowered.stdout,
                         capture_output=True, text=True)
    if ran.returncode != 0:
        print(f"FAIL {name}: mlir-runner: {ran.stderr.strip()[:500]}")
        return False
    data = ran.stdout.split("data =", 1)[1]
    got = np.array([float(v) for v in re.findall(r"-?inf|-?nan|-?[\d.]+(?:e[-+]?\d+)?", data)])
    want = reference(q, children, cand, level, C, g, offset).ravel()
    if got.shape != want.shape:
        print(f"FAIL {name}: {got.size} values printed, want {want.size}")
        return False
    both_inf = np.isneginf(got) & np.isneginf(want)
    finite = np.isfinite(want)
    close = np.isclose(got, want, rtol=1e-4, atol=1e-4)
    bad = ~(both_inf | (finite & close))
    if bad.any():
        j = int(np.argmax(bad))
        print(f"FAIL {name}: {int(bad.sum())}/{want.size} scores differ; "
              f"first at flat index {j}: got {got[j]} want {want[j]}")
        return False
    print(f"ok   {name}: {want.size} scores ({int(both_inf.sum())} -inf) within 1e-4")
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pisa-opt", default="pisa-opt")
    parser.add_argument("--mlir-runner", default="/usr/lib/llvm-22/bin/mlir-runner")
    parser.add_argument("--shared-libs",
                        default="/usr/lib/llvm-22/lib/libmlir_runner_utils.so,"
                                "/usr/lib/llvm-22/lib/libmlir_c_runner_utils.so")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    results = [run_case(n, args.pisa_opt, args.mlir_runner, args.shared_libs, rng)
               for n in CASES]
    failed = results.count(False)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
