"""Profile a model: which groups of ops (targets) take its time, how far each is from its floor,
what real inputs each one sees, and where the rest of the forward's time went.

One job per module: ``graph`` captures each module's code as a unit graph (fx, else torch.export,
else it runs as is), ``instrument`` times the units op by op and captures region inputs,
``regions`` groups a unit's nodes, ``targets`` turns measured regions into targets and accounts for
the forward's time. This module runs them in order: capture of the code, one naming run (each
node's family from its real output), one capture run (per distinct shape/dtype/stride variant of a
target, a few real input sets), a warm-up, then rounds of the model's own eager forward
(uninstrumented) interleaved with timed runs, so that the forward and the ops it is compared with are
measured under the same load. Everything runs in ``eval()`` and under ``torch.no_grad()``.

``profile_model`` returns a ``Profiled``: the frozen ``ModelProfile`` (plain data for the CLI, the
GUI's Targets dock and JSON) plus the ``Analysis`` that problems and integration need (the traced
units, the regions, the captured tensors).
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn as nn

from .extract import Cut
from .graph import trace_units
from .instrument import Session, UnitState, instrumented, median_ms, run_times_ms
from .regions import find_regions
from .roofline import DeviceRates, device_rates
from .targets import (
    Analysis,
    Capture,
    Instance,
    ModelProfile,
    Profiled,
    Runs,
    Target,
    Variant,
    account,
    build_targets,
)

# the profile's types: the rest of modelopt (and the GUI, tests) import them from here
__all__ = ["Analysis", "Capture", "Instance", "ModelProfile", "Profiled", "Target", "Variant", "profile_file",
           "profile_model", "rename_targets"]


def profile_model(
    model: nn.Module,
    inputs: list | tuple,
    device: str = "cpu",
    *,
    name: str = "model",
    runs: int = 5,
    warmup: int = 2,
    captures_per_variant: int = 2,
    compare_compile: bool = False,
    rates: DeviceRates | None = None,
    progress=None,
    masked_attention: bool | None = None,
) -> Profiled:
    """Profile ``model`` on ``inputs`` (see module doc). ``compare_compile`` also times each
    target alone under torch.compile (slow on a small CPU: one compile per target variant).
    ``masked_attention``: an attention with its mask built in ``forward`` is one target (default:
    on a GPU; ``regions.find_regions``)."""
    say = progress or (lambda msg: None)
    model.eval()
    sync = device.startswith("cuda")
    rates = rates or device_rates(device)
    say("capturing the model's code")
    tracing = trace_units(model, inputs)
    units = tracing.units
    untraced = {p: (model if p == "(model)" else model.get_submodule(p)) for p in tracing.untraced}
    elsewhere = frozenset(id(u.module) for u in units) | frozenset(id(m) for m in untraced.values())
    states = [UnitState(u, elsewhere) for u in units]
    session = Session(device, captures_per_variant)
    measured = Runs()

    with torch.no_grad():
        say("running the model")
        for _ in range(warmup):
            model(*inputs)
        with instrumented(states, session, untraced):
            model(*inputs)  # the naming run
            for st in states:
                st.set_regions(find_regions(st.unit.gm, st.fam, sync if masked_attention is None else masked_attention))
            session.start_capture(states)
            model(*inputs)  # inputs, bytes and FLOPs of each region variant
            session.start_timing(states)
            model(*inputs)  # warm-up of the timed path
            session.clear_run(states)
        say("timing the model and each op")
        eager_per_round = max(2, -(-10 // runs))
        for _ in range(runs):  # interleaved: a busy spell of the machine slows both alike
            measured.eager_ms += run_times_ms(lambda: model(*inputs), eager_per_round, sync)
            with instrumented(states, session, untraced):
                model(*inputs)
            session.collect(states)
            measured.nodes.append(dict(session.node_time))
            measured.regions.append({k: tuple(v) for k, v in session.region_time.items()})
            measured.untraced.append(dict(session.untraced_time))
            session.clear_run(states)

    acc = account(states, measured, has_untraced=bool(untraced))
    built = build_targets(states, session, measured, rates, captures_per_variant, acc.op_ms)
    targets = built.targets
    if compare_compile:
        targets = [_with_compile(t, built.cuts[t.name], built.captures[t.name], device, say) for t in targets]

    profile = ModelProfile(model=name, device=device, eager_ms=acc.eager_ms, op_ms=acc.op_ms,
                           other_ms=acc.other_ms, untraced=tuple(tracing.untraced),
                           targets=tuple(targets), rates=built.rates, runs=runs,
                           unattributed_ms=acc.unattributed_ms, untraced_ms=acc.untraced_ms,
                           exported=tuple(u.qualify("") for u in units if u.capture == "torch.export"),
                           untraced_why=tuple(tracing.why.items()))
    analysis = Analysis(units=units, regions={st.unit.path: st.regions for st in states},
                        instances=built.instances, captures=built.captures, cuts=built.cuts)
    return Profiled(profile=profile, analysis=analysis)


def _with_compile(t: Target, c: Cut, capture: Capture, device: str, say) -> Target:
    """Time the target alone, eager and under torch.compile, interleaved, per variant."""
    if not t.optimizable:
        return t
    say(f"torch.compile of {t.name}")
    sync = device.startswith("cuda")
    new_variants = []
    eager_total = compile_total = 0.0
    ok = True
    for v in t.variants:
        sets = capture.inputs.get(tuple(zip(v.shapes, v.strides, v.dtypes, strict=True)))
        if not sets:
            new_variants.append(v)
            ok = False
            continue
        args = sets[0]
        try:
            import torch._dynamo

            torch._dynamo.reset()
            compiled = torch.compile(c.gm, dynamic=False)
            with torch.no_grad():
                compiled(*args)
                compiled(*args)
                e, k = [], []
                for _ in range(15):
                    e.append(median_ms(lambda a=args: c.gm(*a), 1, sync))
                    k.append(median_ms(lambda f=compiled, a=args: f(*a), 1, sync))
        except Exception:
            new_variants.append(v)
            ok = False
            continue
        ev, kv = statistics.median(e), statistics.median(k)
        eager_total += ev * v.calls
        compile_total += kv * v.calls
        new_variants.append(replace(v, eager_iso_ms=ev, compile_ms=kv))
    return replace(t, variants=tuple(new_variants), compile_ms=compile_total if ok else None,
                   eager_iso_ms=eager_total if ok else None)


def profile_file(path: str | Path, device: str = "cpu", *, compare_compile: bool = False, runs: int = 5,
                 progress=None) -> ModelProfile:
    """Load a model file and profile it: the function the GUI's Targets dock calls."""
    from .loader import load_model_file

    mf = load_model_file(path, device)
    return profile_model(mf.model, list(mf.inputs), device, name=mf.name, runs=runs,
                         compare_compile=compare_compile, progress=progress).profile


def rename_targets(profiled: Profiled, names_by_key: dict[str, str]) -> Profiled:
    """The same profile with targets renamed by reference code (``key -> name``): a session's
    targets keep the names they were given when the session was made, whatever the ranking now."""
    mapping: dict[str, str] = {}
    taken = set(names_by_key.values())
    for t in profiled.profile.targets:
        new = names_by_key.get(t.key)
        if new is None:
            new = t.name
            while new in taken:
                new += "_x"
        taken.add(new)
        mapping[t.name] = new
    a = profiled.analysis
    analysis = Analysis(units=a.units, regions=a.regions,
                        instances={mapping[k]: v for k, v in a.instances.items()},
                        captures={mapping[k]: v for k, v in a.captures.items()},
                        cuts={mapping[k]: v for k, v in a.cuts.items()})
    profile = replace(profiled.profile, targets=tuple(replace(t, name=mapping[t.name]) for t in profiled.profile.targets))
    return Profiled(profile=profile, analysis=analysis)
