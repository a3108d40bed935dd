"""Trace a model into "units": modules whose forward is captured as one fx graph.

Why torch.fx first (see docs/design.md, "Whole models"): a traced graph names every call at the level
the user wrote it (``x.pow(2)``, ``torch.softmax``, ``self.norm``), keeps the module path of each
node, turns a group of nodes back into readable Python (the target's problem source), and can be
rewritten so that one node calls a kernel instead of the group (integration) — all with plain torch.

fx traces with symbolic values, so ordinary model code defeats it: a mask sized by the input
(``torch.ones(t, t)``), a check on a shape. Each module is captured by the first of these that works:
1. ``fx.symbolic_trace`` of the module (as before; its code hash is ``runtime.fingerprint``'s);
2. fx again, with the descendants whose *own* code fx cannot trace kept as opaque calls — each of
   them is then captured on its own (so a decoder block stays fx, its attention goes to step 3);
3. ``torch.export`` of the module on the inputs it was really called with (``export_capture``): an
   ATen graph with symbolic shapes and guards, checked to reproduce the module on every recorded call;
4. none: the module's own code runs as is (reported as not traced, with the reason) and each child
   is captured by the same rules.
Steps 2 and 3 need example inputs; without them a module that fx cannot trace goes to step 4.
Modules without a forward of their own (``ModuleList``, ``ModuleDict``) are only looked into.

Known leaf modules (Linear, Conv, norms, activations, pooling, Embedding, Dropout) are rewritten to
their functional form with their parameters as graph inputs, so a target made from them is a pure
function of tensors: its problem is self-contained and its kernel gets the weights as arguments.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
from dataclasses import dataclass, field

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F
import torch.utils._pytree as pytree

from .export_capture import CaptureError, can_export, export_graphs, reproduces

_CALLS_PER_MODULE = 4  # recorded calls (distinct input signatures) a captured graph is checked on


@dataclass
class Unit:
    """One captured module: ``gm`` is its functional graph (shares the module's parameters)."""

    path: str  # module path inside the model ("" for the root)
    module: nn.Module
    gm: fx.GraphModule
    # hash of the plain fx trace (= runtime.fingerprint); None where plain fx cannot trace the module
    # (runtime.fingerprint gives None there too)
    fingerprint: str | None
    signature: inspect.Signature = field(repr=False)
    capture: str = "fx"  # "fx" | "fx, submodules opaque" | "torch.export"

    def qualify(self, local: str) -> str:
        """A module path inside this unit, as a path inside the model."""
        if not local:
            return self.path or "(model)"
        return f"{self.path}.{local}" if self.path else local


@dataclass
class Tracing:
    units: list[Unit]
    untraced: list[str]  # module paths whose own code runs as is (their children may be units)
    why: dict[str, str]  # untraced path -> why torch.export could not capture it either


class _Tracer(fx.Tracer):
    """fx's tracer, with some modules kept as opaque calls."""

    def __init__(self, opaque: frozenset[int]) -> None:
        super().__init__()
        self.opaque = opaque

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return id(m) in self.opaque or super().is_leaf_module(m, qualname)


def _fx(module: nn.Module, opaque: frozenset[int] = frozenset()) -> fx.GraphModule | None:
    try:
        if not opaque:
            return fx.symbolic_trace(module)
        tracer = _Tracer(opaque)
        graph = tracer.trace(module)
        return fx.GraphModule(tracer.root, graph, type(module).__name__)
    except Exception:
        return None


def _has_forward(module: nn.Module) -> bool:
    return type(module).forward is not nn.Module.forward


def _call_key(args: tuple, kwargs: dict) -> tuple:
    return tuple((tuple(v.shape), v.dtype) if isinstance(v, torch.Tensor) else repr(v)
                 for v in pytree.tree_leaves((args, kwargs)))


@contextlib.contextmanager
def _recording(modules: list[nn.Module], calls: dict[int, list]):
    """Record (args, kwargs, output) of the first calls of each module, one per input signature
    (the forward is an instance attribute for the run, so direct ``.forward`` calls count too)."""
    patched = []
    for m in modules:
        had = "forward" in m.__dict__
        old = m.__dict__.get("forward")
        inner = old if had else type(m).forward.__get__(m)

        def forward(*args, _m=m, _inner=inner, **kwargs):
            out = _inner(*args, **kwargs)
            seen = calls.setdefault(id(_m), [])
            key = _call_key(args, kwargs)
            if len(seen) < _CALLS_PER_MODULE and all(k != key for k, *_ in seen):
                seen.append((key, args, kwargs, out))
            return out

        m.forward = forward
        patched.append((m, had, old))
    try:
        yield
    finally:
        for m, had, old in patched:
            if had:
                m.forward = old
            else:
                del m.forward


def _fx_unit(path: str, module: nn.Module, gm: fx.GraphModule, fingerprint: str | None, capture: str) -> Unit:
    functionalize(gm)
    return Unit(path=path, module=module, gm=gm, fingerprint=fingerprint,
                signature=inspect.signature(module.forward), capture=capture)


def trace_units(model: nn.Module, inputs: list | tuple | None = None) -> Tracing:
    """The captured units of ``model`` (see module doc); ``inputs`` are the model's example inputs,
    needed for the captures that run the model (steps 2 and 3)."""
    out = Tracing(units=[], untraced=[], why={})
    own_ok: dict[int, bool] = {}
    seen: set[int] = set()
    export = inputs is not None and can_export()

    def own_code_traces(m: nn.Module) -> bool:
        if id(m) not in own_ok:
            rest = frozenset(id(d) for d in m.modules() if d is not m)
            own_ok[id(m)] = _fx(m, rest) is not None
        return own_ok[id(m)]

    def children(path: str, m: nn.Module):
        for name, child in m.named_children():
            yield (f"{path}.{name}" if path else name), child

    def culprits(path: str, m: nn.Module) -> list[tuple[str, nn.Module]]:
        """The outermost descendants whose own code fx cannot trace."""
        found = []
        for cpath, child in children(path, m):
            if _has_forward(child) and not own_code_traces(child):
                found.append((cpath, child))
            else:
                found += culprits(cpath, child)
        return found

    def not_traced(path: str, m: nn.Module, queue: list, why: str | None) -> None:
        out.untraced.append(path or "(model)")
        if why:
            out.why[path or "(model)"] = why
        for cpath, child in children(path, m):
            visit(cpath, child, queue)

    def visit(path: str, m: nn.Module, queue: list) -> None:
        if id(m) in seen:
            return
        seen.add(id(m))
        if not _has_forward(m):
            for cpath, child in children(path, m):
                visit(cpath, child, queue)
            return
        gm = _fx(m)
        if gm is not None:
            fp = hashlib.sha256((type(m).__qualname__ + "\n" + gm.code).encode()).hexdigest()[:16]  # = runtime.fingerprint
            out.units.append(_fx_unit(path, m, gm, fp, "fx"))
            return
        if not export:
            not_traced(path, m, queue, None)
            return
        if own_code_traces(m):
            bad = culprits(path, m)
            gm = _fx(m, frozenset(id(c) for _, c in bad)) if bad else None
            if gm is not None:
                out.units.append(_fx_unit(path, m, gm, None, "fx, submodules opaque"))
                for cpath, child in bad:
                    seen.discard(id(child))
                    queue.append((cpath, child))
                return
        queue.append((path, m))

    queue: list[tuple[str, nn.Module]] = []
    visit("", model, queue)
    shared: dict = {}  # one export for modules that are twins (the layers of a decoder)
    while queue:
        current, queue = queue, []
        calls: dict[int, list] = {}
        with _recording([m for _, m in current], calls), torch.no_grad():
            model(*inputs)
        for path, m in current:
            seen.add(id(m))
            recorded = [(a, k, o) for _key, a, k, o in calls.get(id(m), [])]
            if not recorded:
                continue  # not called by this forward: none of its code runs
            try:
                args, kwargs, _out = recorded[0]
                gm, why = None, ""
                for candidate in export_graphs(m, args, kwargs, shared):
                    why = reproduces(candidate, m, recorded)
                    if why is None:
                        gm = candidate
                        break
                if gm is None:
                    raise CaptureError(why)
            except CaptureError as err:
                not_traced(path, m, queue, str(err))
                continue
            out.units.append(Unit(path=path, module=m, gm=gm, fingerprint=None,
                                  signature=inspect.signature(m.forward), capture="torch.export"))
    return out


# -- leaf modules to their functional form ----------------------------------------------------------


def _attr(graph: fx.Graph, gm: fx.GraphModule, target: str, name: str) -> fx.Node | None:
    mod = gm.get_submodule(target)
    if getattr(mod, name, None) is None:
        return None
    return graph.get_attr(f"{target}.{name}")


def _functional_call(graph: fx.Graph, gm: fx.GraphModule, node: fx.Node):
    """(function, args, kwargs) equivalent to calling the leaf module of ``node`` in eval mode, or
    None when the module is not one we know (it stays a module call)."""
    mod = gm.get_submodule(node.target)
    t = node.target
    x = node.args[0] if node.args else None
    if len(node.args) != 1 or node.kwargs:
        return None
    a = lambda name: _attr(graph, gm, t, name)  # noqa: E731
    if isinstance(mod, nn.Linear):
        return F.linear, (x, a("weight"), a("bias")), {}
    conv = {nn.Conv1d: F.conv1d, nn.Conv2d: F.conv2d, nn.Conv3d: F.conv3d}.get(type(mod))
    if conv is not None and mod.padding_mode == "zeros":
        return conv, (x, a("weight"), a("bias"), mod.stride, mod.padding, mod.dilation, mod.groups), {}
    if isinstance(mod, nn.modules.batchnorm._BatchNorm) and mod.track_running_stats and not mod.training:
        if mod.running_mean is None:
            return None
        return F.batch_norm, (x, a("running_mean"), a("running_var"), a("weight"), a("bias"), False, 0.0, mod.eps), {}
    if isinstance(mod, nn.LayerNorm):
        return F.layer_norm, (x, tuple(mod.normalized_shape), a("weight"), a("bias"), mod.eps), {}
    if isinstance(mod, nn.GroupNorm):
        return F.group_norm, (x, mod.num_groups, a("weight"), a("bias"), mod.eps), {}
    if hasattr(nn, "RMSNorm") and isinstance(mod, nn.RMSNorm):
        return F.rms_norm, (x, tuple(mod.normalized_shape), a("weight"), mod.eps), {}
    simple = {nn.ReLU: F.relu, nn.SiLU: F.silu, nn.Sigmoid: torch.sigmoid, nn.Tanh: torch.tanh,
              nn.Mish: F.mish, nn.Hardswish: F.hardswish, nn.Hardsigmoid: F.hardsigmoid, nn.ReLU6: F.relu6}
    if type(mod) in simple:
        return simple[type(mod)], (x,), {}
    if isinstance(mod, nn.GELU):
        return F.gelu, (x,), {"approximate": mod.approximate}
    if isinstance(mod, nn.LeakyReLU):
        return F.leaky_relu, (x, mod.negative_slope), {}
    if isinstance(mod, nn.ELU):
        return F.elu, (x, mod.alpha), {}
    if isinstance(mod, nn.Softplus):
        return F.softplus, (x, mod.beta, mod.threshold), {}
    if isinstance(mod, (nn.Softmax, nn.LogSoftmax)) and mod.dim is not None:
        return (torch.softmax if isinstance(mod, nn.Softmax) else torch.log_softmax), (x,), {"dim": mod.dim}
    maxp = {nn.MaxPool1d: F.max_pool1d, nn.MaxPool2d: F.max_pool2d, nn.MaxPool3d: F.max_pool3d}.get(type(mod))
    if maxp is not None and not mod.return_indices:
        return maxp, (x, mod.kernel_size, mod.stride, mod.padding, mod.dilation), {"ceil_mode": mod.ceil_mode}
    avgp = {nn.AvgPool1d: F.avg_pool1d, nn.AvgPool2d: F.avg_pool2d, nn.AvgPool3d: F.avg_pool3d}.get(type(mod))
    if avgp is not None:
        kw = {"ceil_mode": mod.ceil_mode, "count_include_pad": mod.count_include_pad}
        if getattr(mod, "divisor_override", None) is not None:
            kw["divisor_override"] = mod.divisor_override
        return avgp, (x, mod.kernel_size, mod.stride, mod.padding), kw
    adap = {nn.AdaptiveAvgPool1d: F.adaptive_avg_pool1d, nn.AdaptiveAvgPool2d: F.adaptive_avg_pool2d,
            nn.AdaptiveAvgPool3d: F.adaptive_avg_pool3d}.get(type(mod))
    if adap is not None:
        return adap, (x, mod.output_size), {}
    if isinstance(mod, nn.Embedding) and mod.max_norm is None:
        return F.embedding, (x, a("weight"), mod.padding_idx), {}
    if isinstance(mod, nn.Flatten):
        return torch.flatten, (x, mod.start_dim, mod.end_dim), {}
    return None


def functionalize(gm: fx.GraphModule) -> None:
    """Rewrite known leaf-module calls in place (eval semantics); identity modules are dropped."""
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op != "call_module":
            continue
        mod = gm.get_submodule(node.target)
        if isinstance(mod, (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.Identity)) and not mod.training:
            if len(node.args) == 1 and isinstance(node.args[0], fx.Node):
                node.replace_all_uses_with(node.args[0])
                graph.erase_node(node)
            continue
        if getattr(mod, "inplace", False):
            src = node.args[0] if node.args else None
            if not isinstance(src, fx.Node) or len(src.users) != 1:
                continue  # an in-place op whose input is read elsewhere: its mutation matters
        with graph.inserting_before(node):
            call = _functional_call(graph, gm, node)
            if call is None:
                continue
            fn, args, kwargs = call
            new = graph.call_function(fn, args, kwargs)
        stack = dict(node.meta.get("nn_module_stack", {}))
        stack[node.target] = (node.target, type(mod))
        new.meta["nn_module_stack"] = stack
        for arg in new.args:
            if isinstance(arg, fx.Node) and arg.op == "get_attr":
                arg.meta["nn_module_stack"] = stack
        node.replace_all_uses_with(new)
        graph.erase_node(node)
    graph.lint()
    gm.recompile()


def module_path(node: fx.Node) -> str:
    """Where in the unit ``node`` is called: the innermost module on its stack."""
    if node.op == "call_module":
        return str(node.target)
    stack = node.meta.get("nn_module_stack")
    if stack:
        return str(list(stack.values())[-1][0])
    return ""
