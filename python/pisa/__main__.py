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


def dispatch(prog, doc, commands, argv=None):
    """Runs COMMAND of `commands` ({name: (module, what it does)}) with the
    rest of `argv` as its arguments: `--help` lists them (the usage line is
    the second paragraph of `doc`), anything else is one line and exit 2.
    device_checks' entry point uses it too."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        out = sys.stdout if argv else sys.stderr
        out.write(doc.split("\n\n")[1].rstrip("\n") + "\n\ncommands:\n")
        for name, (_, what) in commands.items():
            out.write(f"  {name:<20} {what}\n")
        return 0 if argv else 2
    if argv[0] not in commands:
        sys.stderr.write(f"{prog}: unknown command '{argv[0]}' (see --help)\n")
        return 2
    module = importlib.import_module(commands[argv[0]][0])
    sys.argv = [f"{prog} {argv[0]}"] + argv[1:]
    return module.main()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--version"]:
        print("pisa 0.5.0")
        return 0
    return dispatch("pisa", __doc__, COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
