"""Compares the PTX two pisa-opt binaries generate for the same programs,
kernel by kernel: how a refactoring of the GPU lowering shows it changed
no kernel. Each program goes through --pisa-lower-to-nvvm-pipeline with
format=isa; each kernel's PTX is compared after normalising what depends
only on the kernels' order in the module (label and local-depot numbers).
Runs without a GPU.

A kernel that differs is also reported as "reordered" when its
instructions are the same multiset with registers and labels renamed (the
same code in another order). --drawn N adds N programs of the shape sweep
(device_checks.sweep, seed 12: every other one dynamic, every third one
token-major). --chip C builds both for chip C (sm_90 or sm_90a; the
default is the pipeline's, which may differ between the two binaries).
--options "K=V ..." adds pipeline options (e.g. attention-union-queries=3,
to compare kernels a configuration takes only where asked for).

usage: python3 -m device_checks.compare_ptx OLD_PISA_OPT NEW_PISA_OPT
           [--drawn N] [--chip C] [--options "K=V ..."] PROGRAM.mlir...
"""

import collections
import os
import re
import subprocess
import sys
import tempfile


def kernels(pisa_opt, program, chip=None, extra=""):
    """{kernel name: normalised PTX} of one program, or None if it fails;
    for `chip` when given, else the pipeline's default; `extra`: more
    pipeline options."""
    options = "format=isa" + (f" chip={chip}" if chip else "") + (f" {extra}" if extra else "")
    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/out.mlir"
        r = subprocess.run([pisa_opt, program, f"--pisa-lower-to-nvvm-pipeline={options}",
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


def instructions(ptx):
    """The kernel's instructions as a multiset, registers and labels renamed."""
    lines = ptx.replace("\\0A", "\n").split("\n")
    lines = (re.sub(r"%[a-z]+\d+", "%r", l.strip()) for l in lines)
    lines = (re.sub(r"\$L__BB_\d+", "L", l) for l in lines)
    return collections.Counter(l for l in lines if l and not l.startswith("//"))


def drawn_programs(count, directory):
    """`count` sweep programs written into `directory`."""
    from device_checks import sweep
    paths = []
    for i, cfg in enumerate(sweep.draw(12, count)):
        cfg["dynamic"], cfg["token_major"] = i % 2 == 0, i % 3 == 0
        path = os.path.join(directory, f"drawn{i:03d}.mlir")
        with open(path, "w") as f:
            f.write(sweep.program(cfg, cfg.get("schedule")))
        paths.append(path)
    return paths


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    drawn, chip, extra = 0, None, ""
    if "--drawn" in argv:
        at = argv.index("--drawn")
        drawn = int(argv[at + 1])
        argv = argv[:at] + argv[at + 2:]
    if "--chip" in argv:
        at = argv.index("--chip")
        chip = argv[at + 1]
        argv = argv[:at] + argv[at + 2:]
    if "--options" in argv:
        at = argv.index("--options")
        extra = argv[at + 1]
        argv = argv[:at] + argv[at + 2:]
    if len(argv) < 2 or (len(argv) < 3 and not drawn):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    old, new, programs = argv[0], argv[1], argv[2:]
    same = differ = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for program in programs + drawn_programs(drawn, tmp):
            a, b = kernels(old, program, chip, extra), kernels(new, program, chip, extra)
            if a is None and b is None:
                failed += 1  # both refuse it (e.g. a limits test): not a change
                continue
            if a == b:
                same += 1
                continue
            differ += 1
            changed = []
            for k in sorted(set(a or {}) | set(b or {})):
                x, y = (a or {}).get(k), (b or {}).get(k)
                if x != y:
                    reordered = x and y and instructions(x) == instructions(y)
                    changed.append(k + (" (reordered)" if reordered else ""))
            print(f"differs: {os.path.basename(program) if program.startswith(tmp) else program}: "
                  f"{', '.join(changed)}")
    print(f"{same} identical, {differ} differ, {failed} refused by both")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
