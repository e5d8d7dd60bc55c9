"""The command line shared by the check_*.py scripts that run pisa-run
cases: --pisa-run, --seed (printed; fresh when absent), optionally
--static-shapes, and case names; prints one line per case and a total."""

import argparse
import os
import tempfile


def near_tie_rule(got, want, gaps, tol):
    """The pass rule of the selection checks, per row of [..., K]
    selections: a differing row is excused only where the reference saw a
    near tie (0 < gap < tol); exact ties (gap 0) never are. Returns the
    masks (differs, excused, wrong)."""
    differs = (got != want).any(-1)
    excused = differs & (gaps > 0) & (gaps < tol)
    return differs, excused, differs & ~excused


def run_cases(doc, cases, run_case, static_shapes=True, token_major=False):
    """run_case(name, pisa_run, workdir, seed, extra_args) -> bool."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--pisa-run", default="pisa-run")
    parser.add_argument("--seed", type=int, default=None)
    if static_shapes:
        parser.add_argument("--static-shapes", action="store_true",
                            help="compile for the inputs' exact shapes")
    if token_major:
        parser.add_argument("--token-major", action="store_true",
                            help="pass Q, K and the result as [B, T, H, X]")
    parser.add_argument("cases", nargs="*", default=sorted(cases))
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")
    extra = ["--static-shapes"] if static_shapes and args.static_shapes else []
    if token_major and args.token_major:
        extra.append("--token-major")
    with tempfile.TemporaryDirectory() as workdir:
        results = [run_case(c, args.pisa_run, workdir, seed, extra) for c in args.cases]
    failed = results.count(False)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


class Tally:
    """The pass/fail count of a check script: `report(name, problems)` per
    case (a FAIL line with the problems, or with `verbose` an ok line);
    `finish()` prints the closing line and returns the exit code."""

    def __init__(self, verbose=False):
        self.passed = self.failed = 0
        self.verbose = verbose

    def report(self, name, problems):
        if problems:
            self.failed += 1
            print(f"FAIL {name}: " + "; ".join(problems))
        else:
            self.passed += 1
            if self.verbose:
                print(f"ok {name}")

    def finish(self):
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed else 0
