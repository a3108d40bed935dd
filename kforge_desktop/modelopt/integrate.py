"""Integrate chosen kernels back into the user's unmodified model object, and prove it did no harm.

Mechanism (see docs/design.md, "Whole models"): each traced unit gets a new ``forward`` — torch.fx's
own code for the unit, in which every replaced region is a single call to a guarded site — set as
an *instance* attribute of the module. Nothing of the user's class or source changes, parameters
stay shared (the new code reads ``self.<path>.weight``), ``remove()`` restores the object, and the
same generated source is what an export ships (``runtime.apply_plan`` applies both). Module
replacement would only reach targets that are whole modules (not the softmax inside an attention's
forward, nor a hand-written RMSNorm chain).

Each guarded site is also registered as a ``torch.library`` custom op (``kforge::<site>_p<n>``,
see ``runtime``), which is what the site calls under ``torch.compile``: the compiler cannot trace
a kernel, so without the op every kernel would break the graph (and ``fullgraph=True`` would
fail). Eagerly the site calls the kernel directly, without the dispatcher's round trip. The op's
fake implementation runs the site's original code on fake tensors, so its output shapes are the
reference's for any input. Which targets are put back at all is ``session.chosen_kernels``'s
choice; a target whose kernel loses to torch.compile's code is left to torch.compile there.

Before anything is reported, the patched model is compared with the original on the example inputs
and on fresh random inputs; a kernel that breaks the model is dropped (found by trying each alone).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.fx as fx

from .extract import cut
from .profile import Analysis, Instance
from .runtime import PLAN_FORMAT, SITE_PREFIX, PatchHandle, apply_plan, load_kernel


@dataclass(frozen=True)
class ChosenKernel:
    """The kernel kept for a target: a verified (or pinned) candidate and what it was verified on."""

    target: str
    source: str  # the candidate module (class ModelNew)
    signatures: tuple  # input signatures (shape, stride, dtype) per variant the evaluator checked
    node_id: int | None = None
    pinned: bool = False
    speedup: float | None = None  # the evaluator's speedup over eager for the target alone
    verdict: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ModelCheck:
    """Patched against original, on one set of inputs."""

    label: str  # "example inputs" | "fresh random inputs #1" …
    ok: bool
    max_abs_err: float
    rel_l2_err: float


@dataclass
class Integration:
    handle: PatchHandle
    plan: dict
    kept: list[str]  # targets whose kernel is in use
    dropped: dict[str, str]  # target -> why its kernel is not used
    checks: list[ModelCheck]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


class _SiteMarker:
    """A stand-in callable for code generation: torch.fx names it ``kforge_patch_<site>``."""

    def __init__(self, site: str) -> None:
        self.__name__ = site
        self.__qualname__ = site
        self.__module__ = SITE_PREFIX.rstrip("_")

    def __call__(self, *args):  # never called: the plan's code calls the GuardedKernel of the site
        raise RuntimeError("a patch site marker was called")


def _open_fallback(instance: Instance) -> str:
    c = cut(instance.unit.gm, instance.region, None)
    return c.code


def build_plan(analysis: Analysis, chosen: dict[str, ChosenKernel], device: str = "cpu") -> dict:
    """The plan (plain JSON data) that replaces every instance of each chosen target."""
    sites, units = [], []
    by_unit: dict[str, list[tuple[str, Instance]]] = {}
    for tname in chosen:
        for inst in analysis.instances.get(tname, []):
            by_unit.setdefault(inst.unit.path, []).append((tname, inst))
    for unit in analysis.units:
        todo = by_unit.get(unit.path)
        if not todo:
            continue
        graph = fx.Graph()
        val_map: dict[fx.Node, fx.Node] = {}
        out = graph.graph_copy(unit.gm.graph, val_map)
        graph.output(out)
        by_name = {n.name: n for n in graph.nodes}
        unit_sites = []
        for tname, inst in todo:
            region = inst.region
            site = f"{tname}__{len(sites)}"
            tensor_pos = [i for i, name in enumerate(region.inputs) if name not in inst.consts]
            consts = [[i, repr(inst.consts[name])] for i, name in enumerate(region.inputs) if name in inst.consts]
            sink = by_name[region.sink]
            with graph.inserting_before(sink):
                call = graph.call_function(_SiteMarker(site), tuple(by_name[i] for i in region.inputs))
            sink.replace_all_uses_with(call)
            for name in reversed(region.nodes):
                graph.erase_node(by_name[name])
            by_name[region.sink] = call  # a later region that reads this one's result reads the call
            sites.append({"name": site, "target": tname, "tensor_pos": tensor_pos, "consts": consts,
                          "fallback": _open_fallback(inst), "module": unit.qualify("")})
            unit_sites.append(site)
        graph.lint()
        code = graph.python_code(root_module="self")
        src = code.src
        for name, value in code.globals.items():
            if isinstance(value, _SiteMarker) and name != SITE_PREFIX + value.__name__:
                src = src.replace(name + "(", SITE_PREFIX + value.__name__ + "(")
        units.append({"path": unit.path, "cls": type(unit.module).__name__, "fingerprint": unit.fingerprint,
                      "source": src, "sites": unit_sites})
    kernels = {t: {"signatures": [[[list(shape), list(stride), dtype] for shape, stride, dtype in sig]
                                  for sig in ck.signatures],
                   "node_id": ck.node_id, "pinned": ck.pinned, "speedup": ck.speedup} for t, ck in chosen.items()}
    return {"format": PLAN_FORMAT, "device": device, "units": units, "sites": sites, "kernels": kernels}


# -- checking the patched model ------------------------------------------------------------------


def _flatten(x) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _flatten(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _flatten(v)]
    return []


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(abs/rel tolerance, relative L2 bound) for a whole model's output of ``dtype``; looser than
    one op's, because differences in rounding compound through the layers."""
    if dtype in (torch.float16, torch.bfloat16):
        return 3e-2, 1e-2
    return 1e-3, 1e-4


