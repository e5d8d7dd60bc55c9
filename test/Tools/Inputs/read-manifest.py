"""Prints the ABI and entry points pisa.manifest reads from a library."""
import ctypes
import sys

from pisa import manifest

path = sys.argv[1]
m = manifest.read(ctypes.CDLL(path), path)
print(m["abi"], [e["function"] for e in m["entry_points"]])
