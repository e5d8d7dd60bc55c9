"""The project's checks and benchmarks, kept apart from the library
modules (pisa.aot, pisa.torch, pisa.reference) that programs import:
the generated shape sweep, the GPU checks of the call contract and of the
PyTorch ops, the benchmarks. Each is a command of `python3 -m pisa` and a
module to run as `python3 -m pisa.checks.NAME`.
"""
