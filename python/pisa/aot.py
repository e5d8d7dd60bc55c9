"""Loads an AOT library from `pisa-compile` and calls it on CUDA tensors.

The library exports, per entry point F, `pisa_F(const PisaCall *, args...,
results...)` and `pisa_F_workspace_size(sizes...)`
(include/pisa/Runtime/PisaRuntime.h); its manifest (compiled into the
library, also <stem>.json beside it; pisa.manifest) names the argument
shapes (None: any size, passed after the tensor) and dtypes, which are checked before every call; the library checks the
rest (sizes that must agree, limits) and raises with its rule's message. A call runs on PyTorch's
current stream and device, like a PyTorch op: it enqueues its kernels and
returns. The results and the workspace are PyTorch tensors (pass `out=` to
reuse them: a tensor, or a sequence of one per result), so a call allocates
nothing of its own and can be captured in a CUDA graph. A call returns its
tensor, or a tuple when the entry point has several results (the training
entries F_forward: o, lse, selection; F_backward: dq, dk, dv). Failures raise RuntimeError with the library's message.
An argument the manifest marks `updated_in_place` (a pyramid cache that
the program appends to) is written by the call: it must be contiguous and
aligned, never copied.
"""

import ctypes
import os

import torch

from pisa import manifest

ABI = manifest.ABI

_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
           "i32": torch.int32}
_WORKSPACE_ALIGNMENT = 256
_TENSOR_ALIGNMENT = 16  # the kernels load 16-byte chunks


def _fits(shape, spec):
    return len(shape) == len(spec) and all(s is None or s == n for n, s in zip(shape, spec))


def _shape_text(spec):
    return "[" + ", ".join("?" if s is None else str(s) for s in spec["shape"]) + "]"


def _dynamic_sizes(shape, spec):
    return [int(shape[r]) for r, s in enumerate(spec) if s is None]


class PisaCall(ctypes.Structure):
    _fields_ = [("stream", ctypes.c_void_p), ("workspace", ctypes.c_void_p),
                ("workspace_bytes", ctypes.c_size_t),
                ("error", ctypes.c_char_p), ("error_bytes", ctypes.c_size_t)]


