"""The C and C++ sources of lib/, include/ and tools/ are as clang-format
formats them with the repository's .clang-format (LLVM style). Prints each
file that is not and a closing count.

usage: check_format.py CLANG_FORMAT SOURCE_ROOT
"""

import os
import subprocess
import sys


def sources(root):
    for top in ("lib", "include", "tools"):
        for here, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if name.endswith((".cpp", ".h", ".c")):
                    yield os.path.join(here, name)


def main():
    clang_format, root = sys.argv[1], sys.argv[2]
    files = sorted(sources(root))
    unformatted = []
    for path in files:
        with open(path, "rb") as f:
            text = f.read()
        formatted = subprocess.run([clang_format, f"--style=file:{root}/.clang-format",
                                    f"--assume-filename={path}"], input=text,
                                   capture_output=True, check=True).stdout
        if formatted != text:
            unformatted.append(os.path.relpath(path, root))
    for path in unformatted:
        print(f"not formatted: {path} (clang-format -i {path})")
    print(f"format: {len(files)} files, {len(unformatted)} not formatted")
    return 1 if unformatted else 0


if __name__ == "__main__":
    sys.exit(main())
