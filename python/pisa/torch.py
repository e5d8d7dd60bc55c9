"""PyTorch custom ops for AOT libraries: `torch.ops.pisa.<function>`.

    import pisa.torch
    pisa.torch.load_library("libprefill.so")          # once per library
    sel = torch.ops.pisa.prefill_select(q, k)         # [B, Hkv, Nq, K] int32
    sel = torch.ops.pisa.prefill_select(q, k, layout="bthk")   # [B, Nq, Hkv, K]

Each entry point of the library becomes a `torch.library` custom op with a
fake (meta) implementation, so it runs eagerly, under
`torch.compile(fullgraph=True)` without graph breaks, and inside CUDA
graphs (the call allocates through PyTorch and runs on its current
stream). An entry point with several results returns a tuple.

A selection op takes `layout`: "bhtk" (default, [B, Hkv, Nq, K]) or "bthk"
([B, Nq, Hkv, K], token-major, the block-index layout fla's NSA kernels
read). A library compiled token-major (the ops' `token_major`, manifest
result "layout": "bthk") writes "bthk" itself; the other layout costs one
transposing copy. A packed varlen library's selection is [Tq, Hkv, K]
(docs/semantics.md, section 7): its op has no `layout`. A pyramid
cache that the program appends to (manifest `updated_in_place`) is declared
mutated (`Tensor(a!)`), so torch.compile orders the op with the cache's
other uses.

Training. An entry point F whose result is a `pisa.sparse_attention`'s
output comes with F_forward and F_backward (manifest "backward"; docs/gpu.md,
"Training entry points"), and `torch.ops.pisa.F` is differentiable:

    o = torch.ops.pisa.F(q, k, v, offset)
    o.backward(do)                  # fills q.grad, k.grad and v.grad

F runs F_forward (o, lse and the selection, saved for the backward) and its
backward runs F_backward; the selection gets no gradient. The same holds
for a `pisa.sparse_attention_varlen`'s output (F(q, k, v, cu_q, cu_k) on
packed [T, H, d] tensors; cu_seqlens get no gradient). `PisaAttention`
wraps either as a module over token-major tensors.
"""

import torch

from pisa import aot

_LAYOUTS = ("bhtk", "bthk")
_loaded = {}
# torch.library.Library objects must live as long as their definitions.
_fragments = {}


def _schema(entry, with_layout):
    params = []
    for i, a in enumerate(entry["arguments"]):
        if a["kind"] == "index":
            params.append(f"SymInt {a['name']}")
        elif a.get("updated_in_place"):
            # Written by the call (a pyramid cache): a mutable alias.
            params.append(f"Tensor(a{i}!) {a['name']}")
        else:
            params.append(f"Tensor {a['name']}")
    if with_layout:
        params.append('str layout="bhtk"')
    n = len(entry["results"])
    returns = "Tensor" if n == 1 else "(" + ", ".join(["Tensor"] * n) + ")"
    return "(" + ", ".join(params) + ") -> " + returns


def _mutated(entry):
    """The arguments the call writes, as custom_op's mutates_args."""
    return tuple(a["name"] for a in entry["arguments"] if a.get("updated_in_place"))


def _check_layout(layout):
    if layout not in _LAYOUTS:
        raise ValueError(f"layout must be one of {_LAYOUTS}, got {layout!r}")


def _in_layout(t, spec, layout):
    """Result `t` (of manifest `spec`) in `layout` when it is a selection."""
    native = spec.get("layout")
    if native is None or layout == native or t.dim() != 4:
        return t
    return t.permute(0, 2, 1, 3).contiguous()


