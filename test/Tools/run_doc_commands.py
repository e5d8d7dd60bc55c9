"""Runs the commands the docs give, as written, from a copy of the layout.

Commands come from `sh` blocks in Markdown preceded by
`<!-- doc-commands: NAME -->`, and from C/C++ comments whose lines start
with `//   $ ` (continued by `\\`). They run with bash in a scratch
directory holding links to the source tree's top-level entries and
`build` linked to the build tree, so that `build/...` and `include/...`
mean what they mean in a checkout. Prints `ok NAME` or `FAIL NAME`.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile


def markdown_blocks(path):
    text = open(path).read()
    for m in re.finditer(r"<!-- doc-commands: (\S+) -->\s*```sh\n(.*?)```", text, re.S):
        yield m.group(1), m.group(2)


def comment_commands(path):
    lines, current = [], None
    for raw in open(path):
        line = raw.rstrip("\n")
        if line.startswith("//   $ "):
            current = line[len("//   $ "):]
        elif current is not None and line.startswith("//     "):
            current += "\n" + line[len("//     "):]
        else:
            if current is not None:
                lines.append(current)
            current = None
            continue
        if not current.endswith("\\"):
            lines.append(current)
            current = None
    if lines:
        yield os.path.basename(path), "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--src", required=True)
    parser.add_argument("--build", required=True)
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for entry in os.listdir(args.src):
            if entry not in ("build", ".git"):
                os.symlink(os.path.join(args.src, entry), os.path.join(tmp, entry))
        # A real directory whose entries are the build tree's, so that
        # commands may write new files under build/ without touching it.
        build = os.path.join(tmp, "build")
        os.makedirs(build)
        for entry in os.listdir(args.build):
            os.symlink(os.path.join(args.build, entry), os.path.join(build, entry))
        for path in args.files:
            blocks = (markdown_blocks(path) if path.endswith(".md")
                      else comment_commands(path))
            for name, script in blocks:
                proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script],
                                      cwd=tmp, capture_output=True, text=True)
                if proc.returncode == 0:
                    print(f"ok {name}")
                else:
                    failures += 1
                    print(f"FAIL {name}: exit {proc.returncode}\n{script}\n{proc.stderr[-2000:]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
