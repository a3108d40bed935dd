"""Budget spread by what there is to win; targets at their floor or too small get none, with a reason."""

from __future__ import annotations

from kforge_desktop.modelopt.budget import allocate
from kforge_desktop.modelopt.profile import Target, Variant


def _target(name: str, time_ms: float, floor_ms: float, total_ms: float = 100.0, optimizable: bool = True) -> Target:
    v = Variant(shapes=((64, 64),), dtypes=("float32",), strides=((64, 1),), calls=1, time_ms=time_ms,
                bytes_moved=32768, flops=4096.0, floor_ms=floor_ms)
    return Target(name=name, kind="softmax", op="softmax", ops=("softmax",), module_paths=("m",), arg_names=("x",),
                  param_args=(False,), variants=(v,), calls=1, time_ms=time_ms, share=time_ms / total_ms,
                  floor_ms=floor_ms, compile_ms=None, eager_iso_ms=None, optimizable=optimizable,
                  note="" if optimizable else "takes inputs that are not tensors or numbers (tuple)", key=name, code="")


def test_budget_follows_what_can_be_won():
    targets = [_target("big", 50.0, 5.0), _target("mid", 20.0, 4.0), _target("small", 2.0, 0.2),
               _target("at_floor", 25.0, 24.0), _target("tiny", 0.5, 0.01), _target("odd", 2.5, 0.1, optimizable=False)]
    allocs = {a.target: a for a in allocate(targets, 20)}
    assert sum(a.budget for a in allocs.values()) == 20
    assert allocs["big"].budget > allocs["mid"].budget > allocs["small"].budget > 0
    assert allocs["at_floor"].budget == 0 and "floor" in allocs["at_floor"].reason
    assert allocs["tiny"].budget == 0 and "too little" in allocs["tiny"].reason
    assert allocs["odd"].budget == 0 and "not tensors" in allocs["odd"].reason


def test_a_small_budget_goes_to_the_biggest_win_first():
    targets = [_target("a", 10.0, 1.0), _target("b", 40.0, 2.0), _target("c", 30.0, 3.0)]
    allocs = {a.target: a for a in allocate(targets, 3)}
    assert allocs["b"].budget == 3
    assert allocs["a"].budget == allocs["c"].budget == 0
    assert "more to win" in allocs["a"].reason


def test_only_and_max_targets():
    targets = [_target("t01_softmax", 40.0, 2.0), _target("t02_rms_norm", 30.0, 3.0)]
    only = {a.target: a for a in allocate(targets, 6, only=("rms_norm",))}
    assert only["t02_rms_norm"].budget == 6 and only["t01_softmax"].budget == 0
    top = {a.target: a for a in allocate(targets, 6, max_targets=1)}
    assert top["t01_softmax"].budget == 6 and "top 1" in top["t02_rms_norm"].reason
