"""PISA: pyramid-indexed block-sparse attention selection, compiled by MLIR.

`pisa.aot.Library` loads a library built by `pisa-compile` and calls its
entry points on PyTorch CUDA tensors. `pisa.reference` is an independent
PyTorch implementation of the selection contract (docs/semantics.md) used
to check the compiled kernels.
"""
