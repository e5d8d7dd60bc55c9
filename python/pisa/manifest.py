"""The manifest of an AOT library: the description of its entry points that
pisa-compile compiles into the library (`pisa_runtime_manifest`,
include/pisa/Runtime/PisaRuntime.h) and also writes beside it as
<stem>.json. Reading the library's own copy means the description always
matches the code that is called: a stale or edited .json beside a rebuilt
library cannot give ctypes the wrong signature. Needs no torch.
"""

import ctypes
import json
import os

ABI = "pisa-call-v3"

_ENTRY_KEYS = ("function", "symbol", "workspace_symbol", "arguments", "results")


def read(lib, path):
    """The manifest of `lib` (a ctypes.CDLL of the library at `path`): its
    own copy, or <stem>.json beside it for a library built before libraries
    carried one. Raises RuntimeError naming the file when it is not a pisa
    manifest of this ABI."""
    try:
        own = lib.pisa_runtime_manifest
    except AttributeError:
        own = None
    if own is not None:
        own.restype, own.argtypes = ctypes.c_char_p, []
        where, text = path, own().decode("utf-8", "replace")
    else:
        where = os.path.splitext(path)[0] + ".json"
        with open(where, encoding="utf-8", errors="replace") as f:
            text = f.read()
    try:
        manifest = json.loads(text)
    except ValueError as e:
        raise RuntimeError(f"{where}: not a pisa manifest ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("abi") != ABI:
        abi = manifest.get("abi") if isinstance(manifest, dict) else None
        raise RuntimeError(f"{where}: ABI {abi!r}, expected {ABI!r} "
                           "(rebuild it with this pisa-compile)")
    entries = manifest.get("entry_points")
    if not isinstance(entries, list) or not all(
            isinstance(e, dict) and all(k in e for k in _ENTRY_KEYS) for e in entries):
        raise RuntimeError(f"{where}: not a pisa manifest (entry_points malformed)")
    return manifest
