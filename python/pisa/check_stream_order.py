"""Checks that an AOT library call is ordered after the work that produced
its inputs, on PyTorch's default (legacy) stream and on a side stream.

The inputs are written by a copy queued behind a long GPU sleep and the
library is called at once, without a synchronisation: a call that does not
wait for the stream the caller is on reads half-written inputs and selects
wrong blocks silently (issue 11's wrong rows). Compared with the float64
reference on sampled rows, as pisa.sweep does.

usage: python3 -m pisa.check_stream_order SWEEP_DIR --only NAME [NAME ...]
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

from pisa import aot, reference, sweep

SLEEP_CYCLES = 200_000_000  # about 0.1 s at the H200's clock


def run(lib, cfg, q, k, rows, stream):
    with torch.cuda.stream(stream):
        # Other values first, so that reading early cannot look right.
        q_late = torch.randn_like(q)
        k_late = torch.randn_like(k)
        torch.cuda._sleep(SLEEP_CYCLES)
        q_late.copy_(q)
        k_late.copy_(k)
        got = lib("sweep_select", q_late, k_late)
    torch.cuda.synchronize()
    return got[:, :, rows]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dir")
    parser.add_argument("--only", nargs="+", required=True)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    with open(os.path.join(args.dir, "sweep.json")) as f:
        cases = [c for c in json.load(f)["cases"] if c["name"] in args.only]
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    failed = 0
    for cfg in cases:
        rng = np.random.default_rng(args.seed)
        B, Hkv, G, d = cfg["B"], cfg["Hkv"], cfg["G"], cfg["d"]
        k = torch.from_numpy(sweep.make_keys(rng, cfg, (B, Hkv, cfg["N"], d)))
        q = torch.from_numpy(rng.standard_normal((B, Hkv * G, cfg["Nq"], d)))
        k = k.cuda().to(dt[cfg["dtype"]])
        q = q.cuda().to(dt[cfg["dtype"]])
        rows = torch.from_numpy(sweep.sample_rows(rng, cfg, 2048)).cuda()
        want, gaps = reference.select(q, k, cfg["C"], cfg["K"], cfg["g"],
                                      offset=cfg["offset"], rows=rows)
        lib = aot.Library(os.path.join(args.dir, cfg["lib"]))
        for label, stream in (("default stream", torch.cuda.default_stream()),
                              ("side stream", torch.cuda.Stream())):
            got = run(lib, cfg, q, k, rows, stream)
            ok, s = sweep.verdict(got.cpu().numpy(), want.cpu().numpy(),
                                  gaps.cpu().numpy())
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {cfg['name']} on the {label}: "
                  f"{s['rows']} rows, {s['differ']} differ "
                  f"({s['unexplained']} unexplained)", flush=True)
    print(f"stream order: {'all ok' if not failed else f'{failed} failed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
