"""`python3 -m device_checks` (from python/ of a checkout, PYTHONPATH=python):
the checks, sweeps, profilers and benchmarks.

usage: python3 -m device_checks COMMAND [ARGS...]   (... COMMAND --help)
"""

import sys

from pisa.__main__ import dispatch

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
    "check-attention-grad": ("device_checks.check_attention_grad", "the backward of sparse attention on the GPU against float64; its speed"),
    "grad-call": ("device_checks.grad_call", "one small call of each backward entry, for compute-sanitizer"),
    "check-training": ("device_checks.check_training", "the differentiable torch op of a prefill library against float64"),
    "check-lse-score": ("device_checks.check_lse_score", "pisa.lse_score on the GPU against float64"),
    "selection-union": ("device_checks.selection_union", "distinct blocks a tile of consecutive queries attends (no GPU)"),
    "bench-call": ("device_checks.bench_call", "the host part of a call against its kernels"),
    "bench-gpu": ("device_checks.bench_gpu", "time the benchmark libraries on the GPU"),
    "profile-gpu": ("device_checks.profile_gpu", "per-kernel times of one benchmark library"),
}


def main(argv=None):
    return dispatch("device_checks", __doc__, COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
