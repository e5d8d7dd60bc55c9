"""PyTorch custom ops for AOT libraries: `torch.ops.pisa.<function>`.

    import pisa.torch
    pisa.torch.load_library("libprefill.so")          # once per library
    sel = torch.ops.pisa.prefill_select(q, k)         # [B, Hkv, Nq, K] int32
    sel = torch.ops.pisa.prefill_select(q, k, layout="bthk")   # [B, Nq, Hkv, K]

Each entry point of the library becomes a `torch.library` custom op with a
fake (meta) implementation, so it runs eagerly, under
`torch.compile(fullgraph=True)` without graph breaks, and inside CUDA
graphs (the call allocates through PyTorch and runs on its current
stream). `layout` picks the selection's index layout: "bhtk" (default,
[B, Hkv, Nq, K]) or "bthk" ([B, Nq, Hkv, K], token-major, the block-index
layout fla's NSA kernels read). A library compiled token-major (the ops'
`token_major`, manifest result "layout": "bthk") writes "bthk" itself; the
other layout costs one transposing copy. A packed varlen library's
selection is [Tq, Hkv, K] (docs/semantics.md, section 7); `layout` does not
apply to it. A pyramid cache that the program appends to (manifest
`updated_in_place`) is declared mutated (`Tensor(a!)`), so torch.compile
orders the op with the cache's other uses (checked on the H200 with
docs/examples/decode-step.mlir: `python3 -m device_checks.check_torch
--decode libdecode-step.so`, eager, torch.compile(fullgraph=True) and
opcheck).
"""

import torch

from pisa import aot

_LAYOUTS = ("bhtk", "bthk")
_loaded = {}


def _schema(entry):
    params = []
    for i, a in enumerate(entry["arguments"]):
        if a["kind"] == "index":
            params.append(f"SymInt {a['name']}")
        elif a.get("updated_in_place"):
            # Written by the call (a pyramid cache): a mutable alias.
            params.append(f"Tensor(a{i}!) {a['name']}")
        else:
            params.append(f"Tensor {a['name']}")
    params.append('str layout="bhtk"')
    return "(" + ", ".join(params) + ") -> Tensor"


def _mutated(entry):
    """The arguments the call writes, as custom_op's mutates_args."""
    return tuple(a["name"] for a in entry["arguments"] if a.get("updated_in_place"))


def _result_shape(shape, layout, native):
    if layout != native and len(shape) == 4:
        return [shape[0], shape[2], shape[1], shape[3]]
    return list(shape)


def _check_layout(layout):
    if layout not in _LAYOUTS:
        raise ValueError(f"layout must be one of {_LAYOUTS}, got {layout!r}")


def load_library(path, namespace="pisa"):
    """Registers every entry point of the AOT library at `path` as
    torch.ops.<namespace>.<function>; returns the op names. Loading the same
    library again is a no-op; two libraries with the same function name
    need different namespaces."""
    lib = aot.Library(path)
    names = []
    for function, (entry, _, _) in lib.entries.items():
        qualified = f"{namespace}::{function}"
        if qualified in _loaded:
            if _loaded[qualified] != lib.path:
                raise RuntimeError(f"{qualified} is already registered from "
                                   f"{_loaded[qualified]}; use another namespace")
            names.append(qualified)
            continue
        result = entry["result"]
        dtype = aot._DTYPES[result["dtype"]]
        # The library's own index layout: "bthk" when compiled token-major.
        native = result.get("layout", "bhtk")

        arity = len(entry["arguments"])

        def split(args, kwargs, arity=arity):
            """The library's arguments and the layout, however the
            dispatcher passes the defaulted `layout`."""
            layout = kwargs.get("layout", args[arity] if len(args) > arity else "bhtk")
            _check_layout(layout)
            return args[:arity], layout

        packed = len(result["shape"]) == 3  # a varlen selection [Tq, Hkv, K]

        def split_checked(args, kwargs, _split=split, _packed=packed, _name=qualified):
            args, layout = _split(args, kwargs)
            if _packed and layout != "bhtk":
                raise ValueError(f"{_name}: a packed varlen selection is [Tq, Hkv, K]; "
                                 "layout does not apply")
            return args, layout

        def impl(*args, _function=function, _split=split_checked, _native=native,
                 **kwargs):
            args, layout = _split(args, kwargs)
            out = lib(_function, *args)
            if layout != _native:
                out = out.permute(0, 2, 1, 3).contiguous()
            return out

        def fake(*args, _entry=entry, _dtype=dtype, _split=split_checked, _native=native,
                 **kwargs):
            args, layout = _split(args, kwargs)
            device = next((a.device for a in args if isinstance(a, torch.Tensor)),
                          torch.device("cuda"))
            shape = aot.Library.result_shape(_entry, args)
            if shape is None:
                raise RuntimeError(f"{_entry['function']}: the result's sizes "
                                   "are not an input's; no fake implementation")
            return torch.empty(_result_shape(shape, layout, _native), dtype=_dtype,
                               device=device)

        op = torch.library.custom_op(qualified, impl, mutates_args=_mutated(entry),
                                     device_types="cuda", schema=_schema(entry))
        op.register_fake(fake)
        _loaded[qualified] = lib.path
        names.append(qualified)
    return names
