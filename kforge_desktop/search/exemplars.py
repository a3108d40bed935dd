"""Exemplars: correct, well-written kernels of common families, written by us, in the native format.

Why: a small model copies well and writes C++ from scratch badly. An exemplar of the same family,
with its arguments renamed to this problem's signature, is (a) shown in the prompt as the thing to
adapt, and (b) where its signature fits the problem exactly, placed in the tree as a ``seed`` node
(evaluated like any candidate, never counted as an LLM candidate) that edits then start from.

Files live in ``resources/exemplars/<language>/*.cpp|*.cu``; a short comment header names them:

    // exemplar: rms_norm
    // keywords: rmsnorm rms rsqrt pow mean norm eps weight
    // ops: pow mean add rsqrt mul rms_norm
    // about: one sentence on what it computes

``ops`` names the PyTorch operators the exemplar computes. An exemplar is placed as a seed only when
it covers every operator the problem's forward runs: GroupNorm's exemplar is not a seed for
GroupNorm + SiLU (it would be a wrong first node). It is then shown in the prompt with the missing
operators named, which turns a from-scratch kernel into a one-line change for the model.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from .. import paths
from ..csource.items import function_head, function_text, split_items
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
    ops: tuple[str, ...] = ()  # the PyTorch operators it computes (empty: not stated)
    output: str = "like-input"  # its output's size: like-input | per-row (one value per row)

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
        meta = dict(re.findall(r"^//\s*(exemplar|keywords|ops|output|about):\s*(.*)$", text, re.M))
        code = "\n".join(ln for ln in text.splitlines() if not re.match(r"//\s*(exemplar|keywords|ops|output|about):", ln))
        out.append(Exemplar(
            name=meta.get("exemplar", path.stem), language=language,
            keywords=tuple(meta.get("keywords", "").lower().split()), about=meta.get("about", ""),
            code=code.strip() + "\n", path=str(path), ops=tuple(meta.get("ops", "").split()),
            output=meta.get("output", "like-input").strip(),
        ))
    # an exemplar may call another's shared helper (silu_mul: softmax's fast_exp) without repeating it
    return tuple(replace(ex, code=provide_helpers(ex.code, language, tuple(out))[0]) for ex in out)


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


def forward_constant(source: str) -> float | None:
    """The one small float literal (an epsilon such as ``1e-6``) in the reference's ``forward``, when
    there is exactly one; None otherwise."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    found = set()
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef) and cls.name == "Model":
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "forward":
                    found |= {n.value for n in ast.walk(fn) if isinstance(n, ast.Constant)
                              and isinstance(n.value, float) and 0.0 < n.value < 1e-2}
    return found.pop() if len(found) == 1 else None


def argument_map(ex: Exemplar, scaffold: Scaffold, source: str = "") -> dict[str, str] | None:
    """exemplar parameter name -> problem argument name, when every parameter of each side has
    exactly one partner of the same type (inputs may also pair by position); else None.

    An exemplar's ``eps`` with no partner maps to ``=<literal>`` when the reference writes its
    epsilon as a literal in ``forward`` (``+ 1e-6``): the adapted kernel declares it as a constant."""
    ex_params = ex.params()
    args = list(scaffold.args)
    arg_names = {a.name for a in args}
    if source and len(ex_params) == len(args) + 1 and "eps" not in arg_names and any(
            n == "eps" and t == "float" for t, n in ex_params):
        value = forward_constant(source)
        if value is not None:
            mapping = _pair([(t, n) for t, n in ex_params if n != "eps"], args)
            if mapping is not None:
                mapping["eps"] = f"={value!r}"
            return mapping
    if not ex_params or len(ex_params) != len(args):
        return None
    return _pair(ex_params, args)


def _pair(ex_params: list[tuple[str, str]], args: list) -> dict[str, str] | None:
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


def adapt(ex: Exemplar, scaffold: Scaffold, source: str = "") -> str | None:
    """The exemplar rewritten for this problem (its entry point takes the problem's exact signature,
    its parameters renamed), or None when the signatures do not correspond one to one."""
    if ex.language != scaffold.language:
        return None
    mapping = argument_map(ex, scaffold, source)
    if mapping is None:
        return None
    constants = {k: v[1:] for k, v in mapping.items() if v.startswith("=")}
    mapping = {k: v for k, v in mapping.items() if not v.startswith("=")}
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
    decls = "".join(f"\n    const float {k} = {v}f;  // written as a literal in the reference's forward" for k, v in constants.items())
    return head + sig + " {" + decls + inner + rest


def missing_ops(ex: Exemplar, scaffold: Scaffold) -> list[str]:
    """The problem's operators (in the order its forward runs them) that the exemplar does not compute;
    empty when it covers them all or when either side does not say."""
    if not ex.ops or not scaffold.aten_ops:
        return []
    covered = set(ex.ops)
    out: list[str] = []
    for op in scaffold.aten_ops:
        name = op.lstrip("_").removeprefix("native_")
        if op not in covered and name not in covered and op not in out:
            out.append(op)
    return out


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
        adapted = adapt(ex, scaffold, source)
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


