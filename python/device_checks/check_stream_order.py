"""Checks that an AOT library call is ordered after the work that produced
its inputs, on PyTorch's default (legacy) stream and on a side stream.

Two ways a user meets it, each after a warm-up call (the first call grows
the memory pools, which synchronises the device and hides the bug):
inputs written by a copy queued behind a long GPU sleep, and fresh
`torch.randn` inputs drawn on the stream just before each of three calls.
The library is called at once, without a synchronisation: a call that does
not wait for the stream the caller is on reads half-written inputs and
selects wrong blocks silently (as did a library whose calls ran on a private
non-blocking stream on the default stream). Compared with the float64
reference on sampled rows, as device_checks.sweep does.

usage: python3 -m device_checks.check_stream_order SWEEP_DIR --only NAME [NAME ...]
"""

import os
import sys

import numpy as np
import torch

from pisa import aot, reference
from device_checks import sweep

SLEEP_CYCLES = 200_000_000  # about 0.1 s at the H200's clock


def warm_up(lib, cfg, q, k, stream):
    with torch.cuda.stream(stream):
        sweep.call(lib, cfg, q, k)
    torch.cuda.synchronize()


def behind_sleep(lib, cfg, q, k, rows, stream):
    with torch.cuda.stream(stream):
        # Other values first, so that reading early cannot look right.
        q_late = torch.randn_like(q)
        k_late = torch.randn_like(k)
        torch.cuda._sleep(SLEEP_CYCLES)
        q_late.copy_(q)
        k_late.copy_(k)
        got = sweep.call(lib, cfg, q_late, k_late)
    torch.cuda.synchronize()
    return got[:, :, rows]


def fresh_inputs(lib, cfg, stream, gen):
    """Inputs drawn on the stream right before the call, as a user's script."""
    with torch.cuda.stream(stream):
        q, k = sweep.gpu_inputs(cfg, gen)
        got = sweep.call(lib, cfg, q, k)
    torch.cuda.synchronize()
    return q, k, got


def main():
    args, cases = sweep.named_cases_cli(__doc__)
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    failed = 0
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
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
            warm_up(lib, cfg, q, k, stream)
            runs = [("behind a sleep", behind_sleep(lib, cfg, q, k, rows, stream),
                     want, gaps)]
            for trial in range(3):
                fq, fk, got = fresh_inputs(lib, cfg, stream, gen)
                fwant, fgaps = reference.select(fq, fk, cfg["C"], cfg["K"],
                                                cfg["g"], offset=cfg["offset"],
                                                rows=rows)
                runs.append((f"fresh inputs {trial}", got[:, :, rows], fwant,
                             fgaps))
            for what, got, w, gp in runs:
                ok, s = sweep.verdict(got.cpu().numpy(), w.cpu().numpy(),
                                      gp.cpu().numpy())
                failed += not ok
                print(f"{'ok  ' if ok else 'FAIL'} {cfg['name']} on the "
                      f"{label}, {what}: {s['rows']} rows, {s['differ']} "
                      f"differ ({s['unexplained']} unexplained)", flush=True)
    print(f"stream order: {'all ok' if not failed else f'{failed} failed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
