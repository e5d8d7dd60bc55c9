"""Draws programs over the GPU kernels' supported shapes from a seed, runs
--pisa-configure-kernels on their kernel-level ops (no kernel is lowered)
and compares every #pisa.kernel_config with this file's own statement of
the rules (docs/gpu.md, "Kernel configurations"): the stage-2 tile scorer
(wgmma, mma.sync or SIMT), the single-stage selection (warps per query,
candidate walk, leaf and level scorers) and sparse attention (register or
staged kernel).

usage: kernel_config_grid.py PISA_OPT SEED COUNT
"""

import random
import re
import subprocess
import sys

SMEM = 48 * 1024


def blocks_by_smem(nbytes):
    return (228 * 1024) // (nbytes + 1024)


def clamp(x, lo, hi):
    return max(lo, min(hi, x))


def sixteen_bit(elem):
    return elem in ("f16", "bf16")


def score_tiles_config(chip, elem, g_heads, d, c, q_tile):
    rows = q_tile * g_heads
    wgmma_bytes = 64 * d * 2 + c * d * 2
    if (chip == "sm_90a" and sixteen_bit(elem) and rows == 64
            and g_heads in (8, 16) and c % 8 == 0 and c <= 256
            and d % 64 == 0 and wgmma_bytes <= SMEM):
        regs = c // 2 + (80 if d > 128 else 48)
        hint = clamp(min(blocks_by_smem(wgmma_bytes), 65536 // (128 * regs)),
                     1, 8)
        return dict(variant="wgmma", threads=128, tiles_per_block=8,
                    min_blocks_per_sm=hint)
    rpw = 32 if rows % 32 == 0 else 16
    registers = g_heads % 16 == 0 and rpw % g_heads == 0
    stride = d + 8
    score_stride = c + (40 - c % 32) % 32 if rpw == 32 else c + 4
    if registers:
        key_offset = rows * stride * 2
    else:
        key_offset = max(rows * stride * 2, rows * score_stride * 4)
    nbytes = key_offset + c * stride * 2 + (0 if registers else rows * 4)
    if (sixteen_bit(elem) and rows % rpw == 0 and rows // rpw <= 32
            and c % 8 == 0 and d % 16 == 0 and nbytes <= SMEM):
        return dict(variant="mma_sync", threads=rows // rpw * 32,
                    rows_per_warp=rpw, tiles_per_block=8,
                    epilogue="registers" if registers else "shared",
                    min_blocks_per_sm=clamp(blocks_by_smem(nbytes), 1, 8))
    return dict(variant="simt", threads=-(-rows // 32) * 32,
                tiles_per_block=1)


def leaves_on_mma(elem, g_heads, d, c):
    return sixteen_bit(elem) and g_heads <= 16 and d % 32 == 0 and c % 8 == 0


def single_stage_config(elem, g_heads, d, c, fanout, top_k, nq):
    if nq is None or nq > 4:
        return dict(variant="simt", threads=128, warps_per_query=1)
    lanes = fanout * top_k <= 32
    cfg = dict(threads=512, warps_per_query=16,
               walk="lanes" if lanes else "ranks", min_blocks_per_sm=1)
    mma = lanes and leaves_on_mma(elem, g_heads, d, c)
    cfg["variant"] = "mma_sync" if mma else "simt"
    if lanes:
        cfg["level_variant"] = ("mma_sync" if mma and elem == "bf16"
                                and fanout == 2 else "simt")
    return cfg


def attention_epilogue(elem, g_heads, d, dv, c):
    fits = (leaves_on_mma(elem, g_heads, d, c) and d <= 128 and dv % 8 == 0
            and dv <= 128 and c % 16 == 0 and c <= 64)
    return "registers" if fits else "shared"


def parse(text):
    fields = {}
    for part in text.split(","):
        key, value = (s.strip() for s in part.split("="))
        fields[key] = int(value) if value.lstrip("-").isdigit() else value
    return fields


def draw(rng, i):
    elem = rng.choice(["f32", "f16", "bf16"])
    g_heads = rng.choice([1, 2, 4, 8, 16])
    hkv = rng.choice([1, 2])
    d = rng.choice([32, 64, 96, 128, 192, 256])
    c = rng.choice([16, 32, 48, 64, 128])
    kind = rng.choice(["two_stage", "single_stage", "attention"])
    case = dict(kind=kind, elem=elem, g=g_heads, d=d, c=c)
    hq = g_heads * hkv
    if kind == "attention":
        # The attention kernels take 16-bit inputs and C a multiple of 32.
        elem = case["elem"] = rng.choice(["f16", "bf16"])
        c = case["c"] = rng.choice([32, 64, 96, 128])
        dv = rng.choice([32, 64, 128, 256])
        top_k = rng.randint(1, 16)
        nq = rng.randint(1, 300)
        case.update(dv=dv)
        body = f"""
func.func @case{i}(%q: tensor<1x{hq}x{nq}x{d}x{elem}>, %k: tensor<1x{hkv}x?x{d}x{elem}>,
    %v: tensor<1x{hkv}x?x{dv}x{elem}>, %s: tensor<1x{hkv}x{nq}x{top_k}xi32>, %off: index)
    -> tensor<1x{hq}x{nq}x{dv}x{elem}> {{
  %o, %l = pisa.sparse_attention %q, %k, %v, %s, %off block_size = {c}
      : tensor<1x{hq}x{nq}x{d}x{elem}>, tensor<1x{hkv}x?x{d}x{elem}>, tensor<1x{hkv}x?x{dv}x{elem}>,
        tensor<1x{hkv}x{nq}x{top_k}xi32> -> tensor<1x{hq}x{nq}x{dv}x{elem}>, tensor<1x{hq}x{nq}xf32>
  return %o : tensor<1x{hq}x{nq}x{dv}x{elem}>
}}"""
        return case, body, ""
    fanout = rng.choice([2, 2, 3, 4])
    top_k = rng.randint(3, 20)
    if kind == "two_stage":
        q_tile = rng.choice([1, 2, 4, 8, 16])
        # Half the tiles have wgmma's 64 rows where G allows them.
        if 64 // g_heads <= 16 and rng.random() < 0.5:
            q_tile = 64 // g_heads
        nq = "?"
        case.update(q_tile=q_tile)
        option = f"force=two-stage q-tile={q_tile}"
    else:
        nq = rng.choice([1, 2, 3, 4, 5, 64, "?"])
        option = "force=single-stage"
    case.update(fanout=fanout, top_k=top_k, nq=None if nq == "?" else nq)
    pyr = "f32"
    body = f"""
func.func @case{i}(%q: tensor<1x{hq}x{nq}x{d}x{elem}>, %k: tensor<1x{hkv}x?x{d}x{elem}>,
    %p: tensor<1x{hkv}x?x{d}x{pyr}>, %off: index) -> tensor<1x{hkv}x{nq}x{top_k}xi32> {{
  %s = pisa.hier_topk %q, %k, %p, %off topk = {top_k} block_size = {c} branching = {fanout}
      : tensor<1x{hq}x{nq}x{d}x{elem}>, tensor<1x{hkv}x?x{d}x{elem}>, tensor<1x{hkv}x?x{d}x{pyr}>
        -> tensor<1x{hkv}x{nq}x{top_k}xi32>
  return %s : tensor<1x{hkv}x{nq}x{top_k}xi32>
}}"""
    return case, body, option


def main():
    pisa_opt, seed, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    cases = [draw(rng, i) for i in range(count)]
    checked = 0
    failures = []
    for chip in ("sm_90", "sm_90a"):
        for i, (case, body, option) in enumerate(cases):
            pipeline = (f"--pisa-select-schedule={option}" if option else
                        "--pisa-select-schedule")
            run = subprocess.run(
                [pisa_opt, "-", pipeline, "--pisa-decompose-to-kernels",
                 f"--pisa-configure-kernels=chip={chip}"],
                input=body, capture_output=True, text=True)
            if run.returncode != 0:
                failures.append(f"{chip} {case}: {run.stderr.strip()}")
                continue
            configs = {}
            for op, text in re.findall(
                    r"(pisa\.kernel\.\w+) .*?kernel_config = "
                    r"#pisa\.kernel_config<([^>]*)>", run.stdout):
                configs.setdefault(op, []).append(parse(text))
            expected = {}
            if case["kind"] == "attention":
                epi = attention_epilogue(case["elem"], case["g"], case["d"],
                                         case["dv"], case["c"])
                got = configs["pisa.kernel.sparse_attention"][0]
                hint = got.pop("min_blocks_per_sm", None)
                if hint is None or not 1 <= hint <= (
                        2 if epi == "registers" else 16):
                    failures.append(f"{chip} {case}: hint {hint}")
                expected["pisa.kernel.sparse_attention"] = dict(
                    variant="mma_sync", threads=128, epilogue=epi)
                configs["pisa.kernel.sparse_attention"] = [got]
            elif case["kind"] == "two_stage":
                expected["pisa.kernel.score_tiles"] = score_tiles_config(
                    chip, case["elem"], case["g"], case["d"], case["c"],
                    case["q_tile"])
            else:
                expected["pisa.kernel.select_single_stage"] = \
                    single_stage_config(case["elem"], case["g"], case["d"],
                                        case["c"], case["fanout"],
                                        case["top_k"], case["nq"])
            for op, want in expected.items():
                got = configs.get(op, [None])[0]
                checked += 1
                if got != want:
                    failures.append(f"{chip} {case}: {op} got {got}, "
                                    f"expected {want}")
    for f in failures[:20]:
        print("MISMATCH", f)
    print(f"{checked} configurations checked, {len(failures)} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
