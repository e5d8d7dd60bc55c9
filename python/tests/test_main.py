"""`python3 -m pisa` dispatches to the package's commands."""

import subprocess
import sys
import unittest


def run(*args):
    return subprocess.run([sys.executable, "-m", "pisa", *args], capture_output=True, text=True)


class MainTest(unittest.TestCase):
    def test_help_lists_every_command(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0)
        for name in ("sweep", "cases", "check-gpu", "bench-gpu"):
            self.assertIn(name, r.stdout)

    def test_unknown_command_is_one_line_and_exit_2(self):
        r = run("frobnicate")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.strip().splitlines(), ["pisa: unknown command 'frobnicate' (see --help)"])

    def test_sweep_help(self):
        r = run("sweep", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("generated shape sweep", r.stdout)


if __name__ == "__main__":
    unittest.main()
