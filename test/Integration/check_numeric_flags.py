"""Every numeric flag, pass option and op attribute at the integer edges.

Drives each numeric option of `pisa-run select/attend/decode/plan`, the
`q-tile` option of --pisa-select-schedule and the integer attributes of
pisa.hier_topk through pisa-opt with each of {0, -1, 1, 2^31-1, 2^31, 2^32,
2^53, 2^62, 2^63-1, 2^63, 2^64} and requires a clear refusal (exit 2 for
pisa-run, 1 for pisa-opt; one error line from pisa-run; no signal) or a
correct answer: a selection equal to pisa_reference.select (near-tie rule
of the other checks), a schedule equal to the IO-cost rule computed here
with Python's exact integers.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import pisa_reference  # noqa: E402

EDGES = [0, -1, 1, 2**31 - 1, 2**31, 2**32, 2**53, 2**62, 2**63 - 1, 2**63, 2**64]
TOL = 5e-3


def two_stage(g, c, q):
    """The crossover rule G + C/Q < C, exactly (docs/schedule.md)."""
    return g * q + c < c * q


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pisa-run", default="pisa-run")
    parser.add_argument("--pisa-opt", default="pisa-opt")
    parser.add_argument("--pisa-compile", default="")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    tally = harness.Tally(verbose=False)
    report = tally.report

    def refusal_problems(proc, code):
        problems = []
        if proc.returncode < 0:
            problems.append(f"killed by signal {-proc.returncode}")
        elif proc.returncode != code:
            problems.append(f"exit {proc.returncode}, want {code}: {proc.stderr.strip()!r}")
        elif code == 2 and len(proc.stderr.strip().splitlines()) != 1:
            problems.append(f"not one error line: {proc.stderr!r}")
        return problems

    with tempfile.TemporaryDirectory() as tmp:
        cache = os.path.join(tmp, "cache")
        # Small random problems: N not a multiple of C, G = 2.
        B, Hkv, G, N, d = 1, 2, 2, 37, 8
        q = rng.standard_normal((B, Hkv * G, N, d)).astype(np.float32)
        k = rng.standard_normal((B, Hkv, N, d)).astype(np.float32)
        v = rng.standard_normal((B, Hkv, N, 4)).astype(np.float32)
        qp, kp, vp = (os.path.join(tmp, f"{n}.npy") for n in "qkv")
        np.save(qp, q)
        np.save(kp, k)
        np.save(vp, v)
        out = os.path.join(tmp, "out.npy")
        base = {"block-size": 4, "topk": 3, "branching": 2, "query-offset": 0}

        for command in ("select", "attend", "decode"):
            for flag in base:
                for value in EDGES:
                    opts = dict(base, **{flag: value})
                    argv = [args.pisa_run, command, "--q", qp, "--k", kp,
                            "--cache-dir", cache, "--out", out]
                    if command == "attend":
                        argv += ["--v", vp]
                    for name, val in opts.items():
                        argv += [f"--{name}", str(val)]
                    if os.path.exists(out):
                        os.remove(out)
                    proc = subprocess.run(argv, capture_output=True, text=True)
                    name = f"{command} --{flag} {value}"
                    if proc.returncode != 0:
                        report(name, refusal_problems(proc, 2) +
                               (["left an output"] if os.path.exists(out) else []))
                        continue
                    C, K, g, off = (opts[f] for f in ("block-size", "topk", "branching",
                                                      "query-offset"))
                    if command == "attend":
                        report(name, [] if np.load(out).shape == (B, Hkv * G, N, 4)
                               else ["bad output shape"])
                        continue
                    want, gaps = pisa_reference.select(q, k, C, K, g, offset=off)
                    got = np.load(out)
                    problems = []
                    if got.shape != want.shape:
                        problems.append(f"shape {got.shape}, want {want.shape}")
                    else:
                        _, _, wrong = harness.near_tie_rule(got, want, gaps, TOL)
                        if wrong.any():
                            problems.append(f"{int(wrong.sum())} rows differ from the reference")
                    report(name, problems)

        plan = {"group-size": 16, "block-size": 64, "q-tile": 4, "queries": 4096,
                "head-dim": 128, "keys": 4096, "topk": 8, "branching": 2}
        for flag in plan:
            for value in EDGES:
                opts = dict(plan, **{flag: value})
                argv = [args.pisa_run, "plan"]
                for name, val in opts.items():
                    argv += [f"--{name}", str(val)]
                proc = subprocess.run(argv, capture_output=True, text=True)
                name = f"plan --{flag} {value}"
                if proc.returncode != 0:
                    report(name, refusal_problems(proc, 2))
                    continue
                got = json.loads(proc.stdout)
                gs, cs, qs, n = (opts[f] for f in ("group-size", "block-size", "q-tile", "queries"))
                want = "single_stage" if n == 1 else (
                    "two_stage" if two_stage(gs, cs, qs) else "single_stage")
                problems = [] if got["schedule"] == want else [
                    f"schedule {got['schedule']}, want {want}: {got['reason']}"]
                if not all(x < 2**63 for x in opts.values()):
                    problems.append("accepted a value past 2^63 - 1")
                report(name, problems)

        # The schedule pass's q-tile option and hier_topk's attributes.
        program = """
