"""Loads an AOT library from `pisa-compile` and calls it on CUDA tensors.

The library exports, per entry point F, `pisa_F(const PisaCall *, args...,
result)` and `pisa_F_workspace_size()` (include/pisa/Runtime/PisaRuntime.h);
its manifest (<stem>.json beside the .so) names the argument shapes and
dtypes, which are checked before every call. A call runs on PyTorch's
current stream and device, like a PyTorch op: it enqueues its kernels and
returns. The result and the workspace are PyTorch tensors (pass `out=` to
reuse one), so a call allocates nothing of its own and can be captured in
a CUDA graph. Failures raise RuntimeError with the library's message.
"""

import ctypes
import json
import os

import torch

_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
           "i32": torch.int32}
_WORKSPACE_ALIGNMENT = 256
_TENSOR_ALIGNMENT = 16  # the kernels load 16-byte chunks


class PisaCall(ctypes.Structure):
    _fields_ = [("stream", ctypes.c_void_p), ("workspace", ctypes.c_void_p),
                ("workspace_bytes", ctypes.c_size_t),
                ("error", ctypes.c_char_p), ("error_bytes", ctypes.c_size_t)]


class Library:
    def __init__(self, path):
        self.path = os.path.abspath(path)
        with open(os.path.splitext(self.path)[0] + ".json") as f:
            self.manifest = json.load(f)
        if self.manifest.get("abi") != "pisa-call-v1":
            raise RuntimeError(f"{path}: ABI {self.manifest.get('abi')!r}, "
                               "expected 'pisa-call-v1' (rebuild it with this pisa-compile)")
        self.lib = ctypes.CDLL(self.path)
        self.entries = {}
        for e in self.manifest["entry_points"]:
            fn = getattr(self.lib, e["symbol"])
            fn.restype = ctypes.c_int
            fn.argtypes = ([ctypes.POINTER(PisaCall)]
                           + [ctypes.c_int64 if a["kind"] == "index" else ctypes.c_void_p
                              for a in e["arguments"]] + [ctypes.c_void_p])
            size = getattr(self.lib, e["workspace_symbol"])
            size.restype = ctypes.c_size_t
            self.entries[e["function"]] = (e, fn, int(size()))

    def workspace_size(self, function):
        return self.entries[function][2]

    def __call__(self, function, *args, out=None, workspace=None):
        entry, fn, ws_bytes = self.entries[function]
        if len(args) != len(entry["arguments"]):
            raise TypeError(f"{function} takes {len(entry['arguments'])} arguments")
        values, keep, device = [], [], None
        for spec, value in zip(entry["arguments"], args):
            if spec["kind"] == "index":
                values.append(int(value))
                continue
            want = _DTYPES[spec["dtype"]]
            if not (isinstance(value, torch.Tensor) and value.is_cuda
                    and value.dtype == want and list(value.shape) == spec["shape"]):
                raise TypeError(f"{function}: {spec['name']} must be a CUDA "
                                f"{want} tensor of shape {spec['shape']}")
            device = device or value.device
            if value.device != device:
                raise TypeError(f"{function}: all tensors must be on one device")
            value = value.contiguous()
            if value.data_ptr() % _TENSOR_ALIGNMENT:
                value = value.clone()
            keep.append(value)
            values.append(value.data_ptr())
        res = entry["result"]
        device = device or torch.device("cuda", torch.cuda.current_device())
        if out is None:
            out = torch.empty(res["shape"], dtype=_DTYPES[res["dtype"]], device=device)
        elif not (out.is_contiguous() and out.device == device
                  and out.dtype == _DTYPES[res["dtype"]] and list(out.shape) == res["shape"]
                  and out.data_ptr() % _TENSOR_ALIGNMENT == 0):
            raise TypeError(f"{function}: out must be a contiguous, aligned "
                            f"{res['dtype']} tensor of shape {res['shape']} on {device}")
        with torch.cuda.device(device):
            if workspace is None and ws_bytes:
                workspace = torch.empty(ws_bytes + _WORKSPACE_ALIGNMENT,
                                        dtype=torch.uint8, device=device)
            ws_ptr = 0
            if ws_bytes:
                ws_ptr = workspace.data_ptr()
                ws_ptr += -ws_ptr % _WORKSPACE_ALIGNMENT
                if ws_ptr + ws_bytes > workspace.data_ptr() + workspace.numel():
                    raise TypeError(f"{function}: workspace needs {ws_bytes} bytes "
                                    f"at a {_WORKSPACE_ALIGNMENT}-byte boundary")
            error = ctypes.create_string_buffer(512)
            call = PisaCall(torch.cuda.current_stream(device).cuda_stream, ws_ptr,
                            ws_bytes, ctypes.cast(error, ctypes.c_char_p), len(error))
            status = fn(ctypes.byref(call), *values, out.data_ptr())
        if status:
            raise RuntimeError(error.value.decode() or f"{function}: status {status}")
        return out
