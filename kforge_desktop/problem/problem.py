"""A Problem: a KernelBench-format Python file (``Model``, ``get_inputs``, ``get_init_inputs``).

The problem file is the user's own code, so it may be executed to build the reference; code that
an LLM wrote never goes through here (see ``kernels.candidate``).
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import sys
import types
from dataclasses import dataclass
from pathlib import Path


class ProblemError(Exception):
    """A problem file that cannot be used; ``str(err)`` is one sentence a user can act on."""


REQUIRED = ("Model", "get_inputs", "get_init_inputs")


@dataclass(frozen=True)
class Problem:
    """One optimization problem, as plain data (safe to store, send to a worker, hash)."""

    name: str
    source: str
    path: str | None = None

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    def load_module(self) -> types.ModuleType:
        """Execute the problem source in a fresh module and check the KernelBench trio."""
        return _exec_problem(self.name, self.source, self.path)

    def forward_signature(self) -> inspect.Signature:
        mod = self.load_module()
        return inspect.signature(mod.Model.forward)


def _exec_problem(name: str, source: str, path: str | None) -> types.ModuleType:
    where = path or name
    try:
        tree = ast.parse(source, filename=where)
    except SyntaxError as err:
        raise ProblemError(f"{where} has a syntax error on line {err.lineno}: {err.msg}.") from None
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    missing = [r for r in REQUIRED if r not in defined]
    if missing:
        raise ProblemError(
            f"{where} is not a KernelBench problem: it does not define {', '.join(missing)} "
            "(a problem needs class Model(nn.Module), get_inputs() and get_init_inputs())."
        )
    mod_name = f"kforge_problem_{hashlib.sha256(source.encode()).hexdigest()[:12]}"
    module = types.ModuleType(mod_name)
    module.__file__ = path or f"<problem {name}>"
    sys.modules[mod_name] = module  # dataclasses and pickling look modules up by name
    try:
        exec(compile(tree, where, "exec"), module.__dict__)
    except Exception as err:  # the user's file raised while being imported
        sys.modules.pop(mod_name, None)
        raise ProblemError(f"{where} raised {type(err).__name__} when imported: {err}.") from err
    return module


def problem_from_source(name: str, source: str, path: str | None = None) -> Problem:
    """Validate ``source`` (syntax and the KernelBench trio) and wrap it as a Problem."""
    problem = Problem(name=name, source=source, path=path)
    _exec_problem(name, source, path)
    return problem


def load_problem(path: str | Path) -> Problem:
    """Read and validate a KernelBench problem file; raises ProblemError with one clear sentence."""
    p = Path(path)
    if not p.exists():
        raise ProblemError(f"Problem file {p} does not exist.")
    if p.is_dir():
        raise ProblemError(f"{p} is a folder; give the path of a problem .py file.")
    try:
        source = p.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise ProblemError(f"Cannot read problem file {p}: {err}.") from None
    return problem_from_source(p.stem, source, str(p))
