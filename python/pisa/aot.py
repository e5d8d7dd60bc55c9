"""Loads an AOT library from `pisa-compile` and calls it on CUDA tensors.

The library exports `_mlir_ciface_<function>(result*, args*...)` on MLIR
memref descriptors of device memory; its manifest (<stem>.json beside the
.so) names the argument shapes and dtypes, which are checked before every
call. The library runs on PyTorch's current stream, stream-ordered like a
PyTorch op (it returns once its work is enqueued). Driver errors surface as
RuntimeError with the driver's message; a kernel fault surfaces at the next
synchronization, as for any CUDA op.
"""

import ctypes
import json
import os

import torch

_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
           "i32": torch.int32}


def _memref_type(rank):
    class MemRef(ctypes.Structure):
        _fields_ = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p),
                    ("offset", ctypes.c_int64), ("sizes", ctypes.c_int64 * rank),
                    ("strides", ctypes.c_int64 * rank)]
    return MemRef


class _DeviceArray:
    """A borrowed device buffer, exposed through __cuda_array_interface__."""

    def __init__(self, ptr, shape, typestr):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr,
                                         "data": (ptr, False), "version": 3,
                                         "strides": None}


class Library:
    def __init__(self, path):
        self.path = os.path.abspath(path)
        with open(os.path.splitext(self.path)[0] + ".json") as f:
            self.manifest = json.load(f)
        self.lib = ctypes.CDLL(self.path)
        self.lib.pisa_runtime_last_error.restype = ctypes.c_char_p
        self.lib.pisa_runtime_set_stream.argtypes = [ctypes.c_void_p]
        self.lib.pisa_runtime_free.argtypes = [ctypes.c_void_p]
        self._check("loading " + os.path.basename(path))
        self.entries = {e["function"]: e for e in self.manifest["entry_points"]}

    def _check(self, what):
        err = self.lib.pisa_runtime_last_error()
        if err:
            self.lib.pisa_runtime_clear_error()
            raise RuntimeError(f"{what}: {err.decode()}")

    def __call__(self, function, *args):
        entry = self.entries[function]
        if len(args) != len(entry["arguments"]):
            raise TypeError(f"{function} takes {len(entry['arguments'])} arguments")
        keep, c_args = [], []
        for spec, value in zip(entry["arguments"], args):
            if spec["kind"] == "index":
                c_args.append(ctypes.c_int64(int(value)))
                continue
            want = _DTYPES[spec["dtype"]]
            if not (isinstance(value, torch.Tensor) and value.is_cuda
                    and value.dtype == want and list(value.shape) == spec["shape"]):
                raise TypeError(f"{function}: {spec['name']} must be a CUDA "
                                f"{want} tensor of shape {spec['shape']}")
            value = value.contiguous()
            if value.data_ptr() % 16:  # the kernels load 16-byte chunks
                value = value.clone()
            keep.append(value)
            desc = _memref_type(value.dim())()
            desc.allocated = desc.aligned = value.data_ptr()
            desc.offset = 0
            for i, (s, st) in enumerate(zip(value.shape, value.stride())):
                desc.sizes[i], desc.strides[i] = s, st
            c_args.append(ctypes.byref(desc))
            keep.append(desc)
        result = _memref_type(len(entry["result"]["shape"]))()
        self.lib.pisa_runtime_set_stream(
            ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        getattr(self.lib, entry["symbol"])(ctypes.byref(result), *c_args)
        self._check(function)
        shape = list(result.sizes)
        typestr = {"i32": "<i4", "f32": "<f4"}[entry["result"]["dtype"]]
        out = torch.as_tensor(_DeviceArray(result.aligned, shape, typestr),
                              device="cuda").clone()
        self.lib.pisa_runtime_free(ctypes.c_void_p(result.allocated))
        self._check(function + " (freeing the result)")
        return out
