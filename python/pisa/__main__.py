"""`python3 -m pisa` (or `pisa` once installed): the package's commands.

usage: python3 -m pisa COMMAND [ARGS...]   (python3 -m pisa COMMAND --help)
"""

import importlib
import sys

# command: (module, what it does). The library modules (aot, torch,
# reference) are imported by programs; the checks, sweeps and benchmarks
# run from a checkout: `PYTHONPATH=python python3 -m device_checks --help`.
COMMANDS = {
    "quality": ("pisa.quality", "softmax mass and recall@K of a selection against the exact top blocks"),
}


def usage(out):
    out.write(__doc__.split("\n\n")[1].rstrip("\n") + "\n\ncommands:\n")
    for name, (_, what) in COMMANDS.items():
        out.write(f"  {name:<20} {what}\n")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        usage(sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] == "--version":
        print("pisa 0.5.0")
        return 0
    if argv[0] not in COMMANDS:
        sys.stderr.write(f"pisa: unknown command '{argv[0]}' (see --help)\n")
        return 2
    module = importlib.import_module(COMMANDS[argv[0]][0])
    sys.argv = [f"pisa {argv[0]}"] + argv[1:]
    return module.main()


if __name__ == "__main__":
    sys.exit(main())
