"""Writes the PTX that `pisa-opt --pisa-lower-to-nvvm-pipeline=format=isa`
embeds in its gpu.binary (an MLIR string with \\XX escapes) to stdout."""

import re
import sys

text = sys.stdin.read()
start = text.index('assembly = "') + len('assembly = "')
end = text.index('"', start)
sys.stdout.write(re.sub(r"\\([0-9A-Fa-f]{2})",
                        lambda m: chr(int(m.group(1), 16)), text[start:end]))
