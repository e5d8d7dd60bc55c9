"""Lints the lit tests: every FileCheck of a test file runs with
--enable-var-scope (captures stay inside one CHECK-LABEL block), and no
check line is a misspelled directive (a silent no-op)."""

import glob
import os
import re
import sys

root = sys.argv[1]
known = {"CHECK", "CHECK-NEXT", "CHECK-SAME", "CHECK-NOT", "CHECK-DAG", "CHECK-LABEL",
         "CHECK-EMPTY", "CHECK-COUNT"}
problems = []
for path in sorted(glob.glob(os.path.join(root, "**", "*.mlir"), recursive=True)
                   + glob.glob(os.path.join(root, "**", "*.test"), recursive=True)):
    prefixes = {"CHECK"}
    with open(path) as f:
        lines = f.read().splitlines()
    for n, line in enumerate(lines, 1):
        for m in re.finditer(r"--check-prefix[es]*=([\w,-]+)", line):
            prefixes.update(m.group(1).split(","))
        if "FileCheck %s" in line and "--enable-var-scope" not in line:
            problems.append(f"{path}:{n}: FileCheck without --enable-var-scope")
    for n, line in enumerate(lines, 1):
        m = re.match(r"^\s*(?://|#)?\s*([A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*)(?:\{LITERAL\})?:", line)
        if not m or m.group(1) in ("RUN", "REQUIRES", "UNSUPPORTED", "XFAIL", "NOTE", "TODO"):
            continue
        word = m.group(1)
        base = next((p for p in sorted(prefixes, key=len, reverse=True)
                     if word == p or word.startswith(p + "-")), None)
        if base is None:
            continue  # ordinary prose in capitals
        suffix = word[len(base):]
        if suffix and ("CHECK" + suffix) not in known and not re.fullmatch(r"-COUNT-\d+", suffix):
            problems.append(f"{path}:{n}: unknown directive {word}")
for p in problems:
    print(p)
print(f"lint: {len(problems)} problems")
sys.exit(1 if problems else 0)
