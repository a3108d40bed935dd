"""Exemplars: correct, well-written kernels of common families, written by us, in the native format.

Why: a small model copies well and writes C++ from scratch badly. An exemplar of the same family,
with its arguments renamed to this problem's signature, is (a) shown in the prompt as the thing to
adapt, and (b) where its signature fits the problem exactly, placed in the tree as a ``seed`` node
(evaluated like any candidate, never counted as an LLM candidate) that edits then start from.

Files live in ``resources/exemplars/<language>/*.cpp|*.cu``; a short comment header names them:

    // exemplar: rms_norm
    // keywords: rmsnorm rms rsqrt pow mean norm eps weight
    // about: one sentence on what it computes
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .. import paths
from ..kernels.native import parse_exports
from .scaffold import FUNCTION, Scaffold

SUFFIX = {"cpp": ".cpp", "cuda": ".cu"}


@dataclass(frozen=True)
class Exemplar:
    name: str
    language: str
    keywords: tuple[str, ...]
    about: str
    code: str  # the kernel text without the header comment
    path: str

    def params(self) -> list[tuple[str, str]]:
        """(C type, name) of the entry point's parameters, the CUDA stream excluded."""
        exports = parse_exports(self.code)
        if FUNCTION not in exports:
            return []
        return [(t, n) for t, n in exports[FUNCTION][1] if not t.endswith("cudaStream_t")]


def exemplar_dir() -> Path:
    return paths.RESOURCES / "exemplars"


@lru_cache(maxsize=4)
def load_exemplars(language: str = "cpp") -> tuple[Exemplar, ...]:
    folder = exemplar_dir() / language
    if language not in SUFFIX or not folder.is_dir():
        return ()
    out = []
    for path in sorted(folder.glob("*" + SUFFIX[language])):
        text = path.read_text()
        meta = dict(re.findall(r"^//\s*(exemplar|keywords|about):\s*(.*)$", text, re.M))
        code = "\n".join(ln for ln in text.splitlines() if not re.match(r"//\s*(exemplar|keywords|about):", ln))
        out.append(Exemplar(
            name=meta.get("exemplar", path.stem), language=language,
            keywords=tuple(meta.get("keywords", "").lower().split()), about=meta.get("about", ""),
            code=code.strip() + "\n", path=str(path),
        ))
    return tuple(out)


# -- fitting an exemplar to a problem's signature ------------------------------------------------------


def _name_matches(ex_name: str, arg_name: str) -> bool:
    if ex_name == arg_name:
        return True
    if arg_name.endswith("_" + ex_name):
        return True  # norm_weight <- weight, norm_eps <- eps
    aliases = {"num_groups": ("groups",), "eps": ("epsilon", "variance_epsilon")}
    return any(arg_name == a or arg_name.endswith("_" + a) for a in aliases.get(ex_name, ()))


def _base_type(ctype: str) -> str:
    return "".join(ctype.replace("const", " ").split())


def argument_map(ex: Exemplar, scaffold: Scaffold) -> dict[str, str] | None:
    """exemplar parameter name -> problem argument name, when every parameter of each side has
    exactly one partner of the same type (inputs may also pair by position); else None."""
    ex_params = ex.params()
    args = list(scaffold.args)
    if not ex_params or len(ex_params) != len(args):
        return None
    mapping: dict[str, str] = {}
    used: set[str] = set()
    ex_inputs = [n for t, n in ex_params if t.startswith("const") and t.replace(" ", "").endswith("*") and n in ("x", "a", "b", "input")]
    arg_inputs = [a.name for a in args if a.role == "input"]
    for ctype, name in ex_params:
        partner = None
        for a in args:
            if a.name in used or _base_type(a.ctype) != _base_type(ctype):
                continue
            if _name_matches(name, a.name):
                partner = a.name
                break
        if partner is None and name in ex_inputs and len(ex_inputs) == len(arg_inputs):
            cand = arg_inputs[ex_inputs.index(name)]
            a = next(x for x in args if x.name == cand)
            if cand not in used and _base_type(a.ctype) == _base_type(ctype):
                partner = cand
        if partner is None:
            return None
        mapping[name] = partner
        used.add(partner)
    return mapping if len(used) == len(args) else None


def adapt(ex: Exemplar, scaffold: Scaffold) -> str | None:
    """The exemplar rewritten for this problem (its entry point takes the problem's exact signature,
    its parameters renamed), or None when the signatures do not correspond one to one."""
    if ex.language != scaffold.language:
        return None
    mapping = argument_map(ex, scaffold)
    if mapping is None:
        return None
    code = ex.code
    m = re.search(rf'extern\s+"C"\s+void\s+{FUNCTION}\s*\(([^)]*)\)\s*\{{', code, re.S)
    if not m:
        return None
    head, body = code[:m.start()], code[m.end():]
    # rename inside the entry point's body only (helpers keep their own parameter names)
    depth, end = 1, 0
    for i, ch in enumerate(body):
        depth += ch == "{"
        depth -= ch == "}"
        if depth == 0:
            end = i
            break
    inner, rest = body[:end], body[end:]
    renames = {k: v for k, v in mapping.items() if k != v}
    if renames:
        pattern = re.compile(r"\b(" + "|".join(re.escape(k) for k in renames) + r")\b")
        inner = pattern.sub(lambda mm: renames[mm.group(1)], inner)
    sig = scaffold.signature()
    return head + sig + " {" + inner + rest


# -- retrieval ---------------------------------------------------------------------------------------


def _problem_words(scaffold: Scaffold, source: str) -> set[str]:
    words = set(scaffold.ops)
    words |= {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*|\d+\.\d+", source)}
    split = set()
    for w in words:
        split |= set(w.split("_"))
    return words | split


def rank(scaffold: Scaffold, source: str, language: str | None = None) -> list[tuple[float, Exemplar, str | None]]:
    """Exemplars by similarity to the problem, best first: (score, exemplar, adapted code or None).

    Score: keyword overlap (rare keywords weigh more) plus a bonus when the exemplar's signature
    maps one to one onto the problem's (then it can be adapted exactly and used as a seed)."""
    lang = language or scaffold.language
    exemplars = load_exemplars(lang)
    if not exemplars:
        return []
    freq: dict[str, int] = {}
    for ex in exemplars:
        for k in set(ex.keywords):
            freq[k] = freq.get(k, 0) + 1
    words = _problem_words(scaffold, source)
    out = []
    for ex in exemplars:
        score = sum(math.log(1 + len(exemplars) / freq[k]) for k in set(ex.keywords) if k in words)
        adapted = adapt(ex, scaffold)
        if adapted is not None:
            score += 2.0
        out.append((score, ex, adapted))
    out.sort(key=lambda t: (-t[0], t[1].name))
    return out


def best_exemplar(scaffold: Scaffold, source: str) -> tuple[Exemplar, str] | None:
    """The most similar exemplar and the code to show (adapted when it fits, else as written)."""
    ranked = rank(scaffold, source)
    if not ranked or ranked[0][0] <= 0:
        return None
    score, ex, adapted = ranked[0]
    return ex, adapted or ex.code


def seed_exemplars(scaffold: Scaffold, source: str, limit: int = 1, min_score: float = 3.0) -> list[tuple[Exemplar, str]]:
    """Exemplars to place in the tree as seeds: those that adapt exactly and clearly match."""
    return [(ex, code) for score, ex, code in rank(scaffold, source) if code is not None and score >= min_score][:limit]
