"""Writes the fuzzer's seed corpus: every .mlir test and example, split at
`// -----` (one module per file), into OUT_DIR.

usage: python3 test/Fuzz/make-corpus.py OUT_DIR
"""

import glob
import os
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
n = 0
for path in sorted(glob.glob(os.path.join(root, "test", "**", "*.mlir"), recursive=True)
                   + glob.glob(os.path.join(root, "docs", "examples", "*.mlir"))):
    with open(path) as f:
        parts = f.read().split("// -----")
    for part in parts:
        with open(os.path.join(out, f"seed{n:04d}.mlir"), "w") as f:
            f.write(part)
        n += 1
print(f"{n} seed inputs in {out}")
