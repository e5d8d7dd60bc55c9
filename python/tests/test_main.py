"""`python3 -m pisa` runs the library's command; `python3 -m device_checks`
dispatches to the checks and benchmarks of a checkout."""

import subprocess
import sys
import unittest


def run(*args, package="device_checks"):
    return subprocess.run([sys.executable, "-m", package, *args], capture_output=True, text=True)


class MainTest(unittest.TestCase):
    def test_help_lists_every_command(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0)
        for name in ("sweep", "cases", "check-gpu", "bench-gpu"):
            self.assertIn(name, r.stdout)

    def test_unknown_command_is_one_line_and_exit_2(self):
        r = run("frobnicate")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.strip().splitlines(),
                         ["device_checks: unknown command 'frobnicate' (see --help)"])
        r = run("frobnicate", package="pisa")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.strip().splitlines(), ["pisa: unknown command 'frobnicate' (see --help)"])

    def test_the_library_has_its_own_command_only(self):
        r = run("--help", package="pisa")
        self.assertEqual(r.returncode, 0)
        self.assertIn("quality", r.stdout)
        self.assertNotIn("sweep", r.stdout)

    def test_sweep_help(self):
        r = run("sweep", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("generated shape sweep", r.stdout)


if __name__ == "__main__":
    unittest.main()
