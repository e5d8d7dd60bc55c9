"""Where a kernel's warps spend their time, from Nsight Compute's SASS page.

  ncu --cache-control none --clock-control none --warp-sampling-interval 0 \\
      --import-source no --section SourceCounters --section WarpStateStats \\
      -k regex:KERNEL --launch-skip 5 -c 1 -o sel COMMAND...
  ncu -i sel.ncu-rep --page source --csv --print-source sass > sass.csv
  python3 -m device_checks.sass_profile sass.csv [--min-share 0.5]

(`--cache-control none` keeps the L2 as the benchmark has it; ncu's
default flushes it before the kernel, which made a decode step 30 us
instead of 23-25.) Consecutive instructions that run equally often form
one region (a loop body, a branch, straight-line code between barriers;
a barrier ends one); each region with at least --min-share percent of
the warp-state samples is printed with its instruction range, samples,
executed instructions, its three largest stall reasons and its most
frequent opcodes. Runs here
(no GPU needed): the CSV is read as ncu wrote it.
"""

import argparse
import collections
import csv
import sys


def regions(path):
    """[(first, last, samples, executed, stalls Counter, opcodes Counter)]."""
    rows = list(csv.reader(open(path)))
    header, data = rows[1], rows[2:]
    at = {h: i for i, h in enumerate(header)}
    stall_columns = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    out = []
    current = None
    previous = None
    for n, row in enumerate(data):
        source = row[at["Source"]].strip().split()
        opcode = source[1] if source and source[0].startswith("@") and len(source) > 1 else (
            source[0] if source else "")
        base = opcode.split(".")[0]
        executed = int(row[at["Instructions Executed"]] or 0)
        samples = int(row[at["Warp Stall Sampling (All Samples)"]] or 0)
        changed = previous is not None and executed != previous and (
            previous == 0 or executed == 0 or
            abs(executed - previous) > 0.5 * max(executed, previous))
        if current is None or changed:
            current = [n, n, 0, 0, collections.Counter(), collections.Counter()]
            out.append(current)
        current[1] = n
        current[2] += samples
        current[3] += executed
        current[5][base] += 1
        for h in stall_columns:
            value = int(row[at[h]] or 0)
            if value:
                current[4][h[len("stall_"):]] += value
        if base in ("BAR", "EXIT", "RET"):
            current = None
        previous = executed
    return [tuple(r) for r in out]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv")
    parser.add_argument("--min-share", type=float, default=0.5)
    args = parser.parse_args(argv)
    found = regions(args.csv)
    total = sum(r[2] for r in found) or 1
    # Executed counts are warp instructions: divided by the kernel's warps
    # and its cycles they give a warp's cycles an instruction.
    print(f"{total} samples, {sum(r[3] for r in found)} warp instructions executed")
    for first, last, samples, executed, stalls, opcodes in found:
        share = 100.0 * samples / total
        if share < args.min_share:
            continue
        top = ", ".join(f"{k}={v}" for k, v in stalls.most_common(3))
        ops = " ".join(f"{k}:{v}" for k, v in opcodes.most_common(5))
        print(f"[{first:5d}-{last:5d}] {samples:6d} ({share:4.1f}%) executed {executed:7d} | "
              f"{top} | {ops}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
