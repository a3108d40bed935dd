"""Profile a model: which groups of ops (targets) take its time, how far each is from its floor,
and what real inputs each one sees.

How: every traced unit (see ``graph``) runs through an ``fx.Interpreter`` that times each node
(``perf_counter``; CUDA synchronized around the node) and, for the nodes of a region, keeps the
region's real inputs. The first run names each node's family from its real output; the next runs
time them (each op's time is its fastest run: a busy machine only makes runs slower) and capture,
per distinct shape/dtype/stride variant of a target, a few real input sets.
The model's own eager time is measured without instrumentation. Everything runs in ``eval()`` and
under ``torch.no_grad()``.

``profile_model`` returns a ``Profiled``: the frozen ``ModelProfile`` (plain data for the CLI, the
GUI's Targets dock and JSON) plus the ``Analysis`` that problems and integration need (the traced
units, the regions, the captured tensors).
"""

from __future__ import annotations

import contextlib
import hashlib
import statistics
import time
import types
from collections import defaultdict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
import torch.fx as fx
import torch.nn as nn

from . import ops as opsmod
from .extract import Cut, cut, is_const
from .graph import Unit, module_path, trace_units
from .regions import Region, find_regions
from .roofline import DeviceRates, device_rates

# -- the plain data the profile is made of ----------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One distinct input signature of a target, with its measurements (per call unless noted)."""

    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    strides: tuple[tuple[int, ...], ...]
    calls: int  # calls per forward
    time_ms: float  # per forward: all calls of this variant, inside the model
    bytes_moved: int
    flops: float
    floor_ms: float  # per call
    eager_iso_ms: float | None = None  # per call, the target alone on captured inputs, eager
    compile_ms: float | None = None  # per call, the target alone under torch.compile

    @property
    def signature(self) -> tuple:
        return tuple(zip(self.shapes, self.strides, self.dtypes, strict=True))


@dataclass(frozen=True)
class Target:
    """One thing a kernel could replace: an op or a fusible chain, merged over every place in the
    model that computes the same thing (same code after baking constants)."""

    name: str  # t01_rms_norm
    kind: str  # rms_norm | softmax | attention | norm | activation | swiglu | elementwise | linear | conv | pool | …
    op: str  # a label: "rms_norm (pow, mean, add, rsqrt, mul, mul)"
    ops: tuple[str, ...]
    module_paths: tuple[str, ...]
    arg_names: tuple[str, ...]
    param_args: tuple[bool, ...]  # True where the input is a model parameter or buffer
    variants: tuple[Variant, ...]
    calls: int  # per forward
    time_ms: float  # per forward, inside the model
    share: float  # of the time spent in the model's ops
    floor_ms: float  # per forward
    compile_ms: float | None  # per forward, torch.compile of the target alone (None: not measured)
    eager_iso_ms: float | None  # per forward, the target alone, eager (compare with compile_ms)
    optimizable: bool
    note: str
    key: str  # digest of the reference code
    code: str  # the reference: ``def forward(self, …)``

    @property
    def module_path(self) -> str:
        return self.module_paths[0] if self.module_paths else ""

    @property
    def main(self) -> Variant:
        return max(self.variants, key=lambda v: v.time_ms)

    @property
    def shapes(self) -> tuple[tuple[int, ...], ...]:
        return self.main.shapes

    @property
    def dtypes(self) -> tuple[str, ...]:
        return self.main.dtypes

    @property
    def strides(self) -> tuple[tuple[int, ...], ...]:
        return self.main.strides

    @property
    def headroom_floor(self) -> float | None:
        """Time over floor: 1.0 is at the floor, 4.0 could in principle be 4x faster."""
        return self.time_ms / self.floor_ms if self.floor_ms > 0 else None

    @property
    def headroom_compile(self) -> float | None:
        """Eager over torch.compile, both measured alone: above 1, compile already wins that much."""
        if self.compile_ms and self.eager_iso_ms:
            return self.eager_iso_ms / self.compile_ms
        return None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["headroom_floor"] = self.headroom_floor
        d["headroom_compile"] = self.headroom_compile
        return d


