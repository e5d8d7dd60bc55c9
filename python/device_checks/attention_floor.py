"""The counted floor of the sparse attention pass, on the GPU:
what moving its bytes alone costs, beside the pass itself, in one run.

  python3 -m device_checks.attention_floor DIR [--lengths ...]   # GPU

DIR holds the paper-setting attention library (`check_attention build
--paper`: libpaper.so). For each N the library's own prefill selection is
computed on fresh inputs; a Triton kernel then reads, for every query,
exactly the key and value rows the pass must read (the C keys of each used
block that starts at or before the query, d = dv = 128, bf16), a block of
4 warps per query as the pass has, and adds them up (so the loads are not
dropped); nothing else. Its time is the floor of any kernel that stages
each query's blocks on its own (the pass, fla's parallel_nsa_fwd): the
bytes are fixed by the selection, and the L2 (where most of them hit)
delivers them at the rate measured here. Both are timed with CUDA events
after a warm-up call, median of --samples, fresh inputs before each.
"""

import argparse
import os
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir")
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 65536, 262144])
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args(argv)

    import torch
    import triton
    import triton.language as tl
    from pisa import aot
    from device_checks.check_attention import timed

    C, D, K = 64, 128, 8

    @triton.jit
    def gather(k_ptr, v_ptr, sel_ptr, out_ptr, K: tl.constexpr, C: tl.constexpr,
               D: tl.constexpr):
        q = tl.program_id(0).to(tl.int64)
        rows = tl.arange(0, C)
        cols = tl.arange(0, D)
        acc = tl.zeros([C, D], dtype=tl.float32)
        last = -1
        for j in tl.static_range(K):
            s = tl.load(sel_ptr + q * K + j)
            # docs/semantics.md, section 6: used when ascending, attended
            # when the block starts at or before the query.
            used = (s > last) & (s >= 0) & (s.to(tl.int64) * C <= q)
            last = tl.where(s > last, s, last)
            at = s.to(tl.int64) * C * D + rows[:, None] * D + cols[None, :]
            kk = tl.load(k_ptr + at, mask=used, other=0.0)
            vv = tl.load(v_ptr + at, mask=used, other=0.0)
            acc += kk.to(tl.float32) + vv.to(tl.float32)
        tl.store(out_ptr + q, tl.sum(acc))

    lib = aot.Library(os.path.join(args.dir, "libpaper.so"))
    ws = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    print("| N | attention pass ms | floor (gather only) ms | floor GB/s | bytes per query (KiB) | pass / floor |")
    print("|---|---|---|---|---|---|")
    for n in args.lengths:
        box = {}

        def fresh():
            box["q"] = torch.randn(1, 16, n, D, device="cuda").to(torch.bfloat16)
            box["k"] = torch.randn(1, 1, n, D, device="cuda").to(torch.bfloat16)
            box["v"] = torch.randn(1, 1, n, D, device="cuda").to(torch.bfloat16)
            box["sel"] = lib("prefill_selection", box["q"], box["k"], 0, workspace=ws)

        fresh()
        out = torch.empty(1, 16, n, D, dtype=torch.bfloat16, device="cuda")
        sums = torch.empty(n, dtype=torch.float32, device="cuda")
        attn = timed(lambda: lib("attend", box["q"], box["k"], box["v"], box["sel"], 0,
                                 out=out, workspace=ws), args.samples, fresh)
        floor = timed(lambda: gather[(n,)](box["k"], box["v"], box["sel"], sums, K=K, C=C,
                                           D=D, num_warps=4), args.samples, fresh)
        # The bytes: attended blocks of the last selection drawn.
        sel = box["sel"].reshape(n, K).long()
        pos = torch.arange(n, device="cuda").unsqueeze(1)
        prev = torch.cat([torch.full((n, 1), -1, device="cuda", dtype=torch.long),
                          torch.cummax(sel, dim=1).values[:, :-1]], dim=1)
        used = (sel > prev) & (sel >= 0) & (sel * C <= pos)
        nbytes = int(used.sum().item()) * C * D * 2 * 2
        print(f"| {n} | {attn:.3f} | {floor:.3f} | {nbytes / floor / 1e6:.0f} | "
              f"{nbytes / n / 1024:.0f} | {attn / floor:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
