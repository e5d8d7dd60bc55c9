"""Bad input to pisa-run: exit code 2, one line on stderr, no output file.

Each case names the invocation and a fragment the one error line must hold.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pisa-run", default="pisa-run")
    args = parser.parse_args()
    rng = np.random.default_rng()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        def save(name, array):
            path = os.path.join(tmp, name)
            np.save(path, array)
            return path

        def raw(name, data):
            path = os.path.join(tmp, name)
            with open(path, "wb") as f:
                f.write(data)
            return path

        q = save("q.npy", rng.standard_normal((1, 4, 100, 16)).astype(np.float32))
        k = save("k.npy", rng.standard_normal((1, 2, 100, 16)).astype(np.float32))
        k16 = save("k16.npy", rng.standard_normal((1, 2, 100, 16)).astype(np.float16))
        k3 = save("k3.npy", rng.standard_normal((2, 100, 16)).astype(np.float32))
        kd = save("kd.npy", rng.standard_normal((1, 2, 100, 8)).astype(np.float32))
        kb = save("kb.npy", rng.standard_normal((2, 2, 100, 16)).astype(np.float32))
        k3h = save("k3h.npy", rng.standard_normal((1, 3, 100, 16)).astype(np.float32))
        kshort = save("kshort.npy", rng.standard_normal((1, 2, 50, 16)).astype(np.float32))
        ki = save("ki.npy", rng.integers(0, 9, (1, 2, 100, 16)).astype(np.int32))
        k64 = save("k64.npy", rng.standard_normal((1, 2, 100, 16)))
        nan = rng.standard_normal((1, 2, 100, 16)).astype(np.float32)
        nan[0, 1, 7, 3] = np.nan
        knan = save("knan.npy", nan)
        inf = rng.standard_normal((1, 2, 100, 16)).astype(np.float16)
        inf[0, 0, 0, 0] = np.inf
        kinf = save("kinf.npy", inf)
        garbage = raw("garbage.npy", b"this is not an npy file at all")
        trunc = raw("trunc.npy", open(k, "rb").read()[:-100])
        out = os.path.join(tmp, "out.npy")

        def npy_with(header, payload=b""):
            """An .npy file (version 1.0) with this header text."""
            text = header.encode("latin1")
            pad = (64 - (10 + len(text) + 1) % 64) % 64
            text += b" " * pad + b"\n"
            return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + payload

        kdata = np.load(k).tobytes()
        kshape = "'shape': (1, 2, 100, 16)"
        hostile_npy = [
            ("npy duplicate descr", npy_with("{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, " + kshape + ", }", kdata),
             "key 'descr' appears twice in the header"),
            ("npy extra key", npy_with("{'descr': '<f4', 'fortran_order': False, " + kshape + ", 'x': 1}", kdata),
             "unexpected key 'x' in the header"),
            ("npy missing shape", npy_with("{'descr': '<f4', 'fortran_order': False}", kdata),
             "no 'shape' in the header"),
            ("npy trailing text", npy_with("{'descr': '<f4', 'fortran_order': False, " + kshape + "} x", kdata),
             "unexpected text after the header's dict"),
            ("npy huge extent", npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", kdata),
             "'shape' has an extent past 2^63 - 1"),
            ("npy negative extent", npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 4), }", kdata),
             "'shape' holds something other than non-negative integers"),
            ("npy size overflow", npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 8), }", kdata),
             "needs more than 2^64 bytes of data but the file holds 12800"),
            ("npy zero extent with data", npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 0, 100, 16), }", kdata),
             "has no elements but the file holds 12800 bytes"),
            ("npy zero extent", npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 0, 100, 16), }"),
             "expected every dimension of K to be >= 1 but got a dimension of 0"),
            ("npy header past the end", b"\x93NUMPY\x01\x00\xff\xff{'descr'", "runs past the end of the file"),
            ("npy fortran", npy_with("{'descr': '<f4', 'fortran_order': True, " + kshape + ", }", kdata),
             "is in Fortran order"),
        ]

        base = ["select", "--q", q, "--block-size", "8", "--topk", "4", "--out", out]
        v = save("v.npy", rng.standard_normal((1, 2, 100, 12)).astype(np.float32))
        v16 = save("v16.npy", rng.standard_normal((1, 2, 100, 12)).astype(np.float16))
        vshort = save("vshort.npy", rng.standard_normal((1, 2, 99, 12)).astype(np.float32))
        sel_bad = save("selbad.npy", np.zeros((1, 2, 100, 5), dtype=np.int32))
        lse_out = os.path.join(tmp, "lse.npy")
        attend = ["attend", "--q", q, "--k", k, "--block-size", "8", "--topk", "4",
                  "--out", out, "--lse-out", lse_out]
        # Packed varlen batches: Q [Tq, Hq, d], K [Tk, Hkv, d].
        qv = save("qv.npy", rng.standard_normal((30, 4, 16)).astype(np.float32))
        kv = save("kv.npy", rng.standard_normal((50, 2, 16)).astype(np.float32))
        cu = lambda name, x: save(name, np.array(x, dtype=np.int32))
        cuq, cuk = cu("cuq.npy", [0, 10, 30]), cu("cuk.npy", [0, 20, 50])
        varlen = ["select", "--q", qv, "--k", kv, "--block-size", "8", "--topk", "4", "--out", out]
        with_cu = lambda q_cu, k_cu: varlen + ["--cu-seqlens-q", q_cu, "--cu-seqlens-k", k_cu]
        cases = [
            ("varlen one cu", varlen + ["--cu-seqlens-q", cuq], "expected both --cu-seqlens-q and --cu-seqlens-k"),
            ("varlen rank", ["select", "--q", q, "--k", k, "--block-size", "8", "--topk", "4", "--out", out,
                             "--cu-seqlens-q", cuq, "--cu-seqlens-k", cuk],
             "expected Q to have rank 3 [Tq, Hq, d] with --cu-seqlens-q/k but got rank 4"),
            ("varlen start", with_cu(cu("c1.npy", [1, 10, 30]), cuk), "expected --cu-seqlens-q to start at 0 but got 1"),
            ("varlen decreasing", with_cu(cuq, cu("c2.npy", [0, 30, 20, 50])),
             "expected --cu-seqlens-k to be non-decreasing but entry 2 (20) < entry 1 (30)"),
            ("varlen end", with_cu(cuq, cu("c3.npy", [0, 20, 49])),
             "expected --cu-seqlens-k to end at 50 (the rows packed) but got 49"),
            ("varlen B", with_cu(cuq, cu("c4.npy", [0, 20, 40, 50])),
             "expected --cu-seqlens-q and --cu-seqlens-k to give the same B but got 2 and 3"),
            ("varlen Nq > N", with_cu(cu("c5.npy", [0, 25, 30]), cuk),
             "expected every sequence to have no more queries than keys but sequence 0 has 25 > 20"),
            ("varlen dtype", with_cu(save("c6.npy", np.array([0, 10, 30], dtype=np.int64)), cuk),
             "has dtype '<i8'; expected float32, float16 or int32"),
            ("varlen offset", with_cu(cuq, cuk) + ["--query-offset", "3"],
             "expected no --query-offset with --cu-seqlens-q/k"),
            ("varlen attend, batched V", ["attend", "--q", qv, "--k", kv, "--v", v, "--block-size", "8",
                                          "--topk", "4", "--out", out, "--cu-seqlens-q", cuq,
                                          "--cu-seqlens-k", cuk],
             "expected V to be float32 [Tk, Hkv, dv] with Tk = 50, Hkv = 2 and dv >= 1"),
            ("attend without V", attend, "missing required option '--v'"),
            ("decode offset", ["decode", "--q", q, "--k", k, "--block-size", "8", "--topk", "4",
                               "--query-offset", "1", "--out", out],
             "expected query offset (1) + queries in Q (100) <= keys in K (100)"),
            ("attend V dtype", attend + ["--v", v16], "expected V to have Q's dtype float32 but got float16"),
            ("attend V length", attend + ["--v", vshort], "expected V to have N = 100 like K but got 99"),
            ("attend selection shape", attend + ["--v", v, "--selection-in", sel_bad],
             "expected --selection-in to be int32 [B, Hkv, Nq, K] = [1, 2, 100, 4]"),
            ("attend unwritable lse", attend[:-1] + [os.path.join(tmp, "no", "dir", "l.npy"), "--v", v],
             "cannot"),
            ("missing file", base + ["--k", os.path.join(tmp, "nope.npy")], "cannot read"),
            ("not npy", base + ["--k", garbage], "not a valid .npy file"),
            ("truncated", base + ["--k", trunc], "needs 12800 bytes"),
            ("device input", base + ["--k", "/dev/zero"], "cannot read '/dev/zero': it is not a regular file"),
            ("directory input", base + ["--k", tmp], "it is not a regular file"),
        ] + [
            (name, base + ["--k", raw(name.replace(" ", "_") + ".npy", data)], fragment)
            for name, data, fragment in hostile_npy
        ] + [
            ("rank", base + ["--k", k3], "expected K to have rank 4"),
            ("int dtype", base + ["--k", ki], "expected K to be float32 or float16"),
            ("f64 dtype", base + ["--k", k64], "has dtype '<f8'"),
            ("dtype mismatch", base + ["--k", k16], "same dtype but got float32 and float16"),
            ("d mismatch", base + ["--k", kd], "expected K to have d = 16"),
            ("B mismatch", base + ["--k", kb], "expected K to have B = 1"),
            ("groups", base + ["--k", k3h], "expected Hq (4) to be a multiple of Hkv (3)"),
            ("N mismatch", base + ["--k", kshort], "<= keys in K (50)"),
            ("nan", base + ["--k", knan], "expected finite values in K"),
            ("inf f16", ["select", "--q", save("q16.npy", rng.standard_normal((1, 4, 100, 16)).astype(np.float16)),
                         "--k", kinf, "--block-size", "8", "--topk", "4", "--out", out],
             "expected finite values in K"),
            ("K < 3", base[:5] + ["--topk", "2", "--out", out, "--k", k], "expected --topk K in [3, 4096]"),
            # Found by trying the tool: these crashed (segfault) or ran for
            # minutes with 20 GB before the bounds.
            ("huge K", base[:5] + ["--topk", "1000000000", "--out", out, "--k", k],
             "expected --topk K in [3, 4096] (room for the forced blocks) but got 1000000000"),
            ("huge g", base + ["--k", k, "--branching", "1000000000"],
             "expected --branching g in [2, 64] but got 1000000000"),
            ("K past int64", base[:5] + ["--topk", "99999999999999999999", "--out", out, "--k", k],
             "expected an integer for '--topk'"),
            ("C < 1", ["select", "--q", q, "--k", k, "--block-size", "0", "--topk", "4", "--out", out],
             "expected --block-size C in [1, 1048576]"),
            ("g < 2", base + ["--k", k, "--branching", "1"], "expected --branching g in [2, 64]"),
            ("offset", base + ["--k", k, "--query-offset", "1"], "expected query offset (1) + queries in Q (100)"),
            ("negative offset", base + ["--k", k, "--query-offset", "-1"], "expected --query-offset >= 0"),
            ("scale", base + ["--k", k, "--scale", "nan"], "expected a finite positive --scale"),
            ("bad int", base + ["--k", k, "--branching", "two"], "expected an integer for '--branching'"),
            ("unknown option", base + ["--k", k, "--bogus", "1"], "unknown option '--bogus'"),
            # An option where a value belongs: the value is missing, not the
            # path of an output named '--k'.
            ("value missing", ["select", "--q", q, "--block-size", "8", "--topk", "4", "--out", "--k", k],
             "option '--out' needs a value but got option '--k'"),
            ("flag with a value", base + ["--k", k, "--no-cache=1"], "option '--no-cache' takes no value"),
            ("flag twice", base + ["--k", k, "--no-cache", "--no-cache"], "option '--no-cache' given twice"),
            ("missing option", ["select", "--q", q, "--k", k, "--topk", "4", "--out", out],
             "missing required option '--block-size'"),
            ("unknown command", ["frobnicate"], "unknown command 'frobnicate'"),
            ("plan bad q-tile", ["plan", "--group-size", "16", "--block-size", "64", "--q-tile", "0",
                                 "--queries", "10"], "expected q-tile >= 1 but got 0"),
            ("plan missing", ["plan", "--group-size", "16", "--block-size", "64", "--q-tile", "4"],
             "missing required option '--queries'"),
            ("plan policy", ["plan", "--group-size", "16", "--block-size", "64", "--q-tile", "4",
                             "--queries", "9", "--policy", "best"], "expected --policy paper or refined"),
        ]
        for name, argv, fragment in cases:
            proc = subprocess.run([args.pisa_run] + argv, capture_output=True, text=True)
            lines = proc.stderr.strip().splitlines()
            problems = []
            if proc.returncode != 2:
                problems.append(f"exit code {proc.returncode}, want 2")
            if len(lines) != 1:
                problems.append(f"{len(lines)} stderr lines, want 1")
            if fragment not in proc.stderr:
                problems.append(f"stderr lacks {fragment!r}")
            if any(os.path.exists(p) for p in (out, out + ".tmp", lse_out)):
                problems.append("left an output file")
                for p in (out, out + ".tmp", lse_out):
                    if os.path.exists(p):
                        os.remove(p)
            if problems:
                failures += 1
                print(f"FAIL {name}: {'; '.join(problems)}: {proc.stderr.strip()!r}")
            else:
                print(f"ok   {name}: {lines[0]}")
    print(f"{len(cases) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
