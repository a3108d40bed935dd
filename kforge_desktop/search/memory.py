"""Kernel memory: kernels the user's own sessions verified, kept as exemplars for later problems.

Our exemplars cover a dozen families; the user's models have more. A kernel a search proved correct
(and faster than the seed it started from, when it had one) is the best possible exemplar for the
next problem of the same family, whatever that problem's signature: retrieval and fitting are the
exemplars' own (``exemplars.rank``, ``fitting``), by what the op computes.

Each kernel is one plain file in ``paths.memory_dir()/<language>/``, with the exemplars' header:

    // exemplar: mem-log_softmax-3f2a9c
    // keywords: log_softmax logits ...        (words of the problem's source)
    // ops: log_softmax                         (the operators its reference ran)
    // output: like-input
    // problem: log_softmax                     (where it was verified)
    // speedup: 1.84
    // device: cpu
    // about: verified on log_softmax (log_softmax): 1.84x over eager on cpu.

so a user can read, copy or delete them by hand. The entry point's parameters are renamed to the
family's names first (``norm_weight`` -> ``weight``, ``norm_eps`` -> ``eps``), which is what lets
``fitting`` pair them with another problem's.

The API (pure, no Qt; the GUI and ``kforge memory`` call it): ``list_memory``, ``find``, ``add``,
``remember_node`` (one node of a session), ``remove``, ``match`` (the remembered kernels closest to a
problem), ``learn_from_session`` / ``learn_from_search`` (what a finished search calls);
``load_memory`` is what retrieval reads.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from .. import paths
from ..csource.comments import strip_cpp_comments
from ..csource.normalize import normalize_code
from .fitting import PARAM_NAMES, family_name
from .scaffold import FUNCTION, Scaffold

if TYPE_CHECKING:
    from ..store import SessionStore
    from .exemplars import Exemplar

SUFFIX = {"cpp": ".cpp", "cuda": ".cu"}
LEARN_MARGIN = 1.05  # a search's own kernel is learned when this much faster than its best seed (timing noise)
# words of a problem's source that say nothing about what it computes
_NOISE = {
    "self", "torch", "nn", "import", "from", "def", "class", "return", "super", "init", "forward", "model",
    "module", "get", "inputs", "init_inputs", "get_inputs", "get_init_inputs", "none", "true", "false", "float",
    "int", "tensor", "dim", "keepdim", "shape", "size", "batch", "batch_size", "randn", "rand", "parameter",
    "functional", "the", "and", "for", "with", "of", "in", "a", "an", "to", "is", "as", "x", "y", "out", "data",
    "device", "dtype", "float32", "contiguous", "view", "reshape", "lru_cache", "os", "path", "replay",
}


class KernelMemoryError(Exception):
    """A kernel that cannot be remembered (one sentence for the user)."""


def memory_root() -> Path:
    return paths.memory_dir()


def _files(language: str | None = None) -> list[Path]:
    root = memory_root()
    langs = [language] if language else list(SUFFIX)
    out: list[Path] = []
    for lang in langs:
        folder = root / lang
        if lang in SUFFIX and folder.is_dir():
            out += sorted(folder.glob("*" + SUFFIX[lang]))
    return out


_cache: dict[str, tuple[tuple, tuple]] = {}


def load_memory(language: str) -> tuple[Exemplar, ...]:
    """The remembered kernels of ``language``, as exemplars (origin ``memory``); re-read when a file
    changed, so a kernel learned by one search is there for the next."""
    from .exemplars import parse_exemplar, provide_helpers

    files = _files(language)
    key = tuple((str(p), p.stat().st_mtime_ns) for p in files if p.exists())
    cached = _cache.get(language)
    if cached is not None and cached[0] == key:
        return cached[1]
    out = []
    for path in files:
        try:
            ex = parse_exemplar(path.read_text(), path, language, origin="memory")
        except OSError:
            continue
        if ex.params():
            out.append(ex)
    out = [replace(ex, code=provide_helpers(ex.code, language)[0]) for ex in out]
    _cache[language] = (key, tuple(out))
    return tuple(out)


def list_memory(language: str | None = None) -> list[Exemplar]:
    """Every remembered kernel (of ``language``, or of all languages)."""
    out: list[Exemplar] = []
    for lang in ([language] if language else list(SUFFIX)):
        out += list(load_memory(lang))
    return out


def find(name: str) -> Exemplar | None:
    """The remembered kernel called ``name`` (or whose file is ``name``)."""
    return next((ex for ex in list_memory() if ex.name == name or Path(ex.path).stem == name), None)


def remove(name: str) -> bool:
    """Forget the kernel ``name``; False when there is none."""
    ex = find(name)
    if ex is None:
        return False
    Path(ex.path).unlink(missing_ok=True)
    return True


def canonical_params(kernel: str, scaffold: Scaffold) -> str:
    """``kernel`` with its entry point's parameters renamed to their family names (only where that
    collides with nothing the kernel already names)."""
    renames: dict[str, str] = {}
    for a in scaffold.args:
        new = family_name(a.name)
        if new != a.name and a.role in ("param", "scalar", "input") and (a.role != "input" or new in PARAM_NAMES):
            renames[a.name] = new
    if not renames:
        return kernel
    m = re.search(rf'extern\s+"C"\s+void\s+{FUNCTION}\s*\(', kernel)
    if not m:
        return kernel
    start = m.start()
    depth, end, opened = 0, len(kernel), False
    for i in range(kernel.index("{", m.end()), len(kernel)):
        depth += kernel[i] == "{"
        depth -= kernel[i] == "}"
        if depth == 0:
            end, opened = i + 1, True
            break
    if not opened:
        return kernel
    entry = kernel[start:end]
    taken = set(re.findall(r"\b[A-Za-z_]\w*\b", strip_cpp_comments(entry)))
    renames = {k: v for k, v in renames.items() if v not in taken and list(renames.values()).count(v) == 1}
    if not renames:
        return kernel
    pattern = re.compile(r"(?<![.\w])(" + "|".join(re.escape(k) for k in renames) + r")\b")
    return kernel[:start] + pattern.sub(lambda mm: renames[mm.group(1)], entry) + kernel[end:]


def _keywords(scaffold: Scaffold, source: str) -> list[str]:
    from .exemplars import op_name, problem_ops

    words = [op_name(op) for op in problem_ops(scaffold)]
    for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", source):
        w = w.lower()
        if len(w) >= 3 and w not in _NOISE and not w.startswith("_") and not w.isdigit():
            words.append(w)
    out = list(dict.fromkeys(words))
    return out[:24]


def _output(scaffold: Scaffold) -> str:
    inputs = [a.name for a in scaffold.args if a.role == "input"]
    if len(scaffold.outputs) != 1 or not inputs:
        return "other"
    out, primary = scaffold.shapes.get(scaffold.outputs[0]), scaffold.shapes.get(inputs[0])
    if not out or not primary:
        return "other"
    if math.prod(out) == math.prod(primary):
        return "like-input"
    if math.prod(out) == math.prod(primary[:-1]):
        return "per-row"
    return "other"


def add(kernel: str, scaffold: Scaffold, problem_name: str, source: str = "", *, speedup: float | None = None,
        device: str = "cpu") -> Exemplar:
    """Remember ``kernel`` (a verified kernel of ``scaffold``'s problem). A kernel already remembered
    (the same up to ``normalize_code``) is not stored twice; a faster kernel of the same problem
    replaces the slower one. Returns the remembered exemplar."""
    from .exemplars import op_name, parse_exemplar, problem_ops

    language = scaffold.language
    if language not in SUFFIX:
        raise KernelMemoryError(f"only C++ and CUDA kernels can be remembered, not {language}")
    code = canonical_params(kernel.strip() + "\n", scaffold)
    norm = normalize_code(code, language)
    for ex in load_memory(language):
        if normalize_code(ex.code, language) == norm:
            return ex
    for ex in load_memory(language):
        if ex.problem == problem_name:
            old = speedup_of(ex)
            if old is not None and (speedup is None or speedup <= old):
                return ex  # the one remembered for this problem is as fast
            Path(ex.path).unlink(missing_ok=True)
    ops = [op_name(op) if op.startswith("native_") else op for op in problem_ops(scaffold)]
    digest = hashlib.sha256(norm.encode()).hexdigest()[:6]
    safe = re.sub(r"[^A-Za-z0-9_]+", "_", problem_name).strip("_") or "kernel"
    name = f"mem-{safe}-{digest}"
    chain = ", ".join(dict.fromkeys(ops)) or "its reference's operators"
    speed = f": {speedup:.2f}x over eager on {device}" if speedup else f" on {device}"
    header = [
        f"// exemplar: {name}",
        f"// keywords: {' '.join(_keywords(scaffold, source))}",
        f"// ops: {' '.join(dict.fromkeys(ops))}",
        f"// output: {_output(scaffold)}",
        f"// problem: {problem_name}",
        f"// device: {device}",
    ]
    if speedup:
        header.append(f"// speedup: {speedup:.3g}")
    header.append(f"// about: a kernel verified in one of your sessions, on {problem_name} ({chain}){speed}.")
    folder = memory_root() / language
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}{SUFFIX[language]}"
    text = "\n".join(header) + "\n" + code
    path.write_text(text)
    return parse_exemplar(text, path, language, origin="memory")


def speedup_of(ex: Exemplar) -> float | None:
    """The speedup over eager a remembered kernel was verified at (None when not recorded)."""
    try:
        m = re.search(r"^//\s*speedup:\s*([0-9.eE+-]+)", Path(ex.path).read_text(), re.M)
    except OSError:
        return None
    return float(m.group(1)) if m else None


def match(scaffold: Scaffold, source: str, limit: int = 3) -> list[tuple[Exemplar, str | None]]:
    """The remembered kernels closest to this problem, best first: (kernel, the kernel fitted to
    this problem's signature, or None where it does not fit)."""
    from .exemplars import library, rank

    ranked = rank(scaffold, source, exemplars=library(scaffold.language, memory=True))
    return [(ex, code) for score, ex, code in ranked if ex.origin == "memory" and score > 0][:limit]


def learn_from_session(store: SessionStore, problem_id: int) -> Exemplar | None:
    """Remember the fastest kernel a search verified, when it is the search's own work: written by
    the model or the user, correct, doing the work itself (no PyTorch library calls), not a near-copy
    of a seed (``normalize_code``: a seed is an exemplar already), and faster than every seed the
    search started from by more than ``LEARN_MARGIN``. None otherwise."""
    from .setup import try_scaffold

    nodes = store.nodes(problem_id, with_source=False)
    own = [n for n in nodes if n.origin in ("llm", "user") and n.language in SUFFIX and n.verdict is not None
           and n.verdict.status == "ok" and not n.verdict.library_calls]
    if not own:
        return None
    # the fastest; a correct kernel whose timing was not usable (no speedup) still counts, last
    best_id = max(own, key=lambda n: (n.speedup is not None, n.speedup or 0.0, -n.id)).id
    best = store.node(best_id)
    if best is None or not best.kernel_source.strip():
        return None
    seed_nodes = [store.node(n.id) for n in nodes if n.origin == "seed"]
    norm = normalize_code(best.kernel_source, best.language)
    if any(s is not None and s.kernel_source and normalize_code(s.kernel_source, s.language) == norm
           for s in seed_nodes):
        return None  # a near-copy of a seed: an exemplar already
    seeds = [s.speedup for s in seed_nodes if s is not None and s.speedup]
    if seeds and (best.speedup or 0.0) <= LEARN_MARGIN * max(seeds):
        return None
    record = store.problem(problem_id)
    scaffold = try_scaffold(record.to_problem(), best.language)
    if scaffold is None:
        return None
    return add(best.kernel_source, scaffold, record.name, record.source, speedup=best.speedup, device=record.device)


def remember_node(store: SessionStore, node_id: int) -> Exemplar:
    """Remember one node the user chose (the GUI's "remember this kernel"): it must be a correct
    scaffolded C++ or CUDA kernel that does the work itself. Raises ``KernelMemoryError`` with one
    sentence otherwise."""
    from .setup import try_scaffold

    node = store.node(node_id)
    if node is None:
        raise KernelMemoryError(f"the session has no node {node_id}")
    if node.language not in SUFFIX or not node.kernel_source.strip():
        raise KernelMemoryError(f"node {node_id} is not a C++ or CUDA kernel of the scaffold")
    v = node.verdict
    if v is None or v.status != "ok":
        raise KernelMemoryError(f"node {node_id} is not verified correct")
    if v.library_calls:
        raise KernelMemoryError(f"node {node_id} hands part of the work to PyTorch ({', '.join(v.library_calls)})")
    record = store.problem(node.problem_id)
    scaffold = try_scaffold(record.to_problem(), node.language)
    if scaffold is None:
        raise KernelMemoryError(f"the problem {record.name} cannot be scaffolded")
    return add(node.kernel_source, scaffold, record.name, record.source, speedup=node.speedup, device=record.device)


def learn_from_search(store: SessionStore, problem_id: int, config, log) -> None:
    """What a finished search calls: remember its own best kernel (``learn_from_session``) when the
    search uses the memory (``config.memory``), and say so in its log. A memory that cannot be
    written is said as a warning; the search's result is unaffected."""
    if not getattr(config, "memory", False):
        return
    try:
        learned = learn_from_session(store, problem_id)
    except (OSError, KernelMemoryError) as err:
        log(f"the kernel memory could not be updated: {err}", "warning")
        return
    if learned is not None:
        log(f"remembered this search's best kernel as {learned.name} (kforge memory list): later problems of "
            "this family get it as their example")
