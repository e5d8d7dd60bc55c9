"""One small call of each backward entry of a check_attention_grad library,
for compute-sanitizer (racecheck and memcheck finish in seconds at these
sizes, where `check_attention_grad check` draws a prefill of 4K queries and
varlen mixes that racecheck takes minutes over):

  compute-sanitizer --tool racecheck python3 -m device_checks.grad_call \\
      LIB Hkv G d dv C K [N]                                              # GPU

For a bf16 library: B = 2 batches of N = Nq keys and queries (300 unless
given), offset 0, Gaussian q, k, v and dO, check_attention's crafted
selection (-1 padding, duplicates, unsorted and out-of-range entries); the
forward's o and lse feed grad_dq, grad_dk and grad_dv once. Prints the
results' shapes and norms."""
import argparse
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python3 -m device_checks.grad_call",
        description="One small call of each backward entry of a bf16 "
        "check_attention_grad library, for compute-sanitizer.")
    parser.add_argument("lib", help="the library (.so)")
    for name in ("Hkv", "G", "d", "dv", "C", "K"):
        parser.add_argument(name, type=int)
    parser.add_argument("N", type=int, nargs="?", default=300,
                        help="keys and queries a batch (300)")
    a = parser.parse_args(argv)
    import torch

    from pisa import aot
    from device_checks.check_attention_grad import grad_args

    lib = aot.Library(a.lib)
    gen = torch.Generator().manual_seed(4040)
    args = grad_args(lib, gen, torch.bfloat16, (2, a.Hkv, a.G, a.d, a.dv, a.C, a.K),
                     a.N, a.N, 0)
    got = [lib(f"grad_{x}", *args) for x in ("dq", "dk", "dv")]
    torch.cuda.synchronize()
    print("race call done", [tuple(x.shape) for x in got], [float(x.float().norm()) for x in got])
    return 0


if __name__ == "__main__":
    sys.exit(main())