@dataclass(frozen=True)
class ModelProfile:
    model: str
    device: str
    eager_ms: float  # the whole forward, uninstrumented (median)
    op_ms: float  # time inside the model's ops per forward (what shares are of)
    other_ms: float  # op time outside every target (views, copies, unknown modules)
    untraced: tuple[str, ...]  # modules whose own code could not be traced
    targets: tuple[Target, ...]
    rates: DeviceRates
    runs: int

    def target(self, name: str) -> Target:
        for t in self.targets:
            if t.name == name:
                return t
        raise KeyError(name)

    def to_dict(self) -> dict:
        return {
            "model": self.model, "device": self.device, "eager_ms": self.eager_ms, "op_ms": self.op_ms,
            "other_ms": self.other_ms, "untraced": list(self.untraced), "runs": self.runs,
            "rates": self.rates.to_dict(), "targets": [t.to_dict() for t in self.targets],
        }


# -- what problems and integration need besides the data --------------------------------------------


@dataclass
class Instance:
    """One region of one unit that computes a target, with the constants baked into it."""

    unit: Unit
    region: Region
    consts: dict[str, object]


@dataclass
class Capture:
    """Real inputs seen by a target, per variant signature (a few sets each) and one output."""

    inputs: dict[tuple, list[list[torch.Tensor]]] = field(default_factory=dict)
    outputs: dict[tuple, torch.Tensor] = field(default_factory=dict)


@dataclass
class Analysis:
    units: list[Unit]
    regions: dict[str, list[Region]]  # unit path -> regions
    instances: dict[str, list[Instance]]  # target name -> where it is computed
    captures: dict[str, Capture]  # target name -> captured inputs
    cuts: dict[str, Cut]  # target name -> reference (baked)


@dataclass
class Profiled:
    profile: ModelProfile
    analysis: Analysis


# -- instrumentation ------------------------------------------------------------------------------


def _sig(t: torch.Tensor) -> tuple:
    return (tuple(t.shape), tuple(t.stride()), str(t.dtype).replace("torch.", ""))


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _clone(t: torch.Tensor) -> torch.Tensor:
    """A detached copy with the same strides (so a replay sees the layout the model produced)."""
    t = t.detach()
    if t.is_contiguous():
        return t.clone()
    out = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


@dataclass
class _RegionCall:
    time: float = 0.0
    flops: float = 0.0
    inputs: dict = field(default_factory=dict)


class _UnitState:
    """Per-unit bookkeeping shared by the interpreters of successive calls."""

    def __init__(self, unit: Unit) -> None:
        self.unit = unit
        self.fam: dict[str, str] = {}
        self.regions: list[Region] = []
        self.node_region: dict[str, int] = {}
        self.reads: dict[str, list[fx.Node]] = {}  # node -> external inputs of its region that it reads
        self.sinks: dict[str, int] = {}
        self.open: dict[int, _RegionCall] = {}

    def set_regions(self, regions: list[Region]) -> None:
        self.regions = regions
        by_name = {n.name: n for n in self.unit.gm.graph.nodes}
        for r in regions:
            ext = set(r.inputs)
            for name in r.nodes:
                self.node_region[name] = r.index
                self.reads[name] = [a for a in by_name[name].all_input_nodes if a.name in ext]
            self.sinks[r.sink] = r.index


class _Session:
    """One profiling session: mode switches between the naming run and the timing runs."""

    def __init__(self, device: str, captures_per_variant: int) -> None:
        self.sync = device.startswith("cuda")
        self.mode = "meta"
        self.k = captures_per_variant
        self.node_time: dict[tuple[str, str], float] = defaultdict(float)  # this run
        # (unit path, region index, variant key) -> list per run of [time, calls]
        self.region_time: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0])
        self.variant_info: dict[tuple, dict] = {}
        self.captured: dict[tuple, list[list]] = defaultdict(list)
        self.captured_out: dict[tuple, torch.Tensor] = {}
        self.capture = False


