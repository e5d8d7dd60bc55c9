"""Per-kernel times of the paper setting's backward, torch.profiler (CUPTI).

  python3 -m device_checks.profile_grad LIB.so [N ...]   # GPU

LIB.so is a paper-setting backward library (`check_attention_grad build
--paper`: libpaper.so). For each N (default 4096 and 262144): fresh q, k,
v and dO, the bench's selection (block 0, the query's own block, six
random earlier ones; check_attention_grad bench), the library's forward o
and lse, two warm-up calls of `grad_all` (the whole backward), then three
profiled calls; each kernel's mean device time a call, longest first.
"""

import argparse
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("library")
    parser.add_argument("lengths", type=int, nargs="*", default=[4096, 262144])
    args = parser.parse_args(argv)

    import torch
    from torch.profiler import ProfilerActivity, profile
    from pisa import aot
    from device_checks.check_attention_grad import bench_inputs

    lib = aot.Library(args.library)
    calls = 3
    for n in args.lengths:
        torch.manual_seed(n)
        q, k, v, do, sel = bench_inputs(n)
        o = lib("attend", q, k, v, sel, 0)
        lse = lib("attend_lse", q, k, v, sel, 0)
        for _ in range(2):
            lib("grad_all", q, k, v, sel, 0, o, lse, do)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as prof:
            for _ in range(calls):
                lib("grad_all", q, k, v, sel, 0, o, lse, do)
            torch.cuda.synchronize()
        print(f"N = {n}:")
        for e in sorted(prof.key_averages(), key=lambda e: -e.device_time_total):
            if e.device_time_total > 0:
                print(f"  {e.key[:60]:60s} {e.device_time_total / calls / 1000:.3f} ms "
                      f"x{e.count // calls}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
