"""`python3 -m device_checks` (from python/ of a checkout, PYTHONPATH=python):
the checks, sweeps, profilers and benchmarks.

usage: python3 -m device_checks COMMAND [ARGS...]   (... COMMAND --help)
"""

import importlib
import sys

# command: (module, what it does); each module also runs on its own as
# `python3 -m device_checks.NAME`.
COMMANDS = {
    "sweep": ("device_checks.sweep", "generated shape sweep: build libraries, check on the GPU or the CPU"),
    "cases": ("device_checks.cases", "build the fixed GPU check and benchmark libraries"),
    "check-gpu": ("device_checks.check_gpu", "check the fixed cases on the GPU against the reference"),
    "check-stream-order": ("device_checks.check_stream_order", "check that calls order after their inputs' producers"),
    "check-abi": ("device_checks.check_abi", "check the call contract on the GPU: graphs, threads, bad calls"),
    "check-layouts": ("device_checks.check_layouts", "token-major libraries against head-major ones on the GPU"),
    "compare-ptx": ("device_checks.compare_ptx", "the PTX of two pisa-opt builds, kernel by kernel (no GPU)"),
    "compare-builds": ("device_checks.compare_builds", "two builds' libraries on the same inputs, bitwise (GPU)"),
    "check-torch": ("device_checks.check_torch", "check the PyTorch custom ops: eager, torch.compile, graphs"),
    "check-decode": ("device_checks.check_decode", "decode over contiguous and paged caches on the GPU; its speed"),
    "check-attention": ("device_checks.check_attention", "sparse attention on the GPU against float64; its speed"),
    "check-lse-score": ("device_checks.check_lse_score", "pisa.lse_score on the GPU against float64"),
    "bench-call": ("device_checks.bench_call", "the host part of a call against its kernels"),
    "bench-gpu": ("device_checks.bench_gpu", "time the benchmark libraries on the GPU"),
    "profile-gpu": ("device_checks.profile_gpu", "per-kernel times of one benchmark library"),
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
    if argv[0] not in COMMANDS:
        sys.stderr.write(f"device_checks: unknown command '{argv[0]}' (see --help)\n")
        return 2
    module = importlib.import_module(COMMANDS[argv[0]][0])
    sys.argv = [f"device_checks {argv[0]}"] + argv[1:]
    return module.main()


if __name__ == "__main__":
    sys.exit(main())
