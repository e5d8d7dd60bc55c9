"""Asks kernel_config fields with --pisa-configure-kernels' kernel-config
option on programs drawn over the supported shapes (kernel_config_grid.py's
draws, plus sparse_attention_grad with and without grad-dq-from-scores) and
checks what any asked field must do:

- asking a field at the value the pass chooses changes nothing (the whole
  output is the same);
- a field drawn at random (any field, any value the attribute allows, of
  one op kind of the program) is either kept on every op of that kind,
  leaving every other kind's configuration as chosen, or refused with one
  error on such an op naming the field and value; never a crash.

usage: kernel_config_asked.py PISA_OPT SEED COUNT
"""

import random
import re
import subprocess
import sys

import kernel_config_grid as grid

VALUES = {
    "variant": ["simt", "mma_sync", "wgmma"],
    "threads": [32, 64, 128, 160, 256, 512],
    "warps_per_query": [1, 4, 16],
    "walk": ["lanes", "ranks"],
    "level_variant": ["simt", "mma_sync"],
    "rows_per_warp": [16, 32],
    "tiles_per_block": [1, 4, 8],
    "epilogue": ["registers", "shared"],
    "union_queries": [1, 3, 4, 7, 8],
    "min_blocks_per_sm": [1, 2, 3, 8],
    "prefetch_ahead": [0, 1, 2, 3],
}
CONFIG = re.compile(r"(pisa\.kernel\.\w+) .*?kernel_config = #pisa\.kernel_config<([^>]*)>")


def draw_grad(rng, i):
    elem = rng.choice(["f16", "bf16"])
    g_heads = rng.choice([1, 2, 8, 16])
    hkv = rng.choice([1, 2])
    d = rng.choice([32, 64, 128, 192])
    dv = rng.choice([32, 64, 128])
    # C = 16 only where the register kernels take the sizes.
    c = rng.choice([16, 32, 64] if d <= 128 and d + dv <= 256 else [32, 64])
    top_k = rng.randint(1, 16)
    hq = g_heads * hkv
    q = f"tensor<1x{hq}x?x{d}x{elem}>"
    k = f"tensor<1x{hkv}x?x{d}x{elem}>"
    v = f"tensor<1x{hkv}x?x{dv}x{elem}>"
    s = f"tensor<1x{hkv}x?x{top_k}xi32>"
    o = f"tensor<1x{hq}x?x{dv}x{elem}>"
    l = f"tensor<1x{hq}x?xf32>"
    dq = f"tensor<1x{hq}x?x{d}xf32>"
    dk = f"tensor<1x{hkv}x?x{d}xf32>"
    dvt = f"tensor<1x{hkv}x?x{dv}xf32>"
    body = f"""
func.func @case{i}(%q: {q}, %k: {k}, %v: {v}, %s: {s}, %off: index, %o: {o}, %l: {l}, %do: {o})
    -> ({dq}, {dk}, {dvt}) {{
  %dq, %dk, %dv = pisa.sparse_attention_grad %q, %k, %v, %s, %off out(%o, %l) grad(%do) block_size = {c}
      : {q}, {k}, {v}, {s}, {o}, {l}, {o} -> {dq}, {dk}, {dvt}
  return %dq, %dk, %dv : {dq}, {dk}, {dvt}
}}"""
    case = dict(kind="grad", elem=elem, g=g_heads, d=d, dv=dv, c=c, top_k=top_k)
    return case, body, rng.choice(["", "grad-dq-from-scores"])


def configure(pisa_opt, body, schedule, decompose, chip, asked=None):
    option = f"chip={chip}" + (f" kernel-config={asked}" if asked else "")
    pipeline = [pisa_opt, "-", f"--pisa-select-schedule{'=' + schedule if schedule else ''}",
                f"--pisa-decompose-to-kernels{'=' + decompose if decompose else ''}",
                f"--pisa-configure-kernels={option}"]
    return subprocess.run(pipeline, input=body, capture_output=True, text=True)


def configs(text):
    found = {}
    for op, fields in CONFIG.findall(text):
        found.setdefault(op, []).append(grid.parse(fields))
    return found


def main():
    pisa_opt, seed, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    checked, kept, refused, failures = 0, 0, 0, []
    for i in range(count):
        if rng.random() < 0.4:
            case, body, decompose = draw_grad(rng, i)
            schedule = ""
        else:
            case, body, schedule = grid.draw(rng, i)
            decompose = ""
        chip = rng.choice(["sm_90", "sm_90a"])
        base = configure(pisa_opt, body, schedule, decompose, chip)
        if base.returncode != 0:
            failures.append(f"{case}: not configured: {base.stderr.strip()[:300]}")
            continue
        chosen = configs(base.stdout)
        # A chosen field asked again changes nothing.
        op = rng.choice(sorted(chosen))
        field, value = rng.choice(sorted(chosen[op][0].items()))
        entry = f"{op[len('pisa.kernel.'):]}:{field}={value}"
        again = configure(pisa_opt, body, schedule, decompose, chip, entry)
        checked += 1
        if again.returncode != 0 or again.stdout != base.stdout:
            failures.append(f"{case} {chip}: asking the chosen {entry} changed the output: "
                            f"{again.stderr.strip()[:300]}")
        # A drawn field: kept everywhere on its kind, or refused by name.
        op = rng.choice(sorted(chosen))
        # Half the draws among the fields the op's kernel has.
        fields = sorted(chosen[op][0]) if rng.random() < 0.5 else sorted(VALUES)
        field = rng.choice(fields)
        value = rng.choice(VALUES[field])
        entry = f"{op[len('pisa.kernel.'):]}:{field}={value}"
        run = configure(pisa_opt, body, schedule, decompose, chip, entry)
        checked += 1
        if run.returncode == 0:
            kept += 1
            got = configs(run.stdout)
            for other, fields in got.items():
                if other == op:
                    if any(f.get(field) != value for f in fields):
                        failures.append(f"{case} {chip}: {entry} not kept: {fields}")
                elif fields != chosen.get(other):
                    failures.append(f"{case} {chip}: {entry} changed {other}")
        else:
            refused += 1
            errors = [line for line in run.stderr.splitlines() if ": error: " in line]
            named = f"'{op}' op kernel_config {field} = {value}"
            if run.returncode != 1 or len(errors) < 1 or not all(named in e for e in errors):
                failures.append(f"{case} {chip}: {entry}: rc {run.returncode}: "
                                f"{run.stderr.strip()[:300]}")
    for f in failures[:20]:
        print("MISMATCH", f)
    print(f"{checked} asks checked ({kept} drawn kept, {refused} refused), "
          f"{len(failures)} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