func.func @f(%q: tensor<1x16x4096x128xbf16>, %k: tensor<1x1x4096x128xbf16>,
             %p: tensor<1x1x127x128xf32>) -> tensor<1x1x4096x8xi32> {
  %off = arith.constant 0 : index
  %s = pisa.hier_topk %q, %k, %p, %off topk = TOPK block_size = BLOCK branching = FAN
      : tensor<1x16x4096x128xbf16>, tensor<1x1x4096x128xbf16>,
        tensor<1x1x127x128xf32> -> tensor<1x1x4096x8xi32>
  return %s : tensor<1x1x4096x8xi32>
}
"""
        prog = os.path.join(tmp, "p.mlir")
        with open(prog, "w") as f:
            f.write(program.replace("TOPK", "8").replace("BLOCK", "64").replace("FAN", "2"))
        for value in EDGES:
            proc = subprocess.run(
                [args.pisa_opt, prog, f"--pisa-select-schedule=q-tile={value}"],
                capture_output=True, text=True)
            name = f"--pisa-select-schedule=q-tile={value}"
            if proc.returncode != 0:
                report(name, refusal_problems(proc, 1))
                continue
            m = re.search(r"#pisa.schedule<(\w+)", proc.stdout)
            want = "two_stage" if two_stage(16, 64, value) else "single_stage"
            problems = [] if m and m.group(1) == want else [
                f"schedule {m.group(1) if m else None}, want {want}"]
            if not 1 <= value <= 1024:
                problems.append("accepted a q-tile outside [1, 1024]")
            report(name, problems)
        # pisa-compile's --q-tile: a refusal naming the limit, or a library
        # built with the schedule the rule gives.
        if args.pisa_compile:
            for value in EDGES:
                lowered = os.path.join(tmp, "lowered.mlir")
                if os.path.exists(lowered):
                    os.remove(lowered)
                with open(prog, "w") as f:
                    f.write(program.replace("TOPK", "8").replace("BLOCK", "64")
                            .replace("FAN", "2"))
                proc = subprocess.run(
                    [args.pisa_compile, prog, "--q-tile", str(value), "--emit", "mlir",
                     "-o", lowered], capture_output=True, text=True)
                name = f"pisa-compile --q-tile {value}"
                if proc.returncode != 0:
                    problems = refusal_problems(proc, 2)
                    if 1 <= value < 2**63 and not (two_stage(16, 64, value) and 16 * value > 1024):
                        problems.append(f"refused a usable q-tile: {proc.stderr.strip()}")
                    if value >= 1 and value < 2**63 and "above the GPU limit" in proc.stderr \
                            and f"{value} * 16" not in proc.stderr:
                        problems.append(f"the message does not name the factors: {proc.stderr.strip()}")
                    report(name, problems)
                    continue
                text = open(lowered).read()
                want = "two_stage" if two_stage(16, 64, value) else "single_stage"
                report(name, [] if want in text
                       else [f"no {want} kernel in the library"])
        for attr in ("TOPK", "BLOCK", "FAN"):
            for value in EDGES:
                vals = {"TOPK": "8", "BLOCK": "64", "FAN": "2", attr: str(value)}
                text = program
                for key, val in vals.items():
                    text = text.replace(key, val)
                with open(prog, "w") as f:
                    f.write(text)
                proc = subprocess.run([args.pisa_opt, prog], capture_output=True, text=True)
                name = f"hier_topk {attr.lower()} = {value}"
                if proc.returncode != 0:
                    report(name, refusal_problems(proc, 1))
                    continue
                # Accepted only where the op's contract holds (the shapes
                # above fix K = 8, C = 64, g = 2).
                report(name, [] if str(value) == {"TOPK": "8", "BLOCK": "64", "FAN": "2"}[attr]
                       else [f"accepted {attr.lower()} = {value}"])

    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