class Library:
    def __init__(self, path):
        self.path = os.path.abspath(path)
        self.lib = ctypes.CDLL(self.path)
        self.manifest = manifest.read(self.lib, self.path)
        self.entries, self.validators = {}, {}
        for e in self.manifest["entry_points"]:
            fn = getattr(self.lib, e["symbol"])
            fn.restype = ctypes.c_int
            params = [ctypes.POINTER(PisaCall)]
            for a in e["arguments"] + e["results"]:
                params.append(ctypes.c_int64 if a["kind"] == "index" else ctypes.c_void_p)
                params += [ctypes.c_int64] * len(a.get("size_params", []))
            fn.argtypes = params
            size = getattr(self.lib, e["workspace_symbol"])
            size.restype = ctypes.c_size_t
            size.argtypes = [ctypes.c_int64] * sum(
                len(a.get("size_params", [])) for a in e["arguments"])
            self.entries[e["function"]] = (e, fn, size)
            if "validate_symbol" in e:
                check = getattr(self.lib, e["validate_symbol"])
                check.restype, check.argtypes = ctypes.c_int, params
                self.validators[e["function"]] = check

    def workspace_size(self, function, *tensors):
        """Bytes of workspace a call with these input tensors (or shapes)
        needs; no arguments for a library of static shapes."""
        entry, _, size = self.entries[function]
        shapes = [list(t.shape) if isinstance(t, torch.Tensor) else list(t)
                  for t in tensors]
        memrefs = [a for a in entry["arguments"] if a["kind"] == "memref"]
        dims = []
        for spec, shape in zip(memrefs, shapes):
            dims += [shape[r] for r, s in enumerate(spec["shape"]) if s is None]
        if len(dims) != len(size.argtypes):
            raise TypeError(f"{function}: workspace_size takes the shapes of "
                            f"its {len(memrefs)} tensor arguments")
        return int(size(*dims))

    @staticmethod
    def result_shapes(entry, args):
        """Each result's shape for these arguments (sizes the manifest says
        are an input's), None for one whose sizes the program computes
        otherwise."""
        shapes = []
        for res in entry["results"]:
            shape, dyn = list(res["shape"]), iter(res.get("size_from", []))
            for r, s in enumerate(shape):
                if s is None:
                    source = next(dyn, None)
                    if source is None:
                        shape = None
                        break
                    shape[r] = args[source[0]].shape[source[1]]
            shapes.append(shape)
        return shapes

    def validate(self, function, *args, out=None, workspace=None):
        """Every check a call of `function` makes, cu_seqlens' values
        included, and no kernel: raises RuntimeError with the library's
        message where the call would be refused (a varlen call is otherwise
        refused on the device, with -2 rows). Reading cu_seqlens back waits
        for the current stream, so this is not for CUDA graphs."""
        if function not in self.validators:
            raise TypeError(f"{function} reads no cu_seqlens: nothing to validate "
                            "beyond what a call checks")
        self(function, *args, out=out, workspace=workspace, _fn=self.validators[function])

    def __call__(self, function, *args, out=None, workspace=None, validate=False,
                 _fn=None):
        """Runs `function`; validate=True first checks the call with
        validate() (a synchronising read of cu_seqlens)."""
        if validate and function in self.validators:
            self.validate(function, *args, out=out, workspace=workspace)
        entry, fn, _ = self.entries[function]
        fn = _fn or fn
        if len(args) != len(entry["arguments"]):
            raise TypeError(f"{function} takes {len(entry['arguments'])} arguments")
        values, keep, device = [], [], None
        for spec, value in zip(entry["arguments"], args):
            if spec["kind"] == "index":
                values.append(int(value))
                continue
            want = _DTYPES[spec["dtype"]]
            if not (isinstance(value, torch.Tensor) and value.is_cuda
                    and value.dtype == want and _fits(value.shape, spec["shape"])):
                raise TypeError(f"{function}: {spec['name']} must be a CUDA "
                                f"{want} tensor of shape {_shape_text(spec)}")
            device = device or value.device
            if value.device != device:
                raise TypeError(f"{function}: all tensors must be on one device")
            if spec.get("updated_in_place"):
                # A cache the call writes: a copy would take the update.
                if not value.is_contiguous() or value.data_ptr() % _TENSOR_ALIGNMENT:
                    raise TypeError(f"{function}: {spec['name']} is updated in place, "
                                    "so it must be contiguous and "
                                    f"{_TENSOR_ALIGNMENT}-byte aligned")
            value = value.contiguous()
            if value.data_ptr() % _TENSOR_ALIGNMENT:
                value = value.clone()
            keep.append(value)
            values.append(value.data_ptr())
            values += _dynamic_sizes(value.shape, spec["shape"])
        device = device or torch.device("cuda", torch.cuda.current_device())
        outs = self._results(function, entry, args, out, device)
        ws_bytes = self.workspace_size(
            function, *[a for a, s in zip(args, entry["arguments"]) if s["kind"] == "memref"])
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
            for res, o in zip(entry["results"], outs):
                values += [o.data_ptr()] + _dynamic_sizes(o.shape, res["shape"])
            status = fn(ctypes.byref(call), *values)
        if status:
            raise RuntimeError(error.value.decode() or f"{function}: status {status}")
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _results(self, function, entry, args, out, device):
        """The result tensors: `out` checked (a tensor for an entry with one
        result, else a sequence of one per result), or new ones."""
        specs = entry["results"]
        if out is None:
            outs = []
            for res, shape in zip(specs, self.result_shapes(entry, args)):
                if shape is None:
                    raise TypeError(f"{function}: pass out= ({res['name']}'s "
                                    "sizes are not an input's)")
                outs.append(torch.empty(shape, dtype=_DTYPES[res["dtype"]], device=device))
            return outs
        outs = [out] if isinstance(out, torch.Tensor) else list(out)
        if len(outs) != len(specs):
            raise TypeError(f"{function}: out= takes {len(specs)} tensors, "
                            f"one per result, got {len(outs)}")
        for res, o in zip(specs, outs):
            if not (isinstance(o, torch.Tensor) and o.is_contiguous() and o.device == device
                    and o.dtype == _DTYPES[res["dtype"]] and _fits(o.shape, res["shape"])
                    and o.data_ptr() % _TENSOR_ALIGNMENT == 0):
                raise TypeError(f"{function}: out {res['name']} must be a contiguous, "
                                f"aligned {res['dtype']} tensor of shape "
                                f"{_shape_text(res)} on {device}")
        return outs