class _Recorder(fx.Interpreter):
    def __init__(self, state: _UnitState, session: _Session) -> None:
        super().__init__(state.unit.gm, garbage_collect_values=True)
        self.state = state
        self.session = session

    def run_node(self, n: fx.Node):
        s, st = self.session, self.state
        with self._set_current_node(n):
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            if s.sync:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            result = getattr(self, n.op)(n.target, args, kwargs)
            if s.sync:
                torch.cuda.synchronize()
            dt = time.perf_counter() - t0
        if n.op in ("placeholder", "output", "get_attr"):
            return result
        if s.mode == "meta":
            st.fam[n.name] = opsmod.family(n, result, st.unit.gm)
            return result
        s.node_time[(st.unit.path, n.name)] += dt
        ri = st.node_region.get(n.name)
        if ri is None:
            return result
        call = st.open.setdefault(ri, _RegionCall())
        call.time += dt
        call.flops += opsmod.flops(n, st.fam.get(n.name, "other"), list(args), result)
        for a in st.reads.get(n.name, ()):
            call.inputs[a.name] = self.env[a]
        if st.sinks.get(n.name) == ri:
            self._finish(ri, st.open.pop(ri), result)
        return result

    def _finish(self, ri: int, call: _RegionCall, result) -> None:
        s, st = self.session, self.state
        region = st.regions[ri]
        values = [call.inputs.get(name) for name in region.inputs]
        key_parts = []
        for v in values:
            if isinstance(v, torch.Tensor):
                key_parts.append(("t",) + _sig(v))
            elif is_const(v):
                key_parts.append(("c", repr(v)))
            else:
                key_parts.append(("x", type(v).__name__))
        key = (st.unit.path, ri, tuple(key_parts))
        acc = s.region_time[key]
        acc[0] += call.time
        acc[1] += 1
        if key not in s.variant_info:
            tensors = [v for v in values if isinstance(v, torch.Tensor)]
            seen, nbytes = set(), 0
            for t in tensors + ([result] if isinstance(result, torch.Tensor) else []):
                ident = (t.data_ptr(), t.numel(), t.dtype)
                if ident not in seen:
                    seen.add(ident)
                    nbytes += _nbytes(t)
            s.variant_info[key] = {
                "consts": {name: v for name, v in zip(region.inputs, values, strict=True)
                           if not isinstance(v, torch.Tensor) and is_const(v)},
                "unsupported": [type(v).__name__ for v in values if not isinstance(v, torch.Tensor) and not is_const(v)],
                "flops": call.flops, "bytes": nbytes,
                "out_dtype": str(result.dtype).replace("torch.", "") if isinstance(result, torch.Tensor) else "float32",
            }
        if s.capture and len(s.captured[key]) < s.k:
            s.captured[key].append([_clone(v) if isinstance(v, torch.Tensor) else v for v in values])
            if isinstance(result, torch.Tensor) and key not in s.captured_out:
                s.captured_out[key] = _clone(result)


@contextlib.contextmanager
def _instrumented(states: list[_UnitState], session: _Session):
    """Route each unit module's forward through a recorder (instance attribute, removed after)."""
    patched = []
    for st in states:
        module = st.unit.module
        sig = st.unit.signature

        def forward(self, *args, _st=st, _sig=sig, **kwargs):
            bound = _sig.bind(*args, **kwargs)
            bound.apply_defaults()
            return _Recorder(_st, session).run(*bound.arguments.values())

        had = "forward" in module.__dict__
        old = module.__dict__.get("forward")
        module.forward = types.MethodType(forward, module)
        patched.append((module, had, old))
    try:
        yield
    finally:
        for module, had, old in patched:
            if had:
                module.forward = old
            else:
                del module.forward


def _median_ms(fn, runs: int, sync: bool) -> float:
    times = []
    for _ in range(runs):
        if sync:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if sync:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


# -- the profile ------------------------------------------------------------------------------------


def _common_path(paths: list[str]) -> str:
    parts = [p.split(".") for p in paths if p]
    if not parts:
        return ""
    common = []
    for level in zip(*parts, strict=False):
        if all(x == level[0] for x in level):
            common.append(level[0])
        else:
            break
    return ".".join(common) if common else ".".join(parts[-1])


