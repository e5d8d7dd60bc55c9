"""Where the repository is, for the checks that run from a checkout.

device_checks lives at python/device_checks of the repository and is never
installed (`pip install ./python` installs the `pisa` library alone), so
the repository is two directories above this package. `load` imports a
file of it as a module (the NumPy references of test/Integration) without
touching sys.path.
"""

import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INTEGRATION_DIR = os.path.join(ROOT, "test", "Integration")


def load(path, name=None):
    """The module in file `path` (imported once: later calls return it)."""
    name = name or os.path.splitext(os.path.basename(path))[0]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
