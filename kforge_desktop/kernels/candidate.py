"""Candidates: the ``ModelNew`` module an LLM (or a user) wrote, as data and, in a worker, as code.

``Candidate`` is plain data and safe anywhere. ``load_candidate_module`` executes the source and must
only ever be called inside an evaluator worker process.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import sys
import types
from dataclasses import dataclass

LANGUAGES = ("cuda", "cpp", "triton", "python")


class CandidateError(Exception):
    """The candidate module is malformed; ``status`` is the verdict status it maps to."""

    def __init__(self, message: str, status: str = "compile_error", log: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.log = log


@dataclass(frozen=True)
class Candidate:
    source: str
    origin: str = "llm"  # llm | seed | user
    directive: str = ""
    parent_id: int | None = None

    @property
    def language(self) -> str:
        return detect_language(self.source)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]


def detect_language(source: str) -> str:
    if re.search(r"@triton\.jit|import triton|from triton", source):
        return "triton"
    if re.search(r"""lang\s*=\s*["']cuda["']|cuda_sources\s*=|__global__|\.cu["']""", source):
        return "cuda"
    if re.search(r"load_native|load_inline|cpp_extension|extern\s+\"C\"", source):
        return "cpp"
    return "python"


def check_syntax(source: str, where: str = "candidate") -> ast.Module:
    try:
        return ast.parse(source, filename=where)
    except SyntaxError as err:
        raise CandidateError(
            f"the candidate module has a Python syntax error on line {err.lineno}: {err.msg}"
        ) from None


def static_problems(source: str) -> list[str]:
    """Cheap checks before anything runs: the module must define ModelNew and not inherit Model."""
    tree = check_syntax(source)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    out = []
    if "ModelNew" not in classes:
        out.append("the candidate module defines no class ModelNew")
        return out
    for base in classes["ModelNew"].bases:
        name = ast.unparse(base)
        if name == "Model" or name.endswith(".Model"):
            out.append("ModelNew inherits the reference Model instead of implementing it")
    if "forward" not in {n.name for n in classes["ModelNew"].body if isinstance(n, ast.FunctionDef)}:
        out.append("ModelNew has no forward method")
    return out


def load_candidate_module(source: str, tag: str) -> types.ModuleType:
    """Execute the candidate (worker processes only). Build errors surface as CandidateError."""
    from .native import NativeBuildError

    tree = check_syntax(source)
    problems = static_problems(source)
    if problems and "no class ModelNew" in problems[0]:
        raise CandidateError(problems[0] + ".")
    name = f"kforge_candidate_{tag}"
    module = types.ModuleType(name)
    # a real file: Triton's @jit and tracebacks read the source back from it
    module.__file__ = _source_file(source)
    sys.modules[name] = module
    try:
        exec(compile(tree, module.__file__, "exec"), module.__dict__)
    except NativeBuildError as err:
        raise CandidateError(f"the kernel did not compile ({_first_error(err.log)})", log=err.log) from None
    except ImportError as err:
        raise CandidateError(f"the candidate imports something that is not available: {err}") from None
    except RuntimeError as err:
        text = str(err)
        if "Error building extension" in text or "error:" in text:
            raise CandidateError(f"the kernel did not compile ({_first_error(text)})", log=text) from None
        raise CandidateError(f"the candidate raised RuntimeError at import: {_short(text)}",
                             status="runtime_error", log=text) from None
    except Exception as err:
        raise CandidateError(f"the candidate raised {type(err).__name__} at import: {_short(str(err))}",
                             status="runtime_error") from None
    if not isinstance(getattr(module, "ModelNew", None), type):
        raise CandidateError("the candidate module defines no class ModelNew.")
    return module


def _source_file(source: str) -> str:
    from .native import cache_root

    folder = cache_root() / "candidates"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"candidate_{hashlib.sha256(source.encode()).hexdigest()[:20]}.py"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source)
        os.replace(tmp, path)
    return str(path)


def _short(text: str, n: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _first_error(log: str) -> str:
    """The compiler's first diagnostic, with the build folder's path cut off."""
    for line in log.splitlines():
        if "error:" in line and "Error building extension" not in line:
            line = re.sub(r"^\S*/(kernel\.(?:cpp|cu)|[\w.]+\.(?:cpp|cu|h))", r"\1", line.strip())
            return _short(line, 160)
    return "see the build log"
