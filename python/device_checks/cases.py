"""The GPU check and benchmark cases, and the MLIR programs for them.

`python3 -m device_checks.cases OUT_DIR --pisa-compile PATH` (on a machine with
MLIR) writes one AOT library per case into OUT_DIR plus cases.json; the
checker and the benchmark (on the GPU machine) read cases.json. Each library
exports the same selection twice, `select_two_stage` and
`select_single_stage`, so that both schedules are checked on identical
inputs.
"""

import argparse
import json
import os
import subprocess
import sys

# name: N keys, Nq queries (None = N), offset, G, d, C, K, dtype, ties
CHECK_CASES = {
    "n1":            (1, None, 0, 1, 64, 32, 4, "f32", False),
    "n63":           (63, None, 0, 4, 128, 64, 8, "f16", False),
    "n64":           (64, None, 0, 16, 64, 64, 4, "bf16", False),
    "n65":           (65, None, 0, 4, 64, 32, 16, "f32", False),
    "n1000_g16":     (1000, None, 0, 16, 128, 64, 8, "bf16", False),
    "n1000_g1":      (1000, None, 0, 1, 64, 32, 4, "f16", False),
    "n4096_k16":     (4096, None, 0, 4, 128, 32, 16, "f32", False),
    "n4096_paper":   (4096, None, 0, 16, 128, 64, 8, "bf16", False),
    "n65536_paper":  (65536, None, 0, 16, 128, 64, 8, "bf16", False),
    "n4096_bf16_k16": (4096, None, 0, 16, 128, 64, 16, "bf16", False),
    "n65536_k16":    (65536, None, 0, 4, 64, 32, 16, "f16", False),
    # G = 8: 32-row warps whose rows are not whole queries (the stage-2
    # LSE goes through shared memory, rotated reads).
    "n3000_g8":      (3000, None, 0, 8, 128, 64, 8, "bf16", False),
    "decode":        (4096, 1, 4095, 16, 128, 64, 8, "bf16", False),
    "chunk":         (5000, 100, 4900, 4, 64, 32, 8, "f32", False),
    "ties":          (2048, None, 0, 4, 64, 32, 8, "f32", True),
}
BENCH_SIZES = [4096, 16384, 65536, 131072, 262144, 1048576]

MLIR_TYPES = {"f32": "f32", "f16": "f16", "bf16": "bf16"}


def pyramid_rows(n, c, g):
    rows, m = 0, -(-n // c)
    while True:
        rows += m
        if m == 1:
            return rows
        m = -(-m // g)


def program(n, nq, offset, G, d, C, K, dtype, g=2, q_tile=4):
    t = MLIR_TYPES[dtype]
    q = f"tensor<1x{G}x{nq}x{d}x{t}>"
    k = f"tensor<1x1x{n}x{d}x{t}>"
    p = f"tensor<1x1x{pyramid_rows(n, C, g)}x{d}xf32>"
    r = f"tensor<1x1x{nq}x{K}xi32>"
    funcs = []
    for kind in ("two_stage", "single_stage"):
        funcs.append(f"""
func.func @select_{kind}(%q: {q}, %k: {k}) -> {r} {{
  %off = arith.constant {offset} : index
  %p = pisa.pyramid_build %k block_size = {C} branching = {g} : {k} -> {p}
  %s = pisa.hier_topk %q, %k, %p, %off topk = {K} block_size = {C} branching = {g}
      {{schedule = #pisa.schedule<{kind}, q_tile = {q_tile}, io_two_stage = 0, io_single_stage = 0>}}
      : {q}, {k}, {p} -> {r}
  return %s : {r}
}}""")
    return "\n".join(funcs) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out")
    parser.add_argument("--pisa-compile", default="build/bin/pisa-compile")
    parser.add_argument("--q-tile", type=int, default=4,
                        help="queries per stage-2 key tile (two_stage)")
    parser.add_argument("--chip", help="pisa-compile's --chip (its default when left out)")
    parser.add_argument("--bench-only", action="store_true",
                        help="only the benchmark cases (no check cases)")
    parser.add_argument("--bench-shape", default="16,128,64,8",
                        help="G,d,C,K of the bf16 benchmark cases (default: the paper setting; "
                             "bench_gpu and profile_gpu feed bf16)")
    # Here, not at the top: device_checks.sweep imports this module.
    from device_checks import sweep
    sweep.add_kernel_config_option(parser)
    args = parser.parse_args()
    bench = (*(int(x) for x in args.bench_shape.split(",")), "bf16")
    os.makedirs(args.out, exist_ok=True)
    cases = []
    todo = [] if args.bench_only else [(name, *spec) for name, spec in CHECK_CASES.items()]
    todo += [(f"bench{n}", n, None, 0, *bench, False) for n in BENCH_SIZES]
    for name, n, nq, offset, G, d, C, K, dtype, ties in todo:
        nq = nq or n
        src = os.path.join(args.out, f"{name}.mlir")
        with open(src, "w") as f:
            f.write(program(n, nq, offset, G, d, C, K, dtype, q_tile=args.q_tile))
        lib = f"lib{name}.so"
        chip = ["--chip", args.chip] if args.chip else []
        proc = subprocess.run([args.pisa_compile, src, "-o", os.path.join(args.out, lib)]
                              + chip + sweep.kernel_config_flags(args),
                              capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{name}: {proc.stderr.strip()}", file=sys.stderr)
            return 1
        cases.append({"name": name, "lib": lib, "N": n, "Nq": nq, "offset": offset,
                      "G": G, "d": d, "C": C, "K": K, "g": 2, "dtype": dtype,
                      "ties": ties, "bench": name.startswith("bench")})
        print(f"built {lib}", flush=True)
    with open(os.path.join(args.out, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
    with open(os.path.join(args.out, "build.json"), "w") as f:
        json.dump({"flags": sweep.kernel_config_flags(args)}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
