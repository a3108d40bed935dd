"""Time a model's captured units op by op, and the code around them that runs as is.

Every unit module's forward is routed (an instance attribute, removed after) through its graph, in
one of three modes. ``meta``: an ``fx.Interpreter`` names each node's family from its real output.
``capture``: the interpreter keeps, per distinct shape/dtype/stride variant of a region, a few real
input sets, its bytes and FLOPs, and which variant each region was on each call of the unit.
``time``: a copy of the unit's graph with a clock read before and a lap after each op runs as
generated Python code. The interpreter's own bookkeeping between ops would leave each op to start on
cold caches — up to twice as slow as in the model for small ops on a CPU — so the timed runs keep
only the two clock calls around each op. On CUDA the clock is an event on the stream, read once the
run is over: an op's time is the GPU's time between its two events, without the latency of a
synchronization around every op (which the eager forward never pays).

The forward of each module that is not traced is timed as a whole, less the units called inside it:
that is the time of its own code, measured rather than assumed to be nothing. A node that calls a
module timed that way (or one holding a unit) is not timed as an op: its time is counted where it is
measured. Neither are the guards a torch.export capture adds (they are not the model's code).
"""

from __future__ import annotations

import contextlib
import statistics
import time
import types
from collections import defaultdict
from dataclasses import dataclass, field

import torch
import torch.fx as fx
import torch.nn as nn

from . import ops as opsmod
from .export_capture import GUARD
from .extract import is_const
from .graph import Unit
from .regions import Region


def sig(t: torch.Tensor) -> tuple:
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
    flops: float = 0.0
    inputs: dict = field(default_factory=dict)


class UnitState:
    """Per-unit bookkeeping shared by the interpreters of successive calls. ``elsewhere``: ids of
    modules whose time is measured by their own wrapper (units and untraced modules)."""

    def __init__(self, unit: Unit, elsewhere: frozenset[int] = frozenset()) -> None:
        self.unit = unit
        self.fam: dict[str, str] = {}
        self.regions: list[Region] = []
        self.node_region: dict[str, int] = {}
        self.reads: dict[str, list[fx.Node]] = {}  # node -> external inputs of its region that it reads
        self.sinks: dict[str, int] = {}
        self.open: dict[int, _RegionCall] = {}
        self.call_keys: list[dict[int, tuple]] = []  # per call of the unit (capture run): region -> variant
        self.laps: _Laps | None = None
        # not timed as ops: calls of modules timed by their own wrapper, and the capture's guards
        self.untimed: set[str] = set()
        for n in unit.gm.graph.nodes:
            if n.meta.get(GUARD):
                self.untimed.add(n.name)
            elif n.op == "call_module":
                sub = unit.gm.get_submodule(n.target)
                if any(id(m) in elsewhere for m in sub.modules()):
                    self.untimed.add(n.name)

    def set_regions(self, regions: list[Region]) -> None:
        self.regions = regions
        by_name = {n.name: n for n in self.unit.gm.graph.nodes}
        for r in regions:
            ext = set(r.inputs)
            for name in r.nodes:
                self.node_region[name] = r.index
                self.reads[name] = [a for a in by_name[name].all_input_nodes if a.name in ext]
            self.sinks[r.sink] = r.index


class _Laps:
    """A copy of a unit's graph that reads a clock before each timed op and adds the lap after it
    to this call's slot of that op (``calls``: one list of lap times per call of the unit)."""

    def __init__(self, st: UnitState, sync: bool) -> None:
        self.sync = sync
        graph = fx.Graph()
        val_map: dict[fx.Node, fx.Node] = {}
        graph.output(graph.graph_copy(st.unit.gm.graph, val_map))
        self.slots: list[str] = []
        for old, new in val_map.items():
            if old.op not in ("call_function", "call_method", "call_module") or old.name in st.untimed:
                continue
            with graph.inserting_before(new):
                t0 = graph.call_function(self.clock, ())
            with graph.inserting_after(new):
                graph.call_function(self.lap, (len(self.slots), t0))
            self.slots.append(old.name)
        self.gm = fx.GraphModule(st.unit.gm, graph)
        self.calls: list[list[float]] = []
        self._current: list[float] = []
        self._pending: list[tuple] = []  # CUDA: (laps, slot, start event, end event), read by settle()

    def clock(self):
        if self.sync:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def lap(self, slot: int, t0) -> None:
        if self.sync:
            self._pending.append((self._current, slot, t0, self.clock()))
        else:
            self._current[slot] += time.perf_counter() - t0

    def run(self, args):
        self._current = [0.0] * len(self.slots)
        self.calls.append(self._current)
        return self.gm(*args)

    def settle(self) -> None:
        """Read the events of the run just made into its lap times (seconds)."""
        if self._pending:
            torch.cuda.synchronize()
        for laps, slot, start, end in self._pending:
            laps[slot] += start.elapsed_time(end) / 1e3
        self._pending.clear()


