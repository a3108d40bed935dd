"""Cut a region out of its unit's graph as a standalone function of tensors.

Two forms of the same cut:
- *baked*: the Python numbers the region reads (shape arithmetic such as the batch size of a
  ``view``) become literals, so the function takes tensors only. This is the target's reference
  (the ``Model.forward`` of its problem) and its identity: two regions with the same baked code
  are one target, wherever in the model they are called.
- *open*: every external input stays an argument; this is the fallback a guard calls when the
  kernel was not verified for what it is given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
import torch.fx as fx
import torch.nn as nn

from .regions import Region

_DELS = re.compile(r";\s+[\w ,=]+ = None$", re.M)
_ACTIVATION_NAMES = ("x", "y", "z", "u", "v", "w")


@dataclass(frozen=True)
class Cut:
    gm: fx.GraphModule
    code: str  # ``def forward(self, ...)`` as FX writes it, without the noise of ``x = None``
    arg_names: tuple[str, ...]  # the forward's parameter names


def input_names(gm: fx.GraphModule, region: Region, consts: dict | None = None) -> list[str]:
    """Readable parameter names for the region's external inputs: activations x, y, z, …;
    parameters by their attribute name (weight, bias, running_mean, …)."""
    by_name = {n.name: n for n in gm.graph.nodes}
    names: list[str] = []
    n_act = 0
    for inp in region.inputs:
        node = by_name[inp]
        if consts and inp in consts:
            base = "const"
        elif node.op == "get_attr":
            base = str(node.target).rsplit(".", 1)[-1]
        else:
            base = _ACTIVATION_NAMES[n_act] if n_act < len(_ACTIVATION_NAMES) else f"x{n_act}"
            n_act += 1
        base = re.sub(r"\W", "_", base) or "arg"
        name, k = base, 1
        while name in names or name in ("self", "torch"):
            name, k = f"{base}_{k}", k + 1
        names.append(name)
    return names


def cut(gm: fx.GraphModule, region: Region, consts: dict[str, object] | None = None) -> Cut:
    """The region as a GraphModule; ``consts`` (input node name -> value) are baked in as literals."""
    consts = consts or {}
    by_name = {n.name: n for n in gm.graph.nodes}
    graph = fx.Graph()
    env: dict[fx.Node, object] = {}
    arg_names = []
    for inp, name in zip(region.inputs, input_names(gm, region, consts), strict=True):
        if inp in consts:
            env[by_name[inp]] = consts[inp]
        else:
            env[by_name[inp]] = graph.placeholder(name)
            arg_names.append(name)
    for name in region.nodes:
        node = by_name[name]
        args = fx.map_arg(node.args, lambda a: env[a])
        kwargs = fx.map_arg(node.kwargs, lambda a: env[a])
        env[node] = graph.create_node(node.op, node.target, args, kwargs)  # fresh names: same code, same name
    graph.output(env[by_name[region.sink]])
    out = fx.GraphModule(nn.Module(), graph)
    return Cut(gm=out, code=clean_code(out.code), arg_names=tuple(arg_names))


def _functional_names(code: str) -> str:
    """``torch._C._nn.linear`` -> ``torch.nn.functional.linear`` where they are the same function."""
    import torch.nn.functional as F

    def sub(m: re.Match) -> str:
        name = m.group(1)
        same = getattr(F, name, None) is getattr(torch._C._nn, name, object())
        return f"torch.nn.functional.{name}" if same else m.group(0)

    return re.sub(r"torch\._C\._nn\.(\w+)", sub, code)


def clean_code(code: str) -> str:
    lines = [ln for ln in _functional_names(_DELS.sub("", code)).strip("\n").splitlines()]
    return "\n".join(ln.rstrip() for ln in lines) + "\n"


def is_const(value) -> bool:
    """A value that can be written as a Python literal in a problem file."""
    if value is None or isinstance(value, (bool, int, float, str, torch.dtype)):
        return True
    if isinstance(value, torch.device):
        return True
    if isinstance(value, (tuple, list)):
        return all(is_const(v) for v in value)
    return False