# operators applied to every output value, as C expressions of the value ``v`` (per language): when an
# exemplar leaves out only these, completing it is a one-line change the model is asked for by name
EPILOGUE_OPS = {
    # on the CPU, exp is the exemplars' vectorizable fast_exp (``provide_helpers`` adds its definition):
    # a loop that calls std::exp is not vectorized, and GroupNorm + SiLU ran at a third of eager with it
    "cpp": {"silu": "v / (1.0f + fast_exp(-v))", "relu": "std::max(v, 0.0f)", "sigmoid": "1.0f / (1.0f + fast_exp(-v))",
            "tanh": "std::tanh(v)", "gelu": "0.5f * v * (1.0f + std::erf(v * 0.70710678f))", "neg": "-v",
            "abs": "std::fabs(v)", "exp": "fast_exp(v)", "hardswish": "v * std::min(std::max(v + 3.0f, 0.0f), 6.0f) / 6.0f"},
    "cuda": {"silu": "v / (1.0f + expf(-v))", "relu": "fmaxf(v, 0.0f)", "sigmoid": "1.0f / (1.0f + expf(-v))",
             "tanh": "tanhf(v)", "gelu": "0.5f * v * (1.0f + erff(v * 0.70710678f))", "neg": "-v", "abs": "fabsf(v)",
             "exp": "expf(v)", "hardswish": "v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f"},
}


def epilogue_missing(ex: Exemplar, scaffold: Scaffold) -> list[str]:
    """The missing operators when all of them are elementwise epilogues the problem applies last
    (GroupNorm's exemplar for GroupNorm + SiLU); empty otherwise."""
    missing = missing_ops(ex, scaffold)
    table = EPILOGUE_OPS.get(scaffold.language, {})
    if not missing or any(op not in table for op in missing):
        return []
    tail = list(scaffold.aten_ops[-len(missing):])
    return missing if tail == missing else []


def output_fits(ex: Exemplar, scaffold: Scaffold) -> bool:
    """Whether the exemplar writes as many values as the problem's one output holds."""
    if len(scaffold.outputs) != 1:
        return False
    inputs = [a.name for a in scaffold.args if a.role == "input"]
    out, primary = scaffold.shapes.get(scaffold.outputs[0]), scaffold.shapes.get(inputs[0]) if inputs else None
    if out is None or not primary:
        return False
    want = math.prod(primary) if ex.output == "like-input" else math.prod(primary[:-1])
    return math.prod(out) == want


def seed_exemplars(scaffold: Scaffold, source: str, limit: int = 1, min_score: float = 3.0) -> list[tuple[Exemplar, str]]:
    """Exemplars to place in the tree as seeds: those that adapt exactly, clearly match and compute
    every operator of the problem, or all but an elementwise epilogue at the end (that seed is
    incomplete on purpose: its repair asks the model to add exactly that). An exemplar that leaves
    out anything else is no seed: it would be a wrong first node, and on targets whose output is
    smaller than their input, such as pooling, it would write out of bounds."""
    return [(ex, code) for score, ex, code in rank(scaffold, source)
            if code is not None and score >= min_score and output_fits(ex, scaffold)
            and (not missing_ops(ex, scaffold) or epilogue_missing(ex, scaffold))][:limit]


def exemplar_named(name: str, language: str) -> Exemplar | None:
    return next((ex for ex in load_exemplars(language) if ex.name == name), None)


def output_writer(code: str, scaffold: Scaffold) -> str:
    """The function that stores the output values: a helper that assigns through a non-const float
    pointer parameter, else the entry point."""
    for it in split_items(code):
        if it.kind != "function" or it.name == scaffold.function:
            continue
        head = it.text[: it.text.index("{")]
        outs = re.findall(r"(?<!const )\bfloat\s*\*\s*(?:__restrict__\s+)?(\w+)", head)
        if any(re.search(rf"\b{o}\s*\[[^\]]*\]\s*=(?!=)", it.text) for o in outs):
            return it.name
    return scaffold.function


# helpers an exemplar defines that any kernel may call (by name, source exemplar): a kernel that calls
# one without defining it gets the exemplar's definition
SHARED_HELPERS = {"cpp": {"fast_exp": "row_softmax"}}
PROVIDED = "provided (a float exp that vectorizes): call it, do not define it"  # how prompts name them


def provide_helpers(kernel: str, language: str, library: tuple[Exemplar, ...] | None = None) -> tuple[str, list[str]]:
    """``kernel`` with the definition of every shared helper it calls but does not define, placed
    above the first function that calls it; and the names added. ``library``: the exemplars to take
    the definitions from (default: the loaded ones)."""
    added = []
    for name, source in SHARED_HELPERS.get(language, {}).items():
        if not re.search(rf"(?<![\w.:]){name}\s*\(", kernel) or function_text(kernel, name) is not None:
            continue
        ex = next((e for e in (load_exemplars(language) if library is None else library) if e.name == source), None)
        helper = function_text(ex.code, name) if ex is not None else None
        if helper is None:
            continue
        caller = next((it for it in split_items(kernel) if it.kind == "function"
                       and re.search(rf"(?<![\w.:]){name}\s*\(", it.text)), None)
        if caller is None:
            continue
        at = kernel.index(caller.text)  # items carry their comments: above the caller's comment
        kernel = kernel[:at] + helper.strip() + "\n\n" + kernel[at:]
        if "#include <cstring>" not in kernel:  # for std::memcpy, after the other includes
            includes = list(re.finditer(r"^#include[^\n]*\n", kernel, re.M))
            at = includes[-1].end() if includes else 0
            kernel = kernel[:at] + "#include <cstring>\n" + kernel[at:]
        added.append(name)
    return kernel, added


def collapse_helpers(code: str, language: str) -> str:
    """``code`` as a prompt shows it: the definition of each shared helper (and its comment) becomes one
    comment line that says it is provided. The model calls it instead of copying 20 lines of
    arithmetic into every answer (the 0.5B model ran out of tokens copying silu_mul's), and
    ``provide_helpers`` puts the definition back into the kernel it writes."""
    for name in SHARED_HELPERS.get(language, {}):
        text, head = function_text(code, name), function_head(code, name)
        if text is None or head is None:
            continue
        code = code.replace(text.strip(), f"// {head[:-1].strip()};  {PROVIDED}", 1)
    return code
