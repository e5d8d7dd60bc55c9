"""GPU-free tests of the sweep's generator and pass rule (device_checks.sweep)."""

import os
import shutil
import subprocess
import unittest

import numpy as np

from device_checks import sweep


class DrawTest(unittest.TestCase):
    def test_same_seed_same_configurations(self):
        self.assertEqual(sweep.draw(5, 50), sweep.draw(5, 50))
        self.assertNotEqual(sweep.draw(5, 50), sweep.draw(6, 50))

    def test_configurations_cover_the_space(self):
        cfgs = sweep.draw(1, 2000)
        for c in cfgs:
            self.assertTrue(1 <= c["B"] <= 3 and 1 <= c["Hkv"] <= 8)
            self.assertTrue(1 <= c["G"] <= 32 and 3 <= c["K"] <= 32 and 2 <= c["g"] <= 4)
            self.assertIn(c["d"], sweep.HEAD_DIMS)
            self.assertIn(c["C"], sweep.BLOCK_SIZES)
            self.assertTrue(1 <= c["N"] <= 300000)
            self.assertTrue(c["offset"] >= 0 and c["offset"] + c["Nq"] <= c["N"])
            if c["mode"] == "decode":
                self.assertEqual(c["Nq"], 1)
        seen = lambda f: {f(c) for c in cfgs}
        self.assertEqual(seen(lambda c: c["dtype"]), set(sweep.DTYPES))
        self.assertEqual(seen(lambda c: c["inputs"]), set(sweep.INPUTS))
        self.assertEqual(seen(lambda c: c["mode"]), {"prefill", "chunk", "decode"})
        self.assertEqual(seen(lambda c: c["G"]), set(range(1, 33)))
        # The edges around the block size all occur.
        self.assertTrue(any(c["N"] < c["C"] for c in cfgs))
        self.assertTrue(any(c["N"] == c["C"] for c in cfgs))
        self.assertTrue(any(c["N"] > c["C"] and c["N"] % c["C"] == 1 for c in cfgs))
        self.assertTrue(any(c["N"] > c["C"] and c["N"] % c["C"] == c["C"] - 1 for c in cfgs))
        self.assertTrue(any(c["N"] > 100000 for c in cfgs))

    def test_sample_rows_keeps_the_edges(self):
        rng = np.random.default_rng(0)
        cfg = {"Nq": 10000, "C": 64}
        rows = sweep.sample_rows(rng, cfg, 500)
        self.assertEqual(len(rows), 500)
        for r in list(range(64)) + list(range(10000 - 64, 10000)):
            self.assertIn(r, rows)
        self.assertEqual(list(sweep.sample_rows(rng, {"Nq": 7, "C": 64}, 500)), list(range(7)))

    def test_tie_keys_repeat_every_block(self):
        rng = np.random.default_rng(0)
        k = sweep.make_keys(rng, {"C": 16, "inputs": "ties"}, (1, 2, 50, 8))
        np.testing.assert_array_equal(k[:, :, :16], k[:, :, 16:32])
        self.assertTrue(np.all(k * 8 == np.round(k * 8)))  # exact in f16


class VerdictTest(unittest.TestCase):
    def setUp(self):
        self.want = np.tile(np.arange(4, dtype=np.int32), (2000, 1))

    def test_equal_passes(self):
        ok, s = sweep.verdict(self.want.copy(), self.want, np.full(2000, np.inf))
        self.assertTrue(ok)
        self.assertEqual(s["differ"], 0)

    def test_difference_at_a_near_tie_is_excused(self):
        got = self.want.copy()
        got[7] = [0, 1, 2, 9]
        gaps = np.full(2000, np.inf)
        gaps[7] = 1e-4
        ok, s = sweep.verdict(got, self.want, gaps)
        self.assertTrue(ok)
        self.assertEqual((s["differ"], s["unexplained"]), (1, 0))

    def test_difference_without_a_tie_fails(self):
        got = self.want.copy()
        got[7] = [0, 1, 2, 9]
        ok, s = sweep.verdict(got, self.want, np.full(2000, 0.5))
        self.assertFalse(ok)
        self.assertEqual(s["unexplained"], 1)
        self.assertEqual(s["first_unexplained"]["at"], (7,))

    def test_exact_tie_is_never_excused(self):
        got = self.want.copy()
        got[3] = [0, 1, 2, 5]
        gaps = np.full(2000, np.inf)
        gaps[3] = 0.0
        ok, _ = sweep.verdict(got, self.want, gaps)
        self.assertFalse(ok)

    def test_many_flips_at_rounding_gaps_pass(self):
        # A burst of true near ties: every flip within f32 rounding.
        got = self.want.copy()
        got[:10] = [0, 1, 2, 9]
        gaps = np.full(2000, 1e-6)
        ok, s = sweep.verdict(got, self.want, gaps)
        self.assertTrue(ok)
        self.assertEqual(s["max_differing_gap"], 1e-6)

    def test_too_many_excused_rows_fail(self):
        got = self.want.copy()
        got[:10] = [0, 1, 2, 9]
        gaps = np.full(2000, 1e-4)
        ok, s = sweep.verdict(got, self.want, gaps)
        self.assertFalse(ok)  # 99.5% < 99.9%
        self.assertEqual(s["unexplained"], 0)


@unittest.skipUnless(shutil.which(os.environ.get("PISA_OPT", "pisa-opt")), "pisa-opt not on PATH")
class ProgramTest(unittest.TestCase):
    def test_programs_verify(self):
        # The generated programs are valid pisa for drawn configurations,
        # static and dynamic, head-major and token-major.
        for i, cfg in enumerate(sweep.draw(3, 25)):
            cfg = dict(cfg, dynamic=i % 2 == 1, token_major=i % 3 == 0)
            r = subprocess.run([os.environ.get("PISA_OPT", "pisa-opt"), "-"],
                               input=sweep.program(cfg), capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, f"{cfg}: {r.stderr}")
            if cfg["token_major"]:
                self.assertIn("token_major", r.stdout)


if __name__ == "__main__":
    unittest.main()