class Session:
    """One profiling session: ``mode`` switches between the naming, capture and timed runs."""

    def __init__(self, device: str, captures_per_variant: int) -> None:
        self.sync = device.startswith("cuda")
        self.mode = "meta"
        self.k = captures_per_variant
        self.node_time: dict[tuple[str, str], float] = defaultdict(float)  # this run
        # (unit path, region index, variant key) -> [time, calls] of this run
        self.region_time: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0])
        self.untraced_time: dict[str, float] = defaultdict(float)  # module path -> own code, this run
        self.variant_info: dict[tuple, dict] = {}
        self.captured: dict[tuple, list[list]] = defaultdict(list)
        self.captured_out: dict[tuple, torch.Tensor] = {}
        self._frames: list[list[float]] = []  # per open wrapper: time of the wrappers called inside it

    def clear_run(self, states: list[UnitState]) -> None:
        self.node_time.clear()
        self.region_time.clear()
        self.untraced_time.clear()
        for st in states:
            if st.laps is not None:
                st.laps.settle()
                st.laps.calls.clear()

    def start_capture(self, states: list[UnitState]) -> None:
        self.mode = "capture"
        for st in states:
            st.call_keys.clear()

    def start_timing(self, states: list[UnitState]) -> None:
        self.mode = "time"
        for st in states:
            st.laps = _Laps(st, self.sync)
        self.clear_run(states)

    def collect(self, states: list[UnitState]) -> None:
        """Turn the laps of the run just made into node and region times (seconds)."""
        for st in states:
            st.laps.settle()
            slot_of = {name: i for i, name in enumerate(st.laps.slots)}
            members = {r.index: [slot_of[n] for n in r.nodes if n in slot_of] for r in st.regions}
            for i, laps in enumerate(st.laps.calls):
                for name, dt in zip(st.laps.slots, laps, strict=True):
                    self.node_time[(st.unit.path, name)] += dt
                if not st.call_keys:
                    continue
                for ri, key in st.call_keys[min(i, len(st.call_keys) - 1)].items():
                    acc = self.region_time[key]
                    acc[0] += sum(laps[j] for j in members[ri])
                    acc[1] += 1

    @contextlib.contextmanager
    def frame(self, untraced_path: str | None):
        """Time one wrapped forward; an untraced module's own time is its time less its callees'."""
        if self.sync:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        self._frames.append([0.0])
        try:
            yield
        finally:
            if self.sync:
                torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            inner = self._frames.pop()[0]
            if self._frames:
                self._frames[-1][0] += dt
            if untraced_path is not None and self.mode == "time":
                self.untraced_time[untraced_path] += max(0.0, dt - inner)


class _Recorder(fx.Interpreter):
    def __init__(self, state: UnitState, session: Session) -> None:
        super().__init__(state.unit.gm, garbage_collect_values=True)
        self.state = state
        self.session = session

    def run(self, *args):
        if self.session.mode == "capture":
            self.state.call_keys.append({})
        return super().run(*args)

    def run_node(self, n: fx.Node):
        s, st = self.session, self.state
        with self._set_current_node(n):
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            result = getattr(self, n.op)(n.target, args, kwargs)
        if n.op in ("placeholder", "output", "get_attr"):
            return result
        if s.mode == "meta":
            st.fam[n.name] = opsmod.family(n, result, st.unit.gm)
            return result
        ri = st.node_region.get(n.name)
        if ri is None:
            return result
        call = st.open.setdefault(ri, _RegionCall())
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
                key_parts.append(("t",) + sig(v))
            elif is_const(v):
                key_parts.append(("c", repr(v)))
            else:
                key_parts.append(("x", type(v).__name__))
        key = (st.unit.path, ri, tuple(key_parts))
        st.call_keys[-1][ri] = key
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
        if len(s.captured[key]) < s.k:
            s.captured[key].append([_clone(v) if isinstance(v, torch.Tensor) else v for v in values])
            if isinstance(result, torch.Tensor) and key not in s.captured_out:
                s.captured_out[key] = _clone(result)


def _patch(module: nn.Module, forward, patched: list) -> None:
    had = "forward" in module.__dict__
    old = module.__dict__.get("forward")
    module.forward = types.MethodType(forward, module)
    patched.append((module, had, old))


@contextlib.contextmanager
def instrumented(states: list[UnitState], session: Session, untraced: dict[str, nn.Module]):
    """Route each unit module's forward through its graph as ``session.mode`` says (the recorder,
    or the timed copy) and time each untraced module's own code (``untraced``: path -> module);
    instance attributes, removed after."""
    patched: list = []
    for st in states:
        def forward(self, *args, _st=st, _sig=st.unit.signature, **kwargs):
            bound = _sig.bind(*args, **kwargs)
            bound.apply_defaults()
            with session.frame(None):
                if session.mode == "time":
                    return _st.laps.run(bound.arguments.values())
                return _Recorder(_st, session).run(*bound.arguments.values())

        _patch(st.unit.module, forward, patched)
    for path, module in untraced.items():
        inner = module.__dict__.get("forward") or type(module).forward.__get__(module)

        def timed(self, *args, _inner=inner, _path=path, **kwargs):
            with session.frame(_path):
                return _inner(*args, **kwargs)

        _patch(module, timed, patched)
    try:
        yield
    finally:
        for module, had, old in reversed(patched):
            if had:
                module.forward = old
            else:
                del module.forward


def run_times_ms(fn, runs: int, sync: bool) -> list[float]:
    """Wall time of each of ``runs`` calls of ``fn``, in ms (CUDA synchronized around each)."""
    times = []
    for _ in range(runs):
        if sync:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if sync:
            torch.cuda.synchronize()
        times.append(1e3 * (time.perf_counter() - t0))
    return times


def median_ms(fn, runs: int, sync: bool) -> float:
    return statistics.median(run_times_ms(fn, runs, sync))
