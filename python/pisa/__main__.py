"""`python3 -m pisa` (or `pisa` once installed): the package's commands.

usage: python3 -m pisa COMMAND [ARGS...]   (python3 -m pisa COMMAND --help)
"""

import importlib
import sys

# command: (module, what it does). Library modules (aot, torch, reference)
# are imported by programs; these are the checks and benchmarks
# (pisa.checks).
COMMANDS = {
    "sweep": ("pisa.checks.sweep", "generated shape sweep: build libraries, check on the GPU or the CPU"),
    "cases": ("pisa.checks.cases", "build the fixed GPU check and benchmark libraries"),
    "check-gpu": ("pisa.checks.check_gpu", "check the fixed cases on the GPU against the reference"),
    "check-stream-order": ("pisa.checks.check_stream_order", "check that calls order after their inputs' producers"),
    "check-abi": ("pisa.checks.check_abi", "check the call contract on the GPU: graphs, threads, bad calls"),
    "check-layouts": ("pisa.checks.check_layouts", "token-major libraries against head-major ones on the GPU"),
    "compare-ptx": ("pisa.checks.compare_ptx", "the PTX of two pisa-opt builds, kernel by kernel (no GPU)"),
    "compare-builds": ("pisa.checks.compare_builds", "two builds' libraries on the same inputs, bitwise (GPU)"),
    "check-torch": ("pisa.checks.check_torch", "check the PyTorch custom ops: eager, torch.compile, graphs"),
    "check-decode": ("pisa.checks.check_decode", "decode over contiguous and paged caches on the GPU; its speed"),
    "check-attention": ("pisa.checks.check_attention", "sparse attention on the GPU against float64; its speed"),
    "check-lse-score": ("pisa.checks.check_lse_score", "pisa.lse_score on the GPU against float64"),
    "quality": ("pisa.quality", "softmax mass and recall@K of a selection against the exact top blocks"),
    "bench-call": ("pisa.checks.bench_call", "the host part of a call against its kernels"),
    "bench-gpu": ("pisa.checks.bench_gpu", "time the benchmark libraries on the GPU"),
    "profile-gpu": ("pisa.checks.profile_gpu", "per-kernel times of one benchmark library"),
}


def usage(out):
    out.write(__doc__.split("\n\n")[1].rstrip("\n") + "\n\ncommands:\n")
    for name, (_, what) in COMMANDS.items():
        out.write(f"  {name:<20} {what}\n")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        usage(sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] == "--version":
        print("pisa 0.5.0")
        return 0
    if argv[0] not in COMMANDS:
        sys.stderr.write(f"pisa: unknown command '{argv[0]}' (see --help)\n")
        return 2
    module = importlib.import_module(COMMANDS[argv[0]][0])
    sys.argv = [f"pisa {argv[0]}"] + argv[1:]
    return module.main()


if __name__ == "__main__":
    sys.exit(main())
