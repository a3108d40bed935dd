"""Capture a module's forward through ``torch.export``, for code that ``torch.fx`` cannot trace.

Why: fx traces with symbolic values, so ordinary model code fails on it — a factory sized by the
input (``torch.ones(t, t)`` for a causal mask), a check on a shape (``if t > self.max_seq``). Export
runs the forward on fake tensors of the real example inputs, with every input dimension left
symbolic where the code allows (``Dim.AUTO``), so shape arithmetic stays in the graph
(``aten.sym_size``) and Python control flow on shapes is decided by the example. The result is an
ATen graph at the level the user wrote (``aten.linear``, ``aten.masked_fill``, ``aten.softmax``), not
decomposed further; each aten op is then written back as the torch call of the same schema
(``torch.softmax``, ``x.view``) where one exists, so a target's problem reads like the user's code.

The exported graph is turned into the form the rest of ``modelopt`` expects of a unit's graph: one
placeholder per parameter of the module's ``forward`` (so the profile's recorder and the patched
forward of integration call it as the module is called), parameters and buffers as ``get_attr`` of
the module itself (shared, not copied), and, at its top, ``torch._assert`` guards on what the
capture decided from the example: a dimension held constant, an upper bound on a dimension from a
shape check, the dtype of each tensor input, the value of each non-tensor input. A call outside
what the graph was captured for fails loudly instead of computing something else.

Export runs the module's Python code: attributes the forward assigns (caches) are put back
afterwards. A module that mutates a buffer or an input, takes ``*args``/``**kwargs`` or nested
inputs, or whose captured graph does not reproduce its output on every recorded call is refused
with one sentence (``CaptureError``); the caller falls back to the module's children.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import logging
import operator
import types

import torch
import torch.fx as fx
import torch.nn as nn
import torch.utils._pytree as pytree

from .extract import is_const
from .runtime import CAPTURE_GUARD

_SMALL_CONSTANT = 16  # elements: a tensor made in forward that the graph rebuilds with torch.tensor
GUARD = "kforge_guard"  # node meta key: a guard this capture added (not the model's code: never timed)
# export's own checks of what it traced (the dtype of a tensor it made): true by construction
_DROPPED = ("_assert_tensor_metadata",)


class CaptureError(Exception):
    """Why a module's forward could not be captured through torch.export (one sentence)."""


def can_export() -> bool:
    return hasattr(torch, "export") and hasattr(torch.export, "export")


@contextlib.contextmanager
def _preserved(module: nn.Module):
    """Put back every attribute the module tree had: export runs forward code that may cache."""
    saved = []
    for m in module.modules():
        saved.append((m, dict(m.__dict__), dict(m._parameters), dict(m._buffers), dict(m._modules)))
    try:
        yield
    finally:
        for m, attrs, params, buffers, modules in saved:
            m.__dict__.clear()
            m.__dict__.update(attrs)
            for live, old in ((m._parameters, params), (m._buffers, buffers), (m._modules, modules)):
                live.clear()
                live.update(old)


@contextlib.contextmanager
def _quiet_export():
    """Export logs a warning per specialized dimension (the guards say the same) and prints the
    partial graph of a failure to stderr (the reason says what failed, in one sentence)."""
    names = ("torch._export", "torch.export", "torch.fx.experimental.symbolic_shapes", "torch._dynamo")
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _reason(err: Exception) -> str:
    """One sentence for why export failed."""
    name, text = type(err).__name__, str(err).strip()
    if "data-dependent" in text or "DataDependent" in name:
        return f"torch.export failed: its code depends on the values in a tensor ({name})"
    first = text.splitlines()[0] if text else ""
    return f"torch.export failed ({name}: {first[:120]})"


def _oblivious(on: bool):
    """Size-oblivious shapes keep a dimension of size 1 symbolic (a batch of one stays a batch)."""
    try:
        from torch.fx.experimental import _config as shape_config
    except ImportError:
        return contextlib.nullcontext()
    if not on or not hasattr(shape_config, "backed_size_oblivious"):
        return contextlib.nullcontext()
    return shape_config.patch(backed_size_oblivious=True)


def _dynamic_spec(value):
    if isinstance(value, torch.Tensor):
        auto = getattr(getattr(torch.export, "Dim", None), "AUTO", None)
        return {i: auto for i in range(value.dim())} if auto is not None and value.dim() else None
    return None


def _resolves(module: nn.Module, target: str) -> bool:
    obj = module
    for part in target.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return isinstance(obj, torch.Tensor)


def bind_call(module: nn.Module, args: tuple, kwargs: dict) -> tuple[list[str], list]:
    """The forward's parameter names and the values of one call (defaults applied)."""
    sig = inspect.signature(module.forward)
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig.parameters.values()):
        raise CaptureError("its forward takes *args or **kwargs")
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    names, values = list(bound.arguments), list(bound.arguments.values())
    for name, v in zip(names, values, strict=True):
        if not isinstance(v, torch.Tensor) and not is_const(v):
            raise CaptureError(f"its argument {name!r} is a {type(v).__name__}, not a tensor or a number")
        if isinstance(v, (tuple, list)):
            raise CaptureError(f"its argument {name!r} is a {type(v).__name__} (only tensors and numbers are captured)")
    return names, values


