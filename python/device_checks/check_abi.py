"""Checks an AOT library's call contract (PisaRuntime.h) on the GPU:

- a call captured in a CUDA graph and replayed on new inputs equals a direct
  call on them (the call allocates nothing and never synchronises);
- calls from several threads, each on its own stream, equal single calls;
- bad calls (too small or misaligned workspace, NULL or misaligned tensors,
  a query offset past the keys) return a status and a message, and write
  nothing.

usage: python3 -m device_checks.check_abi SWEEP_DIR --only NAME [NAME ...]
"""

import ctypes
import os
import sys
import threading

import torch

from pisa import aot
from device_checks import sweep



def check_graph(lib, cfg, gen):
    q, k = sweep.gpu_inputs(cfg, gen)
    out = sweep.call(lib, cfg, q, k)
    ws = torch.empty(lib.workspace_size("sweep_select", q, k) + 256, dtype=torch.uint8,
                     device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        sweep.call(lib, cfg, q, k, out=out, workspace=ws)  # warm-up (module load)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        sweep.call(lib, cfg, q, k, out=out, workspace=ws)
    ok = True
    for _ in range(3):
        nq, nk = sweep.gpu_inputs(cfg, gen)
        q.copy_(nq)
        k.copy_(nk)
        out.fill_(12345)
        graph.replay()
        want = sweep.call(lib, cfg, nq, nk)
        ok &= bool(torch.equal(out, want))
    return ok


def check_threads(lib, cfg, gen, threads=4, calls=5):
    work = [sweep.gpu_inputs(cfg, gen) for _ in range(threads)]
    want = [sweep.call(lib, cfg, q, k) for q, k in work]
    torch.cuda.synchronize()
    results = [None] * threads

    def run(i):
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            outs = [sweep.call(lib, cfg, *work[i]) for _ in range(calls)]
        stream.synchronize()
        results[i] = all(torch.equal(o, want[i]) for o in outs)

    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return all(results)


def check_bad_calls(lib, cfg, gen):
    """Each bad call through the C function itself (pisa.aot would refuse or
    repair most of them first)."""
    entry, fn, _ = lib.entries["sweep_select"]
    q, k = sweep.gpu_inputs(cfg, gen)
    ws_bytes = lib.workspace_size("sweep_select", q, k)
    out = torch.full(lib.result_shapes(entry, [q, k])[0], 7, dtype=torch.int32,
                     device="cuda")
    spec = [a["shape"] for a in entry["arguments"] if a["kind"] == "memref"]
    qdims, kdims = aot._dynamic_sizes(q.shape, spec[0]), aot._dynamic_sizes(k.shape, spec[1])
    odims = aot._dynamic_sizes(out.shape, entry["results"][0]["shape"])
    ws = torch.empty(ws_bytes + 512, dtype=torch.uint8, device="cuda")
    base = ws.data_ptr() + (-ws.data_ptr() % 256)
    odd = torch.empty(q.numel() + 8, dtype=q.dtype, device="cuda")
    cases = [
        ("workspace too small", q.data_ptr(), k.data_ptr(), base, max(ws_bytes - 1, 0), ws_bytes > 0),
        ("workspace misaligned", q.data_ptr(), k.data_ptr(), base + 16, ws_bytes, ws_bytes > 0),
        ("NULL keys", q.data_ptr(), None, base, ws_bytes, True),
        ("misaligned queries", odd.data_ptr() + 2, k.data_ptr(), base, ws_bytes, True),
    ]
    ok = True
    for what, qp, kp, wp, wb, applies in cases:
        if not applies:
            continue
        error = ctypes.create_string_buffer(512)
        call = aot.PisaCall(torch.cuda.current_stream().cuda_stream, wp, wb,
                            ctypes.cast(error, ctypes.c_char_p), len(error))
        status = fn(ctypes.byref(call), qp, *qdims, kp, *kdims,
                    *sweep.extra_args(cfg), out.data_ptr(), *odims)
        torch.cuda.synchronize()
        untouched = bool((out == 7).all())
        good = status != 0 and untouched and bool(error.value)
        ok &= good
        print(f"  {'ok  ' if good else 'FAIL'} {what}: status {status}, "
              f"{error.value.decode()!r}, result untouched: {untouched}")
    return ok


def check_empty(lib, cfg):
    """A dynamic library on empty sizes (N = 0, Nq = 0, B = 0): an empty
    result and no launch, or, where Nq is static 1 and N = 0, the rule
    Nq <= N as the error; nothing else written, nothing faults."""
    ok = True
    d, Hq, Hkv = cfg["d"], cfg["Hkv"] * cfg["G"], cfg["Hkv"]
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[cfg["dtype"]]
    decode = sweep.is_decode(cfg)
    shapes = [(1, 0, 0), (1, 5 * cfg["C"], 0), (0, 7, 3)]
    if decode:
        shapes = [(1, 0, 1), (0, 7, 1)]
    for B, N, Nq in shapes:
        q = torch.randn((B, Hq, Nq, d), device="cuda").to(dt)
        k = torch.randn((B, Hkv, N, d), device="cuda").to(dt)
        refused = decode and N == 0
        try:
            out = lib("sweep_select", q, k, 0)
            torch.cuda.synchronize()
            good = not refused and out.numel() == 0
            what = f"empty result {list(out.shape)}"
        except RuntimeError as e:
            good = refused and "more queries than keys" in str(e)
            what = f"refused: {e}"
        ok &= good
        print(f"  {'ok  ' if good else 'FAIL'} B={B} N={N} Nq={Nq}: {what}")
    return ok


def main():
    args, cases = sweep.named_cases_cli(__doc__)
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    failed = 0
    for cfg in cases:
        lib = aot.Library(os.path.join(args.dir, cfg["lib"]))
        failed += sweep.report(cfg["name"], {
            "CUDA graph replays": check_graph(lib, cfg, gen),
            "threads on their own streams": check_threads(lib, cfg, gen),
            "bad calls": check_bad_calls(lib, cfg, gen),
            **({"empty sizes": check_empty(lib, cfg)} if cfg.get("dynamic") else {})})
    print(f"abi: {'all ok' if not failed else f'{failed} failed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