def _register_entry(lib, namespace, function, entry, with_layout):
    qualified = f"{namespace}::{function}"
    arity = len(entry["arguments"])
    specs = entry["results"]

    def split(args, kwargs):
        """The library's arguments and the layout, however the dispatcher
        passes the defaulted `layout`."""
        if not with_layout:
            return args[:arity], None
        layout = kwargs.get("layout", args[arity] if len(args) > arity else "bhtk")
        _check_layout(layout)
        return args[:arity], layout

    def finish(outs, layout):
        outs = [outs] if isinstance(outs, torch.Tensor) else list(outs)
        if layout is not None:
            outs = [_in_layout(t, s, layout) for t, s in zip(outs, specs)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def impl(*args, **kwargs):
        args, layout = split(args, kwargs)
        return finish(lib(function, *args), layout)

    def fake(*args, **kwargs):
        args, layout = split(args, kwargs)
        device = next((a.device for a in args if isinstance(a, torch.Tensor)),
                      torch.device("cuda"))
        outs = []
        for spec, shape in zip(specs, aot.Library.result_shapes(entry, args)):
            if shape is None:
                raise RuntimeError(f"{function}: {spec['name']}'s sizes are not an "
                                   "input's; no fake implementation")
            outs.append(torch.empty(shape, dtype=aot._DTYPES[spec["dtype"]], device=device))
        return finish(outs, layout)

    op = torch.library.custom_op(qualified, impl, mutates_args=_mutated(entry),
                                 device_types="cuda", schema=_schema(entry, with_layout))
    op.register_fake(fake)
    return op


def _register_training(namespace, function, entry, lib):
    """torch.ops.<namespace>.F as F_forward's output, with F_forward's
    autograd running F_backward."""
    training = entry["backward"]
    forward_entry = lib.entries[training["forward"]][0]
    ops = getattr(torch.ops, namespace)
    forward = getattr(ops, training["forward"])
    backward = getattr(ops, training["backward"])
    arity = len(entry["arguments"])
    returns_selection = len(forward_entry["results"]) == 3
    tensor_args = [i for i, a in enumerate(entry["arguments"]) if a["kind"] != "index"]
    grad_of = training["inputs"]  # the arguments q, k and v

    def setup_context(ctx, inputs, output):
        ctx.indices = {i: inputs[i] for i in range(arity) if i not in tensor_args}
        saved = [inputs[i] for i in tensor_args] + list(output)
        ctx.save_for_backward(*saved)
        ctx.mark_non_differentiable(*output[1:])

    def backward_fn(ctx, grad_o, *unused):
        saved = ctx.saved_tensors
        args, it = [], iter(saved[:len(tensor_args)])
        for i in range(arity):
            args.append(next(it) if i in tensor_args else ctx.indices[i])
        outputs = list(saved[len(tensor_args):])
        o, lse = outputs[0], outputs[1]
        extra = [outputs[2]] if returns_selection else []
        dq, dk, dv = backward(*args, *extra, o, lse, grad_o.contiguous())
        grads = [None] * arity
        for i, g in zip(grad_of, (dq, dk, dv)):
            grads[i] = g
        return tuple(grads)

    torch.library.register_autograd(f"{namespace}::{training['forward']}", backward_fn,
                                    setup_context=setup_context)
    fragment = torch.library.Library(namespace, "FRAGMENT")
    fragment.define(f"{function}{_schema(entry, False)}")

    def differentiable(*args):
        return forward(*args)[0]

    fragment.impl(function, differentiable, "CompositeImplicitAutograd")
    _fragments[f"{namespace}::{function}"] = fragment


def load_library(path, namespace="pisa"):
    """Registers every entry point of the AOT library at `path` as
    torch.ops.<namespace>.<function>; returns the op names. Loading the same
    library again is a no-op; two libraries with the same function name
    need different namespaces."""
    lib = aot.Library(path)
    training = {e["function"] for e, _, _ in lib.entries.values() if "backward" in e}
    internal = {e["backward"][k] for e, _, _ in lib.entries.values() if "backward" in e
                for k in ("forward", "backward")}
    names = []
    for function, (entry, _, _) in lib.entries.items():
        qualified = f"{namespace}::{function}"
        if qualified in _loaded:
            if _loaded[qualified] != lib.path:
                raise RuntimeError(f"{qualified} is already registered from "
                                   f"{_loaded[qualified]}; use another namespace")
            names.append(qualified)
            continue
        if function in training:
            continue  # after its forward and backward ops exist
        with_layout = function not in internal and any("layout" in r for r in entry["results"])
        _register_entry(lib, namespace, function, entry, with_layout)
        _loaded[qualified] = lib.path
        names.append(qualified)
    for function in sorted(training):
        qualified = f"{namespace}::{function}"
        if qualified in _loaded:
            continue
        _register_training(namespace, function, lib.entries[function][0], lib)
        _loaded[qualified] = lib.path
        names.append(qualified)
    return names


class PisaAttention(torch.nn.Module):
    """Sparse attention of an AOT library as a module, over token-major
    tensors like fla's `parallel_nsa`: q [B, T, Hq, d], k [B, T, Hkv, d],
    v [B, T, Hkv, dv] -> o [B, T, Hq, dv], differentiable in q, k and v.
    `function` is an entry point whose result is a `pisa.sparse_attention`'s
    output (by default the library's only one) and whose arguments are q, k,
    v and the query offset; a head-major library ([B, H, T, d]) gets
    transposed copies. The offset is Nk - Nq (the queries are the last
    positions).

    A packed varlen entry point (arguments q, k, v, cu_seqlens_q,
    cu_seqlens_k; `pisa.sparse_attention_varlen`) takes packed sequences
    as fla's and FlashAttention's varlen calls do: module(q, k, v,
    cu_seqlens) with q [T, Hq, d] or [1, T, Hq, d] (and k, v alike),
    cu_seqlens [B + 1] int32 for both, or cu_seqlens_k as well when the
    queries are each sequence's last Nq_b positions."""

    def __init__(self, path, function=None, namespace="pisa"):
        super().__init__()
        load_library(path, namespace)
        lib = aot.Library(path)
        candidates = [e for e, _, _ in lib.entries.values() if "backward" in e]
        if function is None:
            if len(candidates) != 1:
                raise ValueError(f"{path}: name the function: entry points with a "
                                 f"backward are {[e['function'] for e in candidates]}")
            function = candidates[0]["function"]
        entry = next((e for e in candidates if e["function"] == function), None)
        if entry is None:
            raise ValueError(f"{path}: {function} has no backward entry point "
                             "(its result is not a pisa.sparse_attention's output)")
        kinds = [a["kind"] for a in entry["arguments"]]
        roles = [a.get("roles", []) for a in entry["arguments"]]
        self.packed = kinds == ["memref"] * 5 and roles[3:] == [["cu_seqlens_q"],
                                                                ["cu_seqlens_k"]]
        if kinds != ["memref", "memref", "memref", "index"] and not self.packed:
            raise ValueError(f"{function} takes {kinds}; PisaAttention calls "
                             "(q, k, v, offset) or (q, k, v, cu_seqlens_q, "
                             "cu_seqlens_k)")
        self.function = function
        self.token_major = entry["backward"].get("token_major", False)
        self.op = getattr(getattr(torch.ops, namespace), function)

    def forward(self, q, k, v, cu_seqlens=None, cu_seqlens_k=None):
        if self.packed:
            if cu_seqlens is None:
                raise ValueError(f"{self.function} takes packed sequences: pass "
                                 "cu_seqlens")
            batched = q.dim() == 4
            if batched and q.shape[0] != 1:
                raise ValueError("packed sequences are [T, H, d] or [1, T, H, d]")
            if batched:
                q, k, v = q[0], k[0], v[0]
            o = self.op(q, k, v, cu_seqlens,
                        cu_seqlens if cu_seqlens_k is None else cu_seqlens_k)
            return o[None] if batched else o
        if cu_seqlens is not None or cu_seqlens_k is not None:
            raise ValueError(f"{self.function} is not a packed (varlen) entry point")
        offset = k.shape[1] - q.shape[1]
        if self.token_major:
            return self.op(q, k, v, offset)
        heads = [t.transpose(1, 2).contiguous() for t in (q, k, v)]
        return self.op(*heads, offset).transpose(1, 2)
