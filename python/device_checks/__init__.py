"""The project's checks, sweeps, profilers and benchmarks, apart from the
`pisa` library that programs import (pisa.aot, pisa.torch, pisa.reference,
pisa.quality): the generated shape sweeps, the GPU checks of every op, of
the call contract and of the PyTorch ops, the benchmarks beside peers.
They run from a checkout (`PYTHONPATH=python`; repo.py finds the
repository) and are not installed: `python3 -m device_checks --help`
lists them, each also runs as `python3 -m device_checks.NAME`.
"""
