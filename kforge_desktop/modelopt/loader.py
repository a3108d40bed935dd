"""Load a model file: ``get_model()`` + ``get_inputs()``, or the KernelBench trio.

A model file is the user's own (trusted) code, so it is executed here, in the caller's process, the
same way ``problem.load_problem`` executes a problem file. Every way the file can be unusable gets
one sentence that names the file, the function and what went wrong.
"""

from __future__ import annotations

import ast
import hashlib
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn as nn


class ModelFileError(Exception):
    """A model file that cannot be used; ``str(err)`` is one sentence a user can act on."""


@dataclass(frozen=True)
class ModelFile:
    """A loaded model file: the model (in eval mode), example inputs and how to make fresh ones."""

    path: str
    name: str
    model: nn.Module
    inputs: tuple
    make_inputs: Callable[[], list] = field(repr=False)
    style: str = "get_model"  # get_model | kernelbench


def _defined_names(tree: ast.Module) -> set[str]:
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for n in tree.body:
        if isinstance(n, ast.Assign):
            names |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in n.names}
    return names


def is_model_file(path: str | Path) -> bool:
    """True when the file defines ``get_model`` (a model file) rather than only the KernelBench
    trio; cheap and safe: the file is parsed, never executed. ``kforge optimize`` uses it to choose
    between a whole-model run and a single-problem run."""
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return False
    return "get_model" in _defined_names(tree)


def _exec_file(p: Path) -> types.ModuleType:
    try:
        source = p.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise ModelFileError(f"Cannot read model file {p}: {err}.") from None
    try:
        tree = ast.parse(source, filename=str(p))
    except SyntaxError as err:
        raise ModelFileError(f"{p} has a syntax error on line {err.lineno}: {err.msg}.") from None
    names = _defined_names(tree)
    if "get_model" not in names and not {"Model", "get_init_inputs"} <= names:
        have_inputs = "get_inputs" in names
        raise ModelFileError(
            f"{p} is not a model file: it defines no get_model()"
            + ("" if have_inputs else " and no get_inputs()")
            + " (a model file needs get_model() returning an nn.Module and get_inputs() returning a list "
            "of example inputs, or the KernelBench Model, get_init_inputs() and get_inputs())."
        )
    if "get_inputs" not in names:
        raise ModelFileError(f"{p} defines no get_inputs() (it must return a list of example inputs).")
    mod_name = f"kforge_model_{hashlib.sha256(str(p.resolve()).encode() + source.encode()).hexdigest()[:12]}"
    module = types.ModuleType(mod_name)
    module.__file__ = str(p)
    sys.modules[mod_name] = module
    try:
        exec(compile(tree, str(p), "exec"), module.__dict__)
    except Exception as err:
        sys.modules.pop(mod_name, None)
        raise ModelFileError(f"{p} raised {type(err).__name__} when imported: {err}.") from err
    return module


def _call(p: Path, fn_name: str, fn: Callable, *args):
    try:
        return fn(*args)
    except Exception as err:
        raise ModelFileError(f"{fn_name}() in {p} raised {type(err).__name__}: {err}.") from err


def _inputs(p: Path, fn: Callable) -> list:
    value = _call(p, "get_inputs", fn)
    if isinstance(value, torch.Tensor):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise ModelFileError(
            f"get_inputs() in {p} returned a {type(value).__name__}; it must return a list of inputs."
        )
    if not any(isinstance(v, torch.Tensor) for v in value):
        raise ModelFileError(f"get_inputs() in {p} returned no tensor; the model needs at least one tensor input.")
    return list(value)


def load_model_file(path: str | Path, device: str = "cpu") -> ModelFile:
    """Execute the model file, build the model in eval mode on ``device`` and its example inputs."""
    p = Path(path)
    if not p.exists():
        raise ModelFileError(f"Model file {p} does not exist.")
    if p.is_dir():
        raise ModelFileError(f"{p} is a folder; give the path of a model .py file.")
    module = _exec_file(p)
    if hasattr(module, "get_model"):
        style = "get_model"
        model = _call(p, "get_model", module.get_model)
        made_by = "get_model()"
    else:
        style = "kernelbench"
        init = _call(p, "get_init_inputs", module.get_init_inputs)
        if not isinstance(init, (list, tuple)):
            raise ModelFileError(f"get_init_inputs() in {p} must return a list, not a {type(init).__name__}.")
        model = _call(p, "Model", module.Model, *init)
        made_by = "Model(*get_init_inputs())"
    if not isinstance(model, nn.Module):
        raise ModelFileError(f"{made_by} in {p} returned a {type(model).__name__}, not an nn.Module.")
    try:
        model = model.to(device).eval()
    except Exception as err:
        raise ModelFileError(f"Cannot move the model of {p} to {device}: {err}.") from err

    def make_inputs() -> list:
        return [v.to(device) if isinstance(v, torch.Tensor) else v for v in _inputs(p, module.get_inputs)]

    inputs = make_inputs()
    try:
        with torch.no_grad():
            model(*inputs)
    except Exception as err:
        raise ModelFileError(
            f"The model of {p} raised {type(err).__name__} on the inputs of get_inputs(): {err}."
        ) from err
    return ModelFile(path=str(p), name=p.stem, model=model, inputs=tuple(inputs), make_inputs=make_inputs, style=style)
