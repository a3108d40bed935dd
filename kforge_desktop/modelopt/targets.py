"""What a profile is made of, how measured regions become targets, and where the forward's time went.

Targets: regions with the same code after baking their Python numbers (``extract.cut``) are one
``Target``, merged over every module path that computes it; each distinct (shape, stride, dtype)
input signature is a ``Variant``. Every time is a fastest run: other work on the machine only ever
makes a run slower.

Accounting: the eager forward (uninstrumented, fastest run) is split into the time of the targets,
the time of the traced ops outside every target, and the rest — the time no traced op accounts for
(code that runs untraced, Python and framework overhead between ops, a GPU waiting for launches).
The rest is measured as the forward less the traced ops; where the ops timed one by one add up to
more than the forward (timing an op alone costs it a little: caches, the clock itself), it is
unknown and said so, never shown as zero. The own code of each untraced module is also timed
directly.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field, replace

import torch

from .extract import Cut, cut
from .graph import Unit, module_path
from .instrument import Session, UnitState
from .regions import Region
from .roofline import DeviceRates

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
    eager_ms: float  # the whole forward, uninstrumented (fastest run)
    op_ms: float  # time inside the model's traced ops per forward (what shares are of)
    other_ms: float  # traced op time outside every target (views, copies, opaque modules)
    untraced: tuple[str, ...]  # modules whose own code could not be captured (it runs as is)
    targets: tuple[Target, ...]
    rates: DeviceRates
    runs: int
    # eager_ms - op_ms: time no traced op accounts for (untraced code, Python and framework
    # overhead); None where the ops timed one by one add up to more than the forward (unknown)
    unattributed_ms: float | None = None
    untraced_ms: float | None = None  # measured own time of the untraced modules (None: there are none)
    exported: tuple[str, ...] = ()  # modules captured through torch.export (fx could not trace them)
    untraced_why: tuple[tuple[str, str], ...] = ()  # (module path, why no capture worked)

    @property
    def targets_ms(self) -> float:
        return sum(t.time_ms for t in self.targets)

    @property
    def outside_ms(self) -> float | None:
        """The forward's time outside every target: traced ops outside them plus the unattributed
        rest; None where the rest is unknown."""
        return None if self.unattributed_ms is None else self.other_ms + self.unattributed_ms

    def target(self, name: str) -> Target:
        for t in self.targets:
            if t.name == name:
                return t
        raise KeyError(name)

    def to_dict(self) -> dict:
        return {
            "model": self.model, "device": self.device, "eager_ms": self.eager_ms, "op_ms": self.op_ms,
            "other_ms": self.other_ms, "unattributed_ms": self.unattributed_ms, "untraced_ms": self.untraced_ms,
            "outside_ms": self.outside_ms, "untraced": list(self.untraced),
            "untraced_why": dict(self.untraced_why), "exported": list(self.exported), "runs": self.runs,
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


# -- accounting -------------------------------------------------------------------------------------


@dataclass
class Runs:
    """What the timed runs measured, one dict per run (seconds), and the eager forwards (ms)."""

    nodes: list[dict] = field(default_factory=list)  # (unit path, node name) -> time
    regions: list[dict] = field(default_factory=list)  # region key -> (time, calls)
    untraced: list[dict] = field(default_factory=list)  # untraced module path -> its own code's time
    eager_ms: list[float] = field(default_factory=list)


def fastest(dicts: list[dict], key, idx: int | None = None) -> float:
    """The fastest run: other work on the machine only ever makes a run slower."""
    vals = [(d[key][idx] if idx is not None else d[key]) if key in d else 0.0 for d in dicts]
    return min(vals) if vals else 0.0


@dataclass(frozen=True)
class Accounting:
    eager_ms: float
    op_ms: float
    other_ms: float
    unattributed_ms: float | None
    untraced_ms: float | None


def account(states: list[UnitState], runs: Runs, has_untraced: bool) -> Accounting:
    """Split the forward's time (see module doc)."""
    state_of = {st.unit.path: st for st in states}
    region_keys = set().union(*runs.regions) if runs.regions else set()
    in_regions = 1e3 * sum(fastest(runs.regions, k, 0) for k in region_keys)
    all_nodes = set().union(*runs.nodes) if runs.nodes else set()
    outside = [k for k in all_nodes if k[1] not in state_of[k[0]].node_region]
    other_ms = 1e3 * sum(fastest(runs.nodes, k) for k in outside)
    op_ms = in_regions + other_ms  # shares are of this: targets plus every traced op outside them
    eager_ms = min(runs.eager_ms)
    rest = eager_ms - op_ms
    untraced_ms = None
    if has_untraced:
        paths = set().union(*runs.untraced) if runs.untraced else set()
        untraced_ms = 1e3 * sum(fastest(runs.untraced, p) for p in paths)
    return Accounting(eager_ms=eager_ms, op_ms=op_ms, other_ms=other_ms,
                      unattributed_ms=rest if rest > 0 else None, untraced_ms=untraced_ms)


# -- regions to targets -----------------------------------------------------------------------------


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
    if kind == "softmax" and {"masked_fill", "where"} & set(ops):
        return "masked_softmax"  # an attention's softmax, with its mask (and scale) inside
    distinct = list(dict.fromkeys(o.lower() for o in ops))
    return "_".join(distinct)[:40]


def _label(kind: str, ops: tuple[str, ...]) -> str:
    if len(ops) == 1:
        return ops[0]
    return f"{kind} ({', '.join(ops)})"


@dataclass
class Built:
    targets: list[Target]
    instances: dict[str, list[Instance]]
    captures: dict[str, Capture]
    cuts: dict[str, Cut]
    rates: DeviceRates


def build_targets(states: list[UnitState], session: Session, runs: Runs, rates: DeviceRates,
                  captures_per_variant: int, op_ms: float) -> Built:
    """Group the measured region variants into targets by their baked reference code, ranked by time."""
    state_of = {st.unit.path: st for st in states}
    region_keys = set().union(*runs.regions) if runs.regions else set()
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
        v["time"] += fastest(runs.regions, key, 0)
        v["calls"] += fastest(runs.regions, key, 1)
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

    built = Built(targets=[], instances={}, captures={}, cuts={}, rates=rates)
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
        built.targets.append(Target(
            name=tname, kind=region.kind, op=_label(region.kind, region.ops), ops=region.ops,
            module_paths=tuple(g["paths"]), arg_names=g["cut"].arg_names, param_args=param_args,
            variants=tuple(variants), calls=calls, time_ms=time_ms,
            share=time_ms / op_ms if op_ms > 0 else 0.0,
            floor_ms=sum(v.floor_ms * v.calls for v in variants), compile_ms=None, eager_iso_ms=None,
            optimizable=optimizable, note=note, key=digest, code=g["cut"].code))
        built.instances[tname] = list(g["instances"].values())
        built.captures[tname] = capture
        built.cuts[tname] = g["cut"]
    return built