def _raised(rates: DeviceRates, groups: dict) -> DeviceRates:
    """The rates a floor may assume: the probe's, or what an op of this very model reached if that is
    more (a probe on a busy machine can read low; an op that ran faster proves the device can)."""
    bandwidth = dict(rates.bandwidth)
    flop_rates = dict(rates.flop_rates)
    for g in groups.values():
        for v in g["variants"].values():
            if v["calls"] <= 0 or v["time"] <= 0:
                continue
            per_call = v["time"] / v["calls"]
            info = v["info"]
            for size in bandwidth:
                if info["bytes"] <= size:
                    bandwidth[size] = max(bandwidth[size], info["bytes"] / per_call)
                    break
            dtype = info["out_dtype"] if info["out_dtype"] in flop_rates else "float32"
            flop_rates[dtype] = max(flop_rates[dtype], info["flops"] / per_call)
    return replace(rates, bandwidth=tuple(sorted(bandwidth.items())), flop_rates=tuple(flop_rates.items()))


def _slug(kind: str, ops: tuple[str, ...]) -> str:
    """A short name part: the kind where it says it all, else the distinct ops joined."""
    if kind in ("rms_norm", "layer_norm", "attention", "swiglu", "geglu") or not ops:
        return kind
    distinct = list(dict.fromkeys(o.lower() for o in ops))
    return "_".join(distinct)[:40]


