"""GPU-free tests of the decode, attention and sweep checks' generators
(device_checks.check_decode, device_checks.check_attention, device_checks.sweep):
the programs they compile are valid pisa, the attention draw marks the
shapes the GPU kernel does not take, the sweep's wgmma space is where
the compiler picks the wgmma scorer, and `build` hands pisa-compile the
kernel-config entries it is given."""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest
import zlib

from device_checks import check_attention, check_attention_grad, check_decode, sweep

PISA_OPT = os.environ.get("PISA_OPT", "pisa-opt")


def verify(test, text):
    r = subprocess.run([PISA_OPT, "-"], input=text, capture_output=True, text=True)
    test.assertEqual(r.returncode, 0, r.stderr)
    return r.stdout


class AttentionDrawTest(unittest.TestCase):
    def test_outside_shapes_name_the_limit_they_break(self):
        rng = random.Random(7)
        cfgs = [check_attention.draw_config(rng, i) for i in range(400)]
        outside = [c for c in cfgs if "expect_error" in c]
        self.assertTrue(20 < len(outside) < 120, len(outside))
        for c in cfgs:
            # C = 16 only where the register kernel takes the shape.
            block = ((c["C"] % 32 == 0 and c["C"] <= 128)
                     or (c["C"] == 16 and AttentionRegisterDrawTest.in_registers(c)))
            inside = (c["dtype"] in ("f16", "bf16") and block
                      and c["d"] % 16 == 0 and c["dv"] % 32 == 0
                      and c["G"] <= 64
                      and check_attention.shared_bytes(c) <= 227 * 1024)
            self.assertEqual("expect_error" not in c, inside, c)
        self.assertTrue(any(c["C"] == 16 and "expect_error" not in c for c in cfgs))
        self.assertTrue(any(c["C"] == 16 and "expect_error" in c for c in cfgs))

    def test_shared_bytes_of_the_paper_setting(self):
        # SparseAttention.h's staged tiles: Q, K, V, S, P, O of 16 rows and
        # the block list (the register kernel takes this shape, with less).
        self.assertEqual(check_attention.shared_bytes(check_attention.PAPER), 54304)


class AttentionRegisterDrawTest(unittest.TestCase):
    @staticmethod
    def in_registers(c):
        # SparseAttention.h, attendsInRegisters: the register kernel's space.
        return (c["dtype"] in ("f16", "bf16") and c["G"] <= 16
                and c["d"] % 32 == 0 and c["d"] <= 128 and c["dv"] % 8 == 0
                and c["dv"] <= 128 and c["C"] % 16 == 0 and c["C"] <= 64)

    def test_the_register_space_draw_stays_inside_it_and_covers_it(self):
        rng = random.Random(9)
        cfgs = [check_attention.draw_config(rng, i, "registers") for i in range(300)]
        self.assertTrue(all(self.in_registers(c) and "expect_error" not in c
                            for c in cfgs))
        for key, values in (("G", range(1, 17)), ("d", (32, 64, 96, 128)),
                            ("dv", (32, 64, 96, 128)), ("C", (16, 32, 64))):
            self.assertEqual({c[key] for c in cfgs}, set(values), key)

    def test_the_general_draw_reaches_both_kernels(self):
        rng = random.Random(10)
        cfgs = [c for c in (check_attention.draw_config(rng, i) for i in range(400))
                if "expect_error" not in c]
        inside = sum(self.in_registers(c) for c in cfgs)
        self.assertTrue(10 < inside < len(cfgs) - 10, inside)


