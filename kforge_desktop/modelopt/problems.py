"""A target becomes a KernelBench problem file, with the real inputs it saw beside it.

The problem's ``Model.forward`` is the target's reference code (cut out of the model's graph, with
parameters as inputs), ``get_inputs()`` makes fresh inputs of the captured shapes, dtypes and strides
(activations random, parameters and buffers the model's real values, integer inputs within the
captured range), and ``get_replay_inputs()`` returns the captured real input sets of every variant,
which the evaluator checks a candidate on as well. The tensors live in ``<name>.replay.pt``
(``torch.save`` of tensors and lists only, read back with ``weights_only=True``: no pickled objects).

Each problem is checked when written: it loads as a problem, its reference reproduces the output the
model produced on the captured inputs, and its random inputs give finite outputs (where they do not,
``get_inputs()`` uses the captured activations instead).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import torch

from ..problem.problem import Problem, problem_from_source
from .extract import Cut
from .profile import Capture, Target


class TargetProblemError(Exception):
    """A target whose problem could not be written or does not reproduce the model."""


@dataclass(frozen=True)
class TargetProblem:
    target: str
    problem: Problem
    path: Path
    replay_path: Path
    signatures: tuple  # every (shape, stride, dtype) tuple of inputs the problem checks


_TEMPLATE = '''\
"""{doc}"""
import os
from functools import lru_cache

import torch
import torch.nn as nn
{extra_imports}
REPLAY_FILE = {replay_name!r}
REPLAY_DIR = {replay_dir!r}  # where the session wrote it; a copy beside this file wins
# per input: name, shape, stride, dtype, how get_inputs() makes it, and two numbers for that
SPECS = {specs}
RANDOM_INPUTS = {random_inputs}


class Model(nn.Module):
    """{model_doc}"""

    def __init__(self):
        super().__init__()

{forward}

@lru_cache(maxsize=1)
def _replay():
    here = os.path.dirname(os.path.abspath(__file__)) if "__file__" in globals() else ""
    for folder in (here, REPLAY_DIR):
        path = os.path.join(folder, REPLAY_FILE)
        if folder and os.path.exists(path):
            return torch.load(path, weights_only=True)
    raise FileNotFoundError(f"{{REPLAY_FILE}} (the captured inputs of this target) is missing")


def _copy(t):
    """A copy with the same strides (a clone of a strided view would come back contiguous)."""
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype).copy_(t)


def get_replay_inputs():
    """The real inputs the model gave this target while it was profiled (all variants)."""
    return [[_copy(t) for t in call] for call in _replay()["calls"]]


def get_inputs():
    first = _replay()["calls"][0]
    out = []
    for i, (name, shape, stride, dtype, kind, a, b) in enumerate(SPECS):
        if kind == "param" or not RANDOM_INPUTS:
            out.append(_copy(first[i]))
            continue
        dt = getattr(torch, dtype)
        t = torch.empty_strided(shape, stride, dtype=dt)
        if kind == "int":
            t.copy_(torch.randint(int(a), int(b) + 1, shape))
        elif kind == "bool":
            t.copy_(torch.rand(shape) < a)
        else:
            t.copy_(torch.randn(shape) * b + a)
        out.append(t)
    return out


def get_init_inputs():
    return []
'''


def _spec(name: str, t: torch.Tensor, is_param: bool) -> tuple:
    dtype = str(t.dtype).replace("torch.", "")
    shape, stride = tuple(t.shape), tuple(t.stride())
    if is_param:
        return (name, shape, stride, dtype, "param", 0.0, 0.0)
    if t.dtype == torch.bool:
        return (name, shape, stride, dtype, "bool", float(t.float().mean()) if t.numel() else 0.5, 0.0)
    if not t.is_floating_point():
        lo, hi = (int(t.min()), int(t.max())) if t.numel() else (0, 0)
        return (name, shape, stride, dtype, "int", float(lo), float(hi))
    f = t.float()
    mean = float(f.mean()) if t.numel() else 0.0
    std = float(f.std()) if t.numel() > 1 else 1.0
    return (name, shape, stride, dtype, "random", round(mean, 6), round(max(std, 1e-3), 6))


def _forward_code(code: str) -> str:
    return textwrap.indent(code.rstrip() + "\n", "    ")


def _extra_imports(code: str) -> str:
    lines = []
    if "inf" in code or "nan" in code:
        lines.append("from math import inf, nan")
    if "device(" in code:
        lines.append("from torch import device")
    return ("\n".join(lines) + "\n") if lines else ""


def _finite(x) -> bool:
    if isinstance(x, torch.Tensor):
        return not x.is_floating_point() or bool(torch.isfinite(x).all())
    if isinstance(x, (tuple, list)):
        return all(_finite(v) for v in x)
    return True


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return bool(torch.equal(a, b))
    return bool(torch.allclose(a.float(), b.float(), rtol=1e-4, atol=1e-5, equal_nan=True))


def write_problem(target: Target, cut: Cut, capture: Capture, folder: str | Path, model_name: str) -> TargetProblem:
    """Write ``<folder>/<target>.py`` and ``<target>.replay.pt`` and check them (see module doc)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if not target.optimizable:
        raise TargetProblemError(f"{target.name} cannot become a problem: it {target.note}.")
    variants = sorted(target.variants, key=lambda v: -v.time_ms)
    calls: list[list[torch.Tensor]] = []
    sigs = []
    for v in variants:
        sig = tuple(zip(v.shapes, v.strides, v.dtypes, strict=True))
        sets = capture.inputs.get(sig) or []
        calls.extend([[t.detach().cpu() for t in s] for s in sets])
        if sets:
            sigs.append(sig)
    if not calls:
        raise TargetProblemError(f"{target.name} has no captured inputs (it was never called while profiling).")
    first = calls[0]
    specs = [_spec(name, t, is_param) for name, t, is_param in
             zip(cut.arg_names, first, target.param_args, strict=True)]
    replay_path = folder / f"{target.name}.replay.pt"
    torch.save({"calls": calls}, replay_path)

    paths = ", ".join(target.module_paths[:4]) + (" …" if len(target.module_paths) > 4 else "")
    doc = (
        f"{target.op} from {model_name}, called at {paths} ({target.calls} call(s) per forward, "
        f"{100 * target.share:.1f}% of the model's op time).\n\n"
        "Generated by kforge profile: Model.forward is the model's own code for this target, with\n"
        "parameters as inputs; get_inputs() makes inputs of the captured shapes, dtypes and strides;\n"
        "get_replay_inputs() returns the real inputs captured from the model."
    )

    def render(random_inputs: bool) -> str:
        return _TEMPLATE.format(
            doc=doc, extra_imports=_extra_imports(cut.code), replay_name=replay_path.name,
            replay_dir=str(folder.resolve()), specs=_pretty_specs(specs), random_inputs=random_inputs,
            model_doc=f"The reference: {target.op}.", forward=_forward_code(cut.code),
        )

    path = folder / f"{target.name}.py"
    source = render(True)
    path.write_text(source)
    problem = problem_from_source(target.name, source, str(path))
    module = problem.load_module()
    model = module.Model()
    with torch.no_grad():
        expected = capture.outputs.get(sigs[0])
        # on the device the output was captured on: a GPU's convolution (TF32 by default) is not the CPU's
        device = expected.device if isinstance(expected, torch.Tensor) else torch.device("cpu")
        got = model.to(device)(*[t.to(device) if isinstance(t, torch.Tensor) else t
                                 for t in module.get_replay_inputs()[0]])
        if expected is not None and isinstance(got, torch.Tensor) and not _close(got.cpu(), expected.cpu()):
            raise TargetProblemError(
                f"The problem written for {target.name} does not reproduce the model's output on the captured inputs."
            )
        if not _finite(model(*module.get_inputs())):
            source = render(False)  # random inputs leave the op's domain (e.g. a log of negatives)
            path.write_text(source)
            problem = problem_from_source(target.name, source, str(path))
    return TargetProblem(target=target.name, problem=problem, path=path, replay_path=replay_path,
                         signatures=tuple(sigs))


def _pretty_specs(specs: list[tuple]) -> str:
    if not specs:
        return "[]"
    return "[\n" + "".join(f"    {s!r},\n" for s in specs) + "]"