def _label(kind: str, ops: tuple[str, ...]) -> str:
    if len(ops) == 1:
        return ops[0]
    return f"{kind} ({', '.join(ops)})"


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
) -> Profiled:
    """Profile ``model`` on ``inputs`` (see module doc). ``compare_compile`` also times each
    target alone under torch.compile (slow on a small CPU: one compile per target variant)."""
    say = progress or (lambda msg: None)
    model.eval()
    sync = device.startswith("cuda")
    rates = rates or device_rates(device)
    units, untraced = trace_units(model)
    states = [_UnitState(u) for u in units]
    session = _Session(device, captures_per_variant)

    with torch.no_grad():
        say("timing the model")
        for _ in range(warmup):
            model(*inputs)
        eager_ms = _median_ms(lambda: model(*inputs), max(runs, 3), sync)

        say("tracing")
        with _instrumented(states, session):
            model(*inputs)  # the naming run
            for st in states:
                st.set_regions(find_regions(st.unit.gm, st.fam))
            session.mode = "time"
            model(*inputs)  # warm-up of the instrumented path
            session.node_time.clear()
            session.region_time.clear()
            per_run_nodes, per_run_regions = [], []
            say("timing each op")
            for r in range(runs):
                session.capture = r == 0
                model(*inputs)
                per_run_nodes.append(dict(session.node_time))
                per_run_regions.append({k: tuple(v) for k, v in session.region_time.items()})
                session.node_time.clear()
                session.region_time.clear()

    def med(dicts: list[dict], key, idx=None) -> float:
        """The fastest run: other work on the machine only ever makes a run slower."""
        vals = [(d[key][idx] if idx is not None else d[key]) if key in d else 0.0 for d in dicts]
        return min(vals)

    region_keys = set().union(*per_run_regions) if per_run_regions else set()
    in_regions = 1e3 * sum(med(per_run_regions, k, 0) for k in region_keys)
    state_of = {st.unit.path: st for st in states}
    all_nodes = set().union(*per_run_nodes) if per_run_nodes else set()
    outside = [k for k in all_nodes if k[1] not in state_of[k[0]].node_region]
    other_ms = 1e3 * sum(med(per_run_nodes, k) for k in outside)
    op_ms = in_regions + other_ms  # shares are of this: targets plus everything outside them

    # group region variants into targets by their baked reference code
    groups: dict[str, dict] = {}
    for key in sorted(region_keys, key=lambda k: (k[0], k[1])):
        unit_path, ri, _ = key
        st = state_of[unit_path]
        region = st.regions[ri]
        info = session.variant_info[key]
        c = cut(st.unit.gm, region, info["consts"])
        digest = hashlib.sha256(c.code.encode()).hexdigest()[:12]
        g = groups.setdefault(digest, {"cut": c, "region": region, "instances": {}, "variants": {}, "paths": [],
                                       "unsupported": set()})
        g["instances"].setdefault((unit_path, ri), Instance(st.unit, region, info["consts"]))
        paths = [st.unit.qualify(module_path(n)) for n in st.unit.gm.graph.nodes if n.name in region.nodes
                 and st.fam.get(n.name) != "free"]
        path = _common_path(paths) or st.unit.qualify("")
        if path not in g["paths"]:
            g["paths"].append(path)
        g["unsupported"] |= set(info["unsupported"])
        tensor_sig = tuple(p[1:] for p in key[2] if p[0] == "t")
        v = g["variants"].setdefault(tensor_sig, {"time": 0.0, "calls": 0.0, "info": info, "keys": []})
        v["time"] += med(per_run_regions, key, 0)
        v["calls"] += med(per_run_regions, key, 1)
        v["keys"].append(key)

    rates = _raised(rates, groups)
    targets_raw = []
    for digest, g in groups.items():
        region = g["region"]
        any_inst = next(iter(g["instances"].values()))
        by_name = {n.name: n for n in any_inst.unit.gm.graph.nodes}
        param_args = tuple(by_name[i].op == "get_attr" for i in region.inputs if i not in any_inst.consts)
        variants = []
        for tensor_sig, v in g["variants"].items():
            info = v["info"]
            floor = rates.floor_ms(info["bytes"], info["flops"], info["out_dtype"])
            variants.append(Variant(
                shapes=tuple(s[0] for s in tensor_sig), strides=tuple(s[1] for s in tensor_sig),
                dtypes=tuple(s[2] for s in tensor_sig), calls=int(round(v["calls"])), time_ms=1e3 * v["time"],
                bytes_moved=int(info["bytes"]), flops=float(info["flops"]), floor_ms=floor))
        time_ms = sum(v.time_ms for v in variants)
        note, optimizable = "", True
        if g["unsupported"]:
            optimizable, note = False, f"takes inputs that are not tensors or numbers ({', '.join(sorted(g['unsupported']))})"
        targets_raw.append((time_ms, digest, g, region, param_args, variants, optimizable, note))
    targets_raw.sort(key=lambda t: -t[0])

    targets, analysis_instances, captures, cuts = [], {}, {}, {}
    for rank, (time_ms, digest, g, region, param_args, variants, optimizable, note) in enumerate(targets_raw, 1):
        tname = f"t{rank:02d}_{_slug(region.kind, region.ops)}"
        capture = Capture()
        for tensor_sig, v in g["variants"].items():
            sets = []
            for k in v["keys"]:
                for values in session.captured.get(k, []):
                    if len(sets) < captures_per_variant:
                        sets.append([x for x in values if isinstance(x, torch.Tensor)])
                if k in session.captured_out and tensor_sig not in capture.outputs:
                    capture.outputs[tensor_sig] = session.captured_out[k]
            capture.inputs[tensor_sig] = sets
        calls = sum(v.calls for v in variants)
        targets.append(Target(
            name=tname, kind=region.kind, op=_label(region.kind, region.ops), ops=region.ops,
            module_paths=tuple(g["paths"]), arg_names=g["cut"].arg_names, param_args=param_args,
            variants=tuple(variants), calls=calls, time_ms=time_ms,
            share=time_ms / op_ms if op_ms > 0 else 0.0,
            floor_ms=sum(v.floor_ms * v.calls for v in variants), compile_ms=None, eager_iso_ms=None,
            optimizable=optimizable, note=note, key=digest, code=g["cut"].code))
        analysis_instances[tname] = list(g["instances"].values())
        captures[tname] = capture
        cuts[tname] = g["cut"]

    if compare_compile:
        targets = [_with_compile(t, cuts[t.name], captures[t.name], device, say) for t in targets]

    profile = ModelProfile(model=name, device=device, eager_ms=eager_ms, op_ms=op_ms,
                           other_ms=other_ms, untraced=tuple(untraced),
                           targets=tuple(targets), rates=rates, runs=runs)
    analysis = Analysis(units=units, regions={st.unit.path: st.regions for st in states},
                        instances=analysis_instances, captures=captures, cuts=cuts)
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
                    e.append(_median_ms(lambda a=args: c.gm(*a), 1, sync))
                    k.append(_median_ms(lambda f=compiled, a=args: f(*a), 1, sync))
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