def _export(module: nn.Module, values: list):
    specs = tuple(_dynamic_spec(v) for v in values)
    errors = []
    for oblivious in (True, False):
        try:
            with _preserved(module), torch.no_grad(), _quiet_export(), _oblivious(oblivious):
                return torch.export.export(module, tuple(values), dynamic_shapes=specs, strict=False)
        except Exception as err:  # export reports its reasons with many exception types
            errors.append(err)
            if "data-dependent" in str(err):
                break  # no shape assumption helps code that reads tensor values
    raise CaptureError(_reason(errors[-1]))


def _guards(graph: fx.Graph, names: list[str], placeholders: list[fx.Node], ep_inputs: list[fx.Node],
            values: list, ranges: dict) -> None:
    """``torch._assert`` nodes for what the capture assumed about each input (see module doc)."""
    def check(cond: fx.Node, what: str) -> None:
        graph.call_function(torch._assert, (cond, f"{CAPTURE_GUARD} {what}; "
                                                  "this call is outside what was profiled"))

    for name, ph, ep_in, value in zip(names, placeholders, ep_inputs, values, strict=True):
        if not isinstance(value, torch.Tensor):
            check(graph.call_function(operator.eq, (ph, value)), f"{name} == {value!r}")
            continue
        check(graph.call_function(operator.eq, (graph.call_function(getattr, (ph, "dtype")), value.dtype)),
              f"{name}.dtype == {value.dtype}")
        check(graph.call_function(operator.eq, (graph.call_method("dim", (ph,)), value.dim())),
              f"{name}.dim() == {value.dim()}")
        fake = ep_in.meta.get("val")
        shape = tuple(fake.shape) if isinstance(fake, torch.Tensor) else tuple(value.shape)
        for d, size in enumerate(shape):
            if isinstance(size, int):
                n = graph.call_method("size", (ph, d))
                check(graph.call_function(operator.eq, (n, size)), f"{name}.size({d}) == {size}")
                continue
            expr = getattr(getattr(size, "node", None), "expr", None)
            vr = ranges.get(expr)
            if vr is None:
                continue
            upper = _finite_int(vr.upper)
            if upper is not None:
                n = graph.call_method("size", (ph, d))
                check(graph.call_function(operator.le, (n, upper)), f"{name}.size({d}) <= {upper}")


def _finite_int(x) -> int | None:
    try:
        if getattr(x, "is_infinite", False) or str(x) in ("int_oo", "oo"):
            return None
        return int(x)
    except (TypeError, ValueError, OverflowError):
        return None


def _python_call(target) -> tuple[str, object] | None:
    """The torch call a user would write for an aten op — ``torch.softmax`` for ``aten.softmax.int``,
    ``x.view`` for ``aten.view.default`` — where a generated binding of the same schema exists: it
    reads as the user's code and skips the boxed dispatch of ``torch.ops`` (microseconds per call).
    None where there is none (private ops, ``aten.slice``): the aten op stays."""
    name = target.overloadpacket.__name__
    if name == "sym_size":
        return "call_method", "size"
    if name.startswith("_"):
        return None
    for namespace in (torch, torch._C._nn):
        f = getattr(namespace, name, None)
        if isinstance(f, types.BuiltinFunctionType):
            return "call_function", f
    base = getattr(torch._C, "TensorBase", None) or getattr(torch._C, "_TensorBase", None)
    if isinstance(getattr(base, name, None), types.MethodDescriptorType):
        return "call_method", name
    return None