def compare(ref, got, label: str) -> ModelCheck:
    a, b = _flatten(ref), _flatten(got)
    if len(a) != len(b):
        return ModelCheck(label, False, float("inf"), float("inf"))
    ok, max_abs, worst_l2 = True, 0.0, 0.0
    for r, g in zip(a, b, strict=True):
        if r.shape != g.shape or r.dtype != g.dtype:
            return ModelCheck(label, False, float("inf"), float("inf"))
        if not r.is_floating_point():
            same = bool(torch.equal(r, g))
            ok &= same
            max_abs = max(max_abs, 0.0 if same else float("inf"))
            continue
        rf, gf = r.double(), g.double()
        if not bool(torch.isfinite(gf).all()) and bool(torch.isfinite(rf).all()):
            return ModelCheck(label, False, float("inf"), float("inf"))
        err = (rf - gf).abs()
        m = float(err.max()) if err.numel() else 0.0
        l2 = float(torch.linalg.vector_norm(rf - gf) / max(float(torch.linalg.vector_norm(rf)), 1e-30))
        tol, l2_bound = tolerance(r.dtype)
        scale = float(rf.abs().max()) if rf.numel() else 0.0
        ok &= m <= tol * (1.0 + scale) and l2 <= l2_bound
        max_abs, worst_l2 = max(max_abs, m), max(worst_l2, l2)
    return ModelCheck(label, ok, max_abs, worst_l2)


def check_model(model: torch.nn.Module, handle: PatchHandle, input_sets: list[tuple[str, list]]) -> list[ModelCheck]:
    """Patched vs original on each named input set (the original runs with the patch disabled)."""
    checks = []
    with torch.no_grad():
        for label, inputs in input_sets:
            with handle.disabled():
                ref = model(*inputs)
            try:
                got = model(*inputs)
            except Exception as err:  # e.g. a kernel whose output layout breaks a later .view()
                checks.append(ModelCheck(f"{label} (the patched model raised {type(err).__name__})", False,
                                         float("inf"), float("inf")))
                continue
            checks.append(compare(ref, got, label))
    return checks


def integrate(model: torch.nn.Module, analysis: Analysis, chosen: dict[str, ChosenKernel], example_inputs: list,
              make_inputs=None, device: str = "cpu", fresh_sets: int = 2) -> Integration:
    """Load the chosen kernels, patch ``model`` in place, check it; drop kernels that break it."""
    dropped: dict[str, str] = {}
    kernels = {}
    for tname, ck in chosen.items():
        try:
            kernels[tname] = load_kernel(ck.source, tname)
        except Exception as err:  # the kernel was verified elsewhere; here it may not build
            dropped[tname] = f"its kernel did not load here ({type(err).__name__}: {err})"
    plan = build_plan(analysis, {t: ck for t, ck in chosen.items() if t in kernels}, device)
    handle = apply_plan(model, plan, kernels, check_fingerprints=False)
    input_sets = [("example inputs", list(example_inputs))]
    if make_inputs is not None:
        for i in range(fresh_sets):
            torch.manual_seed(1000 + i)
            input_sets.append((f"fresh random inputs #{i + 1}", make_inputs()))
    checks = check_model(model, handle, input_sets)
    if not all(c.ok for c in checks):
        for tname in list(kernels):
            handle.set_enabled({tname})
            alone = check_model(model, handle, input_sets)
            if not all(c.ok for c in alone):
                worst = max(alone, key=lambda c: c.rel_l2_err)
                dropped[tname] = (f"the patched model differed from the original on {worst.label} "
                                  f"(max abs error {worst.max_abs_err:.3g}, relative L2 {worst.rel_l2_err:.3g})")
        keep = {t for t in kernels if t not in dropped}
        handle.set_enabled(keep)
        checks = check_model(model, handle, input_sets)
    handle.reset_stats()
    kept = [t for t in kernels if t not in dropped]
    return Integration(handle=handle, plan=plan, kept=kept, dropped=dropped, checks=checks)