class DecodeDrawTest(unittest.TestCase):
    def test_every_other_configuration_takes_the_fast_paths(self):
        # docs/gpu.md: the decode block's lane walk (g * K <= 32), and its
        # tensor-core leaves (16-bit, G <= 16, d % 32 == 0, C % 8 == 0).
        cfgs = check_decode.draw_configs(11, 200, 20000)
        fast = cfgs[1::2]
        self.assertTrue(all(c["g"] * c["K"] <= 32 for c in fast))
        mma = [c for c in fast if c["dtype"] != "f32" and c["G"] <= 16
               and c["d"] % 32 == 0 and c["C"] % 8 == 0]
        self.assertGreater(len(mma), len(fast) // 2)
        # ... and the others range over the whole space.
        self.assertTrue(any(c["g"] * c["K"] > 32 for c in cfgs[0::2]))
        self.assertTrue(all(c["Ncap"] % c["S"] == 0 for c in cfgs))


    def test_the_tensor_levels_draw_stays_inside_that_scorer(self):
        # docs/gpu.md: bf16, G <= 16, d % 32 == 0, C % 8 == 0, g = 2 and
        # g * K <= 32 (the lane walk).
        cfgs = check_decode.draw_configs(11, 200, 20000, space="tensor-levels")
        self.assertTrue(all(c["dtype"] == "bf16" and c["G"] <= 16 and c["g"] == 2
                            and c["K"] <= 16 and c["d"] % 32 == 0
                            and c["C"] % 8 == 0 for c in cfgs))
        self.assertEqual({c["G"] for c in cfgs}, set(range(1, 17)))
        self.assertGreater(len({(c["d"], c["C"]) for c in cfgs}), 10)


class SweepWgmmaDrawTest(unittest.TestCase):
    def test_the_wgmma_draw_stays_inside_its_space_and_covers_it(self):
        cfgs = sweep.draw(5, 200, space="wgmma")
        self.assertTrue(all(c["G"] == 16 and c["dtype"] in ("f16", "bf16")
                            and c["mode"] != "decode"
                            and 2 * (128 * c["d"] + c["C"] * c["d"]) <= 48 * 1024
                            for c in cfgs))
        self.assertEqual({(c["d"], c["C"]) for c in cfgs},
                         set(sweep.WGMMA_SPACE["d_C"]))
        self.assertEqual({c["mode"] for c in cfgs}, {"prefill", "chunk"})

    def test_the_whole_space_draw_is_unchanged_by_the_option(self):
        # The seeds docs/testing.md records still draw the same shapes: seed
        # 12's first 30 as drawn before --space existed (1071626).
        cfgs = sweep.draw(12, 30)
        self.assertEqual(zlib.crc32(json.dumps(cfgs, sort_keys=True).encode()),
                         155710082)
        self.assertEqual([(c["G"], c["d"], c["C"], c["N"], c["mode"]) for c in cfgs[:3]],
                         [(32, 32, 64, 54215, "prefill"), (16, 64, 32, 1409, "decode"),
                          (1, 128, 32, 67761, "chunk")])

    @unittest.skipUnless(shutil.which(PISA_OPT), "pisa-opt not on PATH")
    def test_the_compiler_scores_the_wgmma_space_with_wgmma(self):
        # sm_90a (the default chip) picks the wgmma scorer for every draw
        # with a two-stage schedule (more than one query), sm_90 never.
        for cfg in sweep.draw(6, 5, space="wgmma", max_n=5000):
            cfg.update(dynamic=False, token_major=False)
            for chip, expected in (("sm_90a", cfg["Nq"] > 1), ("sm_90", False)):
                r = subprocess.run(
                    [PISA_OPT, "-", "--pisa-lower-to-nvvm-pipeline=format=isa chip=" + chip],
                    input=sweep.program(cfg), capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stderr[-2000:])
                self.assertEqual("select_stage2_score_tiles_wgmma" in r.stdout, expected,
                                 (chip, cfg))


@unittest.skipUnless(shutil.which(PISA_OPT), "pisa-opt not on PATH")
class ProgramTest(unittest.TestCase):
    def test_attention_programs_verify(self):
        rng = random.Random(3)
        for i in range(12):
            cfg = check_attention.draw_config(rng, i)
            if "expect_error" in cfg:
                continue
            out = verify(self, check_attention.program(cfg))
            self.assertIn("token_major", out)  # attend_tm

    def test_decode_programs_verify(self):
        rng = random.Random(4)
        for i in range(8):
            c = sweep.draw_config(rng, i)
            cfg = {x: c[x] for x in ("Hkv", "G", "d", "C", "K", "g", "dtype")}
            cfg["S"] = rng.choice((1, 3, 16, cfg["C"]))
            cfg["Ncap"] = cfg["S"] * rng.randint(1, 40)
            out = verify(self, check_decode.program(cfg))
            self.assertIn("block_table", out)  # decode_batch_paged



@unittest.skipUnless(shutil.which("pisa-compile"), "pisa-compile not on PATH")
class BuildFlagsTest(unittest.TestCase):
    """`build --kernel-config` reaches pisa-compile: an entry it refuses
    rejects the library with pisa-compile's error, and the manifest
    records the entry."""

    def build(self, module, manifest):
        with tempfile.TemporaryDirectory() as out:
            args = argparse.Namespace(
                out=out, seed=1, count=0, paper=True, paper_k=[], space="all",
                union_queries=0, dq_from_scores=False, jobs=1,
                kernel_config=["attention:union_queries=4"],
                pisa_compile=shutil.which("pisa-compile"))
            self.assertEqual(module.build(args), 1)
            with open(os.path.join(out, manifest)) as f:
                return json.load(f)

    def test_the_forward_build_passes_the_entries(self):
        recorded = self.build(check_attention, "attention.json")
        self.assertEqual(recorded["flags"], ["--kernel-config", "attention:union_queries=4"])
        self.assertEqual(recorded["cases"], [])
        self.assertIn("'attention' is not a kernel-level op", recorded["rejected"][0]["error"])

    def test_the_backward_build_passes_the_entries(self):
        recorded = self.build(check_attention_grad, "attention_grad.json")
        self.assertEqual(recorded["flags"], ["--kernel-config", "attention:union_queries=4"])
        self.assertEqual(recorded["cases"], [])
        self.assertIn("'attention' is not a kernel-level op", recorded["rejected"][0]["error"])

    def test_the_selection_cases_pass_the_entries(self):
        with tempfile.TemporaryDirectory() as out:
            proc = subprocess.run(
                [sys.executable, "-m", "device_checks.cases", out, "--bench-only",
                 "--pisa-compile", shutil.which("pisa-compile"),
                 "--kernel-config", "score_tiles:bogus=1"],
                capture_output=True, text=True)
            self.assertEqual(proc.returncode, 1)
            self.assertIn("bench4096: pisa-compile: error: kernel-config of pisa.kernel.score_tiles: "
                          "unknown kernel_config field 'bogus'",
                          proc.stderr)
            self.assertFalse(os.path.exists(os.path.join(out, "cases.json")))


class EntryPointTest(unittest.TestCase):
    """Every device_checks module starts as `python3 -m device_checks.NAME`
    (an import cycle between two of them breaks only the one run as
    __main__); the GPU-side ones stop here for want of torch."""

    def test_every_module_starts(self):
        package = os.path.dirname(check_attention.__file__)
        names = sorted(f[:-3] for f in os.listdir(package)
                       if f.endswith(".py") and not f.startswith("__"))
        self.assertIn("sweep", names)
        for name in names:
            proc = subprocess.run([sys.executable, "-m", f"device_checks.{name}", "--help"],
                                  capture_output=True, text=True)
            if "No module named 'torch'" in proc.stderr:
                continue
            self.assertNotIn("Traceback", proc.stderr, name)


if __name__ == "__main__":
    unittest.main()