def _unit_graph(ep, module: nn.Module, names: list[str], values: list, torch_level: bool) -> fx.GraphModule:
    sig = ep.graph_signature
    graph = fx.Graph()
    placeholders = [graph.placeholder(n) for n in names]
    env: dict[fx.Node, object] = {}
    ep_nodes = [n for n in ep.graph.nodes if n.op == "placeholder"]
    if len(ep_nodes) != len(sig.input_specs):
        raise CaptureError("torch.export returned inputs this capture does not know")
    user_inputs = []
    pending_attrs = []
    for node, spec in zip(ep_nodes, sig.input_specs, strict=True):
        kind = spec.kind.name
        if kind == "USER_INPUT":
            user_inputs.append(node)
        elif kind in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR"):
            pending_attrs.append((node, spec, kind))
        else:
            raise CaptureError(f"its graph takes a {kind.lower()} input")
    if len(user_inputs) != len(names):
        raise CaptureError("its inputs did not flatten to one value per argument")
    before = set(graph.nodes)
    _guards(graph, names, placeholders, user_inputs, values, dict(ep.range_constraints))
    for n in graph.nodes:
        if n not in before:
            n.meta[GUARD] = True
    for node, ph in zip(user_inputs, placeholders, strict=True):
        env[node] = ph
    for node, spec, kind in pending_attrs:
        if _resolves(module, spec.target):
            env[node] = graph.get_attr(spec.target)
            continue
        value = ep.constants.get(spec.target) if kind == "CONSTANT_TENSOR" else None
        if isinstance(value, torch.Tensor) and value.numel() <= _SMALL_CONSTANT:
            env[node] = graph.call_function(torch.tensor, (value.tolist(),),
                                            {"dtype": value.dtype, "device": value.device})
        else:
            raise CaptureError(f"its graph reads {spec.target!r}, which is not an attribute of the module")

    out_node = None
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            continue
        if node.op == "output":
            out_node = node
            break
        if node.op != "call_function":
            raise CaptureError(f"its graph has a {node.op} node ({node.target})")
        if isinstance(node.target, torch._ops.OpOverload) and not node.users \
                and node.target.overloadpacket.__name__ in _DROPPED:
            continue
        new = graph.node_copy(node, lambda n: env[n])
        call = _python_call(node.target) if torch_level and isinstance(node.target, torch._ops.OpOverload) else None
        if call is not None:
            new.op, new.target = call
        stack = new.meta.get("nn_module_stack")
        if stack:  # export marks nodes it adds itself with a placeholder entry
            new.meta["nn_module_stack"] = {k: v for k, v in stack.items() if not str(k).startswith("_empty_")}
        env[node] = new
    flat = list(out_node.args[0]) if out_node is not None else []
    outputs = [env[a] if isinstance(a, fx.Node) else a for a in flat]
    graph.output(pytree.tree_unflatten(outputs, ep.call_spec.out_spec))
    graph.lint()
    return fx.GraphModule(module, graph, type(module).__name__)


def _twin_key(module: nn.Module, values: list) -> str:
    """What decides a module's exported graph besides its code: its class, the plain attributes of
    every submodule, the shapes of its parameters and buffers, and the call. Modules with the same
    key (the layers of a decoder) share one export; each graph is still checked on its own module."""
    parts: list = [type(module).__module__, type(module).__qualname__]
    for name, sub in module.named_modules():
        plain = sorted((k, repr(v)) for k, v in vars(sub).items()
                       if not k.startswith("_") and not isinstance(v, (torch.Tensor, nn.Module)))
        parts.append((name, type(sub).__module__, type(sub).__qualname__, plain))
    for name, t in [*module.named_parameters(), *module.named_buffers()]:
        parts.append((name, tuple(t.shape), str(t.dtype), str(t.device)))
    for v in values:
        parts.append((tuple(v.shape), v.stride(), str(v.dtype), str(v.device)) if isinstance(v, torch.Tensor) else repr(v))
    return repr(parts)


def export_graphs(module: nn.Module, args: tuple, kwargs: dict, shared: dict | None = None) -> list[fx.GraphModule]:
    """``module``'s forward on the call ``(args, kwargs)`` as unit graphs (see module doc), best
    first: with torch calls where they exist, then with aten ops only. Raises ``CaptureError`` with
    the reason when there is none. ``shared`` keeps exports for the module's twins (``_twin_key``)."""
    if not can_export():
        raise CaptureError(f"this torch ({torch.__version__}) has no torch.export")
    names, values = bind_call(module, args, kwargs)
    key = _twin_key(module, values) if shared is not None else ""
    ep = shared.get(key) if shared is not None else None
    if ep is None:
        try:
            ep = _export(module, values)
        except CaptureError as err:
            ep = err
        if shared is not None:
            shared[key] = ep
    if isinstance(ep, CaptureError):
        raise ep
    kinds = {s.kind.name for s in ep.graph_signature.output_specs}
    if kinds != {"USER_OUTPUT"} and kinds:
        raise CaptureError("its forward mutates a buffer or an input")
    return [_unit_graph(ep, module, names, values, torch_level) for torch_level in (True, False)]


def reproduces(gm: fx.GraphModule, module: nn.Module, calls: list[tuple[tuple, dict, object]]) -> str | None:
    """None when ``gm`` gives the module's recorded output on every recorded call, else why not."""
    for args, kwargs, expected in calls:
        _names, values = bind_call(module, args, kwargs)
        try:
            with torch.no_grad():
                got = gm(*values)
        except Exception as err:
            return f"its captured graph failed on a recorded call ({type(err).__name__}: {str(err)[:160]})"
        a, b = pytree.tree_leaves(expected), pytree.tree_leaves(got)
        if len(a) != len(b):
            return "its captured graph returns another structure than the module"
        for x, y in zip(a, b, strict=True):
            if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
                return "its captured graph returns another structure than the module"
            if not isinstance(x, torch.Tensor):
                if x != y:
                    return "its captured graph returns another value than the module"
                continue
            if x.shape != y.shape or x.dtype != y.dtype:
                return "its captured graph returns another shape or dtype than the module"
            if x.is_floating_point() or x.is_complex():
                ok = torch.allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True)
            else:
                ok = torch.equal(x, y)
            if not ok:
                return "its captured graph computes other values than the module"
    return None
