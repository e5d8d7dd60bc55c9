"""What ptxas makes of one kernel over a grid of shapes: its occupancy hint
(.minnctapersm), registers, spills and shared memory. This is how the
occupancy hints of the GPU lowering were chosen (docs/performance.md);
it runs without a GPU (pisa-opt, then CUDA's ptxas).

Each shape is the two-stage selection of cases.program (N = 4096, bf16,
K = 8, Q_tile * G = 64); shapes the kernel is not generated for are left
out.

usage: python3 -m device_checks.kernel_registers [--kernel NAME]
           [--block-sizes 16 32 ...] [--dims 64 128 ...] [--groups 16 8 ...]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

from device_checks import cases


def ptx_of(pisa_opt, program):
    """The PTX pisa-opt embeds for `program` (MLIR text), or None."""
    r = subprocess.run([pisa_opt, "-", "--pisa-lower-to-nvvm-pipeline=format=isa"],
                       input=program, capture_output=True, text=True)
    m = re.search(r'assembly = "(.*?)"', r.stdout, re.S) if r.returncode == 0 else None
    if not m:
        return None
    return re.sub(r"\\([0-9A-Fa-f]{2})", lambda x: chr(int(x.group(1), 16)), m.group(1))


def resources(ptxas, ptx, kernel):
    """(hint, `ptxas -v` lines) of `kernel` in `ptx`, or None when absent."""
    entry = re.search(rf"\.entry {kernel}\b(.*?)\{{", ptx, re.S)
    if not entry:
        return None
    hint = re.search(r"\.minnctapersm (\d+)", entry.group(1))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        r = subprocess.run([ptxas, "-arch=sm_90a", "-v", path, "-o", path + ".cubin"],
                           capture_output=True, text=True)
    lines = r.stderr.splitlines()
    for i, line in enumerate(lines):
        # The kernel itself, not one named with a suffix (`{kernel}_0`).
        if line.rstrip().endswith(f"for {kernel}"):
            info = " ".join(l.replace("ptxas info    :", "").strip()
                            for l in lines[i + 1:i + 3])
            return (hint.group(1) if hint else "-"), info
    return (hint.group(1) if hint else "-"), "ptxas: " + (r.stderr.strip().splitlines() or ["?"])[-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pisa-opt", default="build/bin/pisa-opt")
    parser.add_argument("--ptxas", default="/usr/local/cuda/bin/ptxas")
    parser.add_argument("--kernel", default="select_stage2_score_tiles_wgmma")
    parser.add_argument("--block-sizes", type=int, nargs="+", default=[16, 32, 64, 128])
    parser.add_argument("--dims", type=int, nargs="+", default=[32, 64, 96, 128, 192, 256])
    parser.add_argument("--groups", type=int, nargs="+", default=[16, 8, 4])
    args = parser.parse_args()
    print(f"| C | d | G | blocks an SM (hint) | {args.kernel} (ptxas -v) |")
    print("|---|---|---|---|---|")
    for C in args.block_sizes:
        for d in args.dims:
            for G in args.groups:
                ptx = ptx_of(args.pisa_opt, cases.program(4096, 4096, 0, G, d, C, 8, "bf16",
                                                          q_tile=64 // G))
                found = resources(args.ptxas, ptx, args.kernel) if ptx else None
                if found:
                    print(f"| {C} | {d} | {G} | {found[0]} | {found[1]} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
