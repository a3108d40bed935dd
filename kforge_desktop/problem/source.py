"""A problem's source split into the parts a candidate module reuses: the module-level code (imports,
helpers, constants) and the reference ``Model`` class.

Both candidate writers that start from the problem (the scaffold around a native kernel and the
torch.compile seed) keep the reference's ``__init__`` verbatim, renamed to ``ModelNew``, so that
parameters are created in the same order from the same seed, exactly as KernelBench compares models.
"""

from __future__ import annotations

import ast
import re

from .problem import ProblemError

# the problem's functions a candidate module does not carry (the harness calls the problem's own)
_INPUT_FUNCTIONS = ("get_inputs", "get_init_inputs", "get_replay_inputs")


def split_source(source: str) -> tuple[str, ast.ClassDef]:
    """The module-level code to keep (everything but the docstring, ``Model`` and the input
    functions; ``torch`` and ``nn`` imported), and the ``Model`` class. Raises ProblemError when
    there is no ``class Model``."""
    tree = ast.parse(source)
    keep: list[str] = []
    model: ast.ClassDef | None = None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            model = node
            continue
        if isinstance(node, ast.FunctionDef) and node.name in _INPUT_FUNCTIONS:
            continue
        if isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant) and node is tree.body[0]:
            continue  # the problem's docstring
        seg = ast.get_source_segment(source, node)
        if seg:
            keep.append(seg)
    if model is None:
        raise ProblemError("the problem defines no class Model")
    header = "\n".join(keep)
    if not re.search(r"^import torch$|^import torch\b", header, re.M):
        header = "import torch\n" + header
    if not re.search(r"import torch\.nn as nn|from torch import nn", header):
        header = header + "\nimport torch.nn as nn"
    return header, model


def model_new_body(source: str, model: ast.ClassDef) -> str:
    """The body of ``model`` (found by ``split_source``) without ``forward``, as the body of
    ``class ModelNew``: ``super(Model, ...)`` renamed, and an ``__init__`` taking any arguments when
    the reference has none."""
    lines = source.splitlines()
    parts: list[str] = []
    for node in model.body:
        if isinstance(node, ast.FunctionDef) and node.name == "forward":
            continue
        start = (node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno) - 1
        parts.append("\n".join(lines[start:node.end_lineno]))
    body = "\n\n".join(parts) if parts else "    pass"
    body = re.sub(r"super\(\s*Model\s*,", "super(ModelNew,", body)
    if not any(isinstance(n, ast.FunctionDef) and n.name == "__init__" for n in model.body):
        body = "    def __init__(self, *args):\n        super().__init__()\n\n" + body
    return body
