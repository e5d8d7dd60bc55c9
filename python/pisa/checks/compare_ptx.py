"""Compares the PTX two pisa-opt binaries generate for the same programs,
kernel by kernel: how a refactoring of the GPU lowering shows it changed
no kernel. Each program goes through --pisa-lower-to-nvvm-pipeline with
format=isa; each kernel's PTX is compared after normalising what depends
only on the kernels' order in the module (label and local-depot numbers).
Runs without a GPU.

usage: python3 -m pisa.checks.compare_ptx OLD_PISA_OPT NEW_PISA_OPT PROGRAM.mlir...
"""

import re
import subprocess
import sys
import tempfile


def kernels(pisa_opt, program):
    """{kernel name: normalised PTX} of one program, or None if it fails."""
    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/out.mlir"
        r = subprocess.run([pisa_opt, program, "--pisa-lower-to-nvvm-pipeline=format=isa",
                            "-o", out], capture_output=True, text=True)
        if r.returncode != 0:
            return None
        text = open(out).read()
    m = re.search(r'assembly = "(.*?)"', text, re.S)
    if not m:
        return None
    result = {}
    for entry in m.group(1).split("// .globl")[1:]:
        entry = re.sub(r"__local_depot\d+", "__local_depot", entry)
        entry = re.sub(r"\$L__BB\d+_", "$L__BB_", entry).replace("\\09", "\t").strip()
        result[entry.split("\\0A", 1)[0].strip()] = entry
    return result


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    old, new, programs = argv[0], argv[1], argv[2:]
    same = differ = failed = 0
    for program in programs:
        a, b = kernels(old, program), kernels(new, program)
        if a is None and b is None:
            failed += 1  # both refuse it (e.g. a limits test): not a change
            continue
        if a == b:
            same += 1
        else:
            differ += 1
            changed = sorted(k for k in set(a or {}) | set(b or {})
                             if (a or {}).get(k) != (b or {}).get(k))
            print(f"differs: {program}: {', '.join(changed)}")
    print(f"{same} identical, {differ} differ, {failed} refused by both")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
