"""Group a unit's graph nodes into regions: what one kernel would replace.

Rules (applied from the output backwards, so a region grows as far up as it can):
1. Explicit attention — matmul, a chain of elementwise ops (scale, mask), softmax, matmul — is one
   region, with the views that feed its q/k/v.
2. A heavy op (linear, conv, pooling, embedding, SDPA) is a region of its own.
3. Adjacent fusible ops (elementwise, activations, reductions, softmax, norms) form one region,
   as long as every intermediate result is used only inside it (single output). That is what makes
   the four kernels of a hand-written RMSNorm, or batch norm + ReLU, one target.
Views and shape arithmetic are never a region on their own; fusible regions and attention absorb
the ones that only feed them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.fx as fx

from .ops import FUSIBLE_FAMILIES, HEAVY_FAMILIES, op_name


@dataclass(frozen=True)
class Region:
    index: int
    nodes: tuple[str, ...]  # node names, in graph order
    sink: str  # the node whose value leaves the region
    inputs: tuple[str, ...]  # external input nodes, in order of first use
    kind: str  # rms_norm | layer_norm | norm | softmax | attention | swiglu | activation | elementwise | reduction | linear | conv | pool | embedding
    ops: tuple[str, ...]  # op names of the nodes that compute (views left out)


_MATMUL = ("matmul", "bmm")


def _single_user(node: fx.Node) -> fx.Node | None:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _is_matmul(node: fx.Node, fam: dict[str, str]) -> bool:
    return fam.get(node.name) == "linear" and op_name(node) in _MATMUL


def _scores_path(node: fx.Node, fam: dict[str, str], depth: int = 8) -> bool:
    """True when ``node`` is a matmul, or single-use elementwise ops lead back to one (the scores)."""
    if depth == 0 or _single_user(node) is None:
        return False
    if _is_matmul(node, fam):
        return True
    return fam.get(node.name) == "elementwise" and any(
        _scores_path(a, fam, depth - 1) for a in node.all_input_nodes)


def _attention_core(softmax: fx.Node, fam: dict[str, str], masks: bool = True) -> list[fx.Node] | None:
    """matmul -> elementwise* -> softmax -> free* -> matmul, each link used once; else None.
    With ``masks``, an elementwise link may take a second elementwise input used only there — the
    mask an attention builds in ``forward`` (``ones(t, t).triu(1)`` for ``masked_fill``): it joins the
    region, so the kernel computes the mask and its own input is what the mask is made from."""
    core = [softmax]
    cur = softmax.args[0] if softmax.args else None
    while True:
        if not isinstance(cur, fx.Node) or _single_user(cur) is None:
            return None
        core.append(cur)
        if _is_matmul(cur, fam):
            break
        if fam.get(cur.name) != "elementwise":
            return None
        cands = [a for a in cur.all_input_nodes
                 if _single_user(a) is cur and fam.get(a.name) in ("linear", "elementwise")]
        matmuls = [a for a in cands if _is_matmul(a, fam)]
        scores = matmuls or [a for a in cands if _scores_path(a, fam)]
        if len(cands) == 1:
            cur = cands[0]
        elif masks and len(scores) == 1 and len(cands) == 2:
            side = next(a for a in cands if a is not scores[0])
            if any(fam.get(a.name) in ("linear", "elementwise") for a in side.all_input_nodes):
                return None  # a mask computed in more than one step: not attention's pattern
            core.append(side)
            cur = scores[0]
        else:
            return None
    cur = softmax
    while True:
        user = _single_user(cur)
        if user is None:
            return None
        if _is_matmul(user, fam) and user.args and user.args[0] is cur:
            core.append(user)
            return core
        if fam.get(user.name) != "free":
            return None
        core.append(user)
        cur = user


def _grow(region: set[fx.Node], allowed: tuple[str, ...], fam: dict[str, str], taken: set[fx.Node]) -> None:
    """Add producers whose every user is already inside the region, until nothing changes."""
    changed = True
    while changed:
        changed = False
        for node in list(region):
            for p in node.all_input_nodes:
                if p in region or p in taken or fam.get(p.name) not in allowed:
                    continue
                if all(u in region for u in p.users):
                    region.add(p)
                    changed = True


def _kind(ops: list[str], families: list[str]) -> str:
    s = set(ops)
    if "scaled_dot_product_attention" in s:
        return "attention"
    if s & {"rsqrt", "sqrt"} and s & {"mean", "sum", "var"}:
        return "layer_norm" if "sub" in s else "rms_norm"
    if s & {"rms_norm"}:
        return "rms_norm"
    if s & {"layer_norm"}:
        return "layer_norm"
    if "norm" in families:
        return "norm"
    if "softmax" in families:
        return "softmax"
    if len(ops) == 2 and s in ({"silu", "mul"}, {"gelu", "mul"}):
        return "swiglu" if "silu" in s else "geglu"
    if "activation" in families:
        return "activation"
    if "reduction" in families:
        return "reduction"
    return "elementwise"


def _in_place(node: fx.Node, gm: fx.GraphModule) -> bool:
    if node.op == "call_module":
        return bool(getattr(gm.get_submodule(node.target), "inplace", False))
    name = op_name(node)
    return (name.endswith("_") and node.op in ("call_method", "call_function")) or node.kwargs.get("inplace") is True


def _mutated_inside(members: list[fx.Node], region: set[fx.Node], nodes: list[fx.Node], order: dict,
                    gm: fx.GraphModule) -> bool:
    """True when an in-place op runs between the region's first and last node on something the
    region reads: one kernel call at the end would see the mutated value where the model did not."""
    touched = set(region) | {a for m in members for a in m.all_input_nodes}
    for n in nodes[order[members[0]] + 1:order[members[-1]]]:
        if n not in region and _in_place(n, gm) and any(a in touched for a in n.all_input_nodes):
            return True
    return False


def find_regions(gm: fx.GraphModule, fam: dict[str, str], masked_attention: bool = True) -> list[Region]:
    """Regions of ``gm``; ``fam`` maps node name -> family (from ``ops.family`` on a real run).
    ``masked_attention``: an attention whose mask is built in ``forward`` is one region (on a GPU,
    where the attention exemplar computes it); without, its masked softmax is a region of its own
    (on a CPU, where the masked-softmax exemplar computes that and no attention kernel exists)."""
    nodes = list(gm.graph.nodes)
    order = {n: i for i, n in enumerate(nodes)}
    taken: set[fx.Node] = set()
    found: list[tuple[set[fx.Node], fx.Node, str | None]] = []

    for n in nodes:  # 1. attention patterns
        if fam.get(n.name) == "softmax" and n not in taken:
            core = _attention_core(n, fam, masked_attention)
            if core and not (set(core) & taken):
                region = set(core)
                _grow(region, ("free",), fam, taken)
                taken |= region
                sink = max(core, key=order.__getitem__)
                found.append((region, sink, "attention"))

    for n in reversed(nodes):  # 2 and 3, from the output backwards
        if n in taken:
            continue
        f = fam.get(n.name)
        if f in HEAVY_FAMILIES:
            region = {n}
        elif f in FUSIBLE_FAMILIES:
            region = {n}
            _grow(region, FUSIBLE_FAMILIES + ("free",), fam, taken)
        else:
            continue
        taken |= region
        found.append((region, n, None))

    regions = []
    for region, sink, kind in sorted(found, key=lambda r: order[r[1]]):
        members = sorted(region, key=order.__getitem__)
        if _mutated_inside(members, region, nodes, order, gm):
            continue
        inputs: list[str] = []
        for m in members:
            for a in m.all_input_nodes:
                if a not in region and a.name not in inputs:
                    inputs.append(a.name)
        computing = [m for m in members if fam.get(m.name) != "free"]
        ops = [op_name(m, gm) for m in computing]
        families = [fam[m.name] for m in computing]
        if kind is None:
            kind = families[0] if len(computing) == 1 and families[0] in HEAVY_FAMILIES else _kind(ops, families)
        regions.append(Region(index=len(regions), nodes=tuple(m.name for m in members), sink=sink.name,
                              inputs=tuple(inputs), kind=kind, ops=tuple(ops)))
    return regions
