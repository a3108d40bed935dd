"""Exemplars: correct, well-written kernels of common families, in the native format.

Why: a small model copies well and writes C++ from scratch badly. An exemplar of the same family,
fitted to this problem's signature (``fitting``), is (a) shown in the prompt as the thing to adapt,
and (b) where it fits the problem and computes all of it, placed in the tree as a ``seed`` node
(evaluated like any candidate, never counted as an LLM candidate) that edits then start from.

Two libraries: ours in ``resources/exemplars/<language>/*.cpp|*.cu``, and the user's kernel memory
(``memory``: kernels the user's own sessions verified). Both use one comment header:

    // exemplar: rms_norm
    // keywords: rmsnorm rms rsqrt pow mean norm eps weight
    // ops: pow mean add rsqrt mul rms_norm
    // needs: masked_fill|where        (optional) operators a problem must run to be of this family
    // optional: weight=1              (optional) parameters a problem may lack, with their neutral value
    // output: per-row                 (optional) one value per row instead of one per input value
    // about: one sentence on what it computes

Retrieval is by what the op computes: the operators the problem's forward runs (``problem_ops``)
against each exemplar's ``ops``, then keywords, then whether it fits the signature. An exemplar is
a seed only when it covers every operator the problem's forward runs (or all but an elementwise
epilogue) and its ``needs`` are met: the masked softmax is never a seed for a softmax without a mask.
When nothing fits exactly, the nearest family still guides the prompt, and ``differences`` says what
this problem computes otherwise.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from .. import paths
from ..csource.items import calls, function_head, function_text, insert_before_caller, split_items
from ..kernels.native import parse_exports
from .differences import unexplained_factors
from .fitting import adapt, argument_map, fit, forward_constant  # noqa: F401  (the fitting API, re-exported)
from .memory import load_memory
from .scaffold import FUNCTION, Scaffold

SUFFIX = {"cpp": ".cpp", "cuda": ".cu"}
HEADER = re.compile(r"^//\s*(exemplar|keywords|ops|needs|optional|output|about|problem|speedup|device):\s*(.*)$", re.M)


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
    needs: tuple[str, ...] = ()  # operators a problem must run ("a|b": either) for this family to apply
    optional: tuple[tuple[str, float], ...] = ()  # parameters a problem may lack, and their neutral value
    origin: str = "builtin"  # builtin | memory (verified in one of the user's sessions)
    problem: str = ""  # memory: the problem it was verified on

    def params(self) -> list[tuple[str, str]]:
        """(C type, name) of the entry point's parameters, the CUDA stream excluded."""
        exports = parse_exports(self.code)
        if FUNCTION not in exports:
            return []
        return [(t, n) for t, n in exports[FUNCTION][1] if not t.endswith("cudaStream_t")]


def parse_exemplar(text: str, path: Path | str, language: str, origin: str = "builtin") -> Exemplar:
    """An exemplar from a file's text: its header fields and the kernel without them."""
    meta = dict(HEADER.findall(text))
    code = "\n".join(ln for ln in text.splitlines() if not HEADER.match(ln))
    optional = []
    for item in meta.get("optional", "").split():
        name, _, value = item.partition("=")
        try:
            optional.append((name, float(value or 0)))
        except ValueError:
            continue
    return Exemplar(
        name=meta.get("exemplar", Path(path).stem), language=language,
        keywords=tuple(meta.get("keywords", "").lower().split()), about=meta.get("about", ""),
        code=code.strip() + "\n", path=str(path), ops=tuple(meta.get("ops", "").split()),
        output=meta.get("output", "like-input").strip() or "like-input", needs=tuple(meta.get("needs", "").split()),
        optional=tuple(optional), origin=origin, problem=meta.get("problem", "").strip(),
    )


def exemplar_dir() -> Path:
    return paths.RESOURCES / "exemplars"


@lru_cache(maxsize=4)
def load_exemplars(language: str = "cpp") -> tuple[Exemplar, ...]:
    """Our own exemplars of ``language`` (the user's kernel memory is ``library``'s)."""
    folder = exemplar_dir() / language
    if language not in SUFFIX or not folder.is_dir():
        return ()
    out = [parse_exemplar(path.read_text(), path, language) for path in sorted(folder.glob("*" + SUFFIX[language]))]
    # an exemplar may call another's shared helper (silu_mul: softmax's fast_exp) without repeating it
    return tuple(replace(ex, code=provide_helpers(ex.code, language, tuple(out))[0]) for ex in out)


def library(language: str, memory: bool = True) -> tuple[Exemplar, ...]:
    """Everything retrieval chooses from: our exemplars, then (``memory``) the user's verified kernels."""
    return load_exemplars(language) + (load_memory(language) if memory else ())


# -- what a problem computes ---------------------------------------------------------------------------


def op_name(op: str) -> str:
    """An operator's family name: ``_softmax`` and ``softmax``, ``native_layer_norm`` and ``layer_norm``."""
    return op.lstrip("_").removeprefix("native_")


def problem_ops(scaffold: Scaffold) -> tuple[str, ...]:
    """The operators the reference runs, in order, where the recorded arguments change what one
    computes: GELU with ``approximate="tanh"`` is ``gelu_tanh`` (the exact GELU is ``gelu``)."""
    tanh_gelu = ("gelu", "tanh") in scaffold.op_args
    return tuple("gelu_tanh" if op == "gelu" and tanh_gelu else op for op in scaffold.aten_ops)


def needs_met(ex: Exemplar, scaffold: Scaffold) -> bool:
    """Whether the problem runs every operator the exemplar's family needs (one of each ``a|b``)."""
    have = {op_name(op) for op in problem_ops(scaffold)}
    return all(any(op_name(alt) in have for alt in need.split("|")) for need in ex.needs)


def missing_ops(ex: Exemplar, scaffold: Scaffold) -> list[str]:
    """The problem's operators (in the order its forward runs them) that the exemplar does not compute;
    empty when it covers them all or when either side does not say."""
    if not ex.ops or not scaffold.aten_ops:
        return []
    covered = set(ex.ops) | {op_name(o) for o in ex.ops}
    out: list[str] = []
    for op in problem_ops(scaffold):
        if op not in covered and op_name(op) not in covered and op not in out:
            out.append(op)
    return out


ACTIVATIONS = {"gelu", "gelu_tanh", "silu", "relu", "sigmoid", "tanh", "hardswish", "leaky_relu", "erf", "mish"}
# what an activation is made of (an exemplar lists the parts it computes among its ops)
ACTIVATION_PARTS = {"silu": ("sigmoid",), "gelu": ("erf", "tanh", "gelu_tanh"), "gelu_tanh": ("tanh", "gelu"),
                    "mish": ("tanh", "softplus")}


def extra_activations(ex: Exemplar, scaffold: Scaffold) -> list[str]:
    """The activations the exemplar applies that the problem does not (a GroupNorm+SiLU kernel for a
    plain GroupNorm, a bias+GELU kernel for an add): such an exemplar computes something else."""
    if not ex.ops or not scaffold.aten_ops:
        return []
    have = {op_name(op) for op in problem_ops(scaffold)}
    parts = {part for h in have for part in ACTIVATION_PARTS.get(h, ())}  # silu's sigmoid is no extra
    return [o for o in dict.fromkeys(op_name(o) for o in ex.ops) if o in ACTIVATIONS and o not in have | parts
            and not have & set(ACTIVATION_PARTS.get(o, ()))]  # a GELU written out with tanh is a GELU


# -- retrieval ---------------------------------------------------------------------------------------


def _problem_words(scaffold: Scaffold, source: str) -> set[str]:
    words = set(scaffold.ops) | set(problem_ops(scaffold))
    words |= {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*|\d+\.\d+", source)}
    split = set()
    for w in words:
        split |= set(w.split("_"))
    return words | split


def op_coverage(ex: Exemplar, scaffold: Scaffold) -> float:
    """The share of the problem's distinct operators the exemplar computes (0 when either does not say)."""
    have = {op_name(op) for op in problem_ops(scaffold)}
    if not have or not ex.ops:
        return 0.0
    covered = {op_name(o) for o in ex.ops}
    return len(have & covered) / len(have)


def rank(scaffold: Scaffold, source: str, language: str | None = None, memory: bool = True,
         exemplars: tuple[Exemplar, ...] | None = None) -> list[tuple[float, Exemplar, str | None]]:
    """Exemplars by similarity to the problem, best first: (score, exemplar, adapted code or None).

    Score: what the op computes first (the share of the problem's operators the exemplar covers,
    up to 4, and 1 more when it covers them all), then keyword overlap (rare keywords weigh more),
    2 when it fits the problem's signature (then it can be adapted and used as a seed), a
    penalty of 6 when the problem lacks an operator the family needs (a softmax without a mask for
    the masked softmax), and one of 1.5 when it writes another number of values than the problem's
    output holds (3.5 when it also computes none of the problem's operators). Among equals, a kernel from the user's memory comes first: it was verified
    on this machine, on a problem of this family. ``exemplars``: the library to rank (default:
    ``library(language, memory)``)."""
    lang = language or scaffold.language
    pool = exemplars if exemplars is not None else library(lang, memory)
    if not pool:
        return []
    freq: dict[str, int] = {}
    for ex in pool:
        for k in set(ex.keywords):
            freq[k] = freq.get(k, 0) + 1
    words = _problem_words(scaffold, source)
    out = []
    for ex in pool:
        score = sum(math.log(1 + len(pool) / freq[k]) for k in set(ex.keywords) if k in words)
        coverage = op_coverage(ex, scaffold)
        score += 4.0 * coverage + (1.0 if coverage == 1.0 else 0.0)
        met = needs_met(ex, scaffold)
        adapted = adapt(ex, scaffold, source) if met else None
        if not met:
            score -= 6.0
        if adapted is not None:
            score += 2.0
        if not output_fits(ex, scaffold) and not (ex.output == "per-row" and scaffold.reduced_dim() is not None):
            # it writes another number of values than the problem's output holds (a softmax's row for a
            # per-row variance): a family that writes the right amount comes first, and one that also
            # computes none of the problem's operators (a GELU for a pooling) is no guide at all. A
            # reduction of rows is the nearest guide for a reduction over another dimension
            score -= 1.5 + (2.0 if coverage == 0.0 else 0.0)
        if ex.origin == "memory":
            score += 0.5
        out.append((score, ex, adapted))
    out.sort(key=lambda t: (-t[0], t[1].origin != "memory", t[1].name))
    return out


def best_exemplar(scaffold: Scaffold, source: str, memory: bool = True) -> tuple[Exemplar, str] | None:
    """The most similar exemplar and the code to show (adapted when it fits, else as written). For a
    reduction over a dimension other than the last, the sum over that dimension written for this
    problem's shapes (``reduction_guide``), unless a kernel of the user's memory fits exactly."""
    ranked = rank(scaffold, source, memory=memory)
    guide = reduction_guide(scaffold)
    if guide is not None and not (ranked and ranked[0][1].origin == "memory" and ranked[0][2] is not None):
        return guide, guide.code
    if not ranked or ranked[0][0] <= 0:
        return None
    score, ex, adapted = ranked[0]
    return ex, adapted or with_problem_signature(ex.code, scaffold)


def reduction_guide(scaffold: Scaffold) -> Exemplar | None:
    """The example for a reduction over a middle dimension (``x.mean(dim=1)`` of [8, 32, 64]): the sum
    over that dimension, in the problem's exact signature, accumulating a row of ``inner`` partial sums
    so that the innermost loop reads memory in order. The row-reduction exemplar is no guide there: the
    default model kept its loop over ``rows`` and wrote past the smaller output (the test half's
    mean_over_dim: 8 of 8 candidates crashed). None for any other problem, and for CUDA."""
    k = scaffold.reduced_dim()
    if k is None or scaffold.language != "cpp":
        return None
    x = next(a.name for a in scaffold.args if a.role == "input")
    dims = scaffold.shapes[x]
    if k == len(dims) - 1:
        return None  # a reduction of rows: the row exemplar is the guide
    sizes = {a.name for a in scaffold.args if a.role == "size"}

    def size(lo: int, hi: int) -> str:
        names = [f"{x}_size{d}" for d in range(lo, hi)]
        if names and all(n in sizes for n in names):
            return " * ".join(names)
        return str(math.prod(dims[lo:hi]))
    out = scaffold.outputs[0]
    code = (
        "#include <cstdint>\n\n"
        "// acc[i] += xr[i] for i in [0, inner)\n"
        "static inline void add_row(float* acc, const float* xr, int64_t inner) {\n"
        "    #pragma omp simd\n"
        "    for (int64_t i = 0; i < inner; ++i) acc[i] += xr[i];\n"
        "}\n\n"
        f"{scaffold.signature()} {{\n"
        f"    // {x} as [outer, n, inner]: dimension {k} is the one reduced\n"
        f"    const int64_t outer = {size(0, k)}, n = {size(k, k + 1)}, inner = {size(k + 1, len(dims))};\n"
        "    #pragma omp parallel for schedule(static)\n"
        "    for (int64_t o = 0; o < outer; ++o) {\n"
        f"        float* acc = {out} + o * inner;  // the inner outputs of this o\n"
        "        for (int64_t i = 0; i < inner; ++i) acc[i] = 0.0f;\n"
        f"        for (int64_t j = 0; j < n; ++j) add_row(acc, {x} + (o * n + j) * inner, inner);\n"
        "    }\n"
        "}\n")
    return Exemplar(name="sum_over_dim", language="cpp", keywords=("sum", "reduce", "reduction", "dim"),
                    about=f"the sum over dimension {k} of {x}, written for this problem's shapes", code=code,
                    path="(written for this problem)", ops=("sum",), output="reduced")


def _ctype(text: str) -> str:
    return "".join(text.replace("__restrict__", "").split())


def with_problem_signature(code: str, scaffold: Scaffold) -> str:
    """An example of a nearby family declared with the problem's exact entry signature, where each
    of its parameters is one of the problem's (same name and type, same order) and the problem only
    adds some (a ``scale``, an ``eps``): the body is unchanged, the added parameters unused. The
    default model keeps the example's parameter list: on dev/bias_leaky_relu_scale six of eight
    answers dropped the problem's ``scale`` and failed the signature check. Any other example is
    returned as written."""
    found = parse_exports(code).get(scaffold.function)
    if found is None:
        return code
    have = [(_ctype(t), n) for t, n in found[1]]
    want = [(_ctype(a.ctype), a.name) for a in scaffold.args]
    if scaffold.language == "cuda":
        want.append(("cudaStream_t", "stream"))
    it = iter(want)
    if len(have) >= len(want) or not all(p in it for p in have):  # not an ordered subset
        return code
    m = re.search(rf'extern\s+"C"\s+(?:__host__\s+)?void\s+{re.escape(scaffold.function)}\s*\([^)]*\)', code)
    return code if m is None else code[: m.start()] + scaffold.signature() + code[m.end():]


# operators applied to every output value, as C expressions of the value ``v`` (per language): when an
# exemplar leaves out only these, completing it is a one-line change the model is asked for by name
EPILOGUE_OPS = {
    # on the CPU, exp is the exemplars' vectorizable fast_exp (``provide_helpers`` adds its definition):
    # a loop that calls std::exp is not vectorized, and GroupNorm + SiLU ran at a third of eager with it
    "cpp": {"silu": "v / (1.0f + fast_exp(-v))", "relu": "std::max(v, 0.0f)", "sigmoid": "1.0f / (1.0f + fast_exp(-v))",
            "tanh": "std::tanh(v)", "gelu": "0.5f * v * (1.0f + std::erf(v * 0.70710678f))", "neg": "-v",
            "abs": "std::fabs(v)", "exp": "fast_exp(v)", "hardswish": "v * std::min(std::max(v + 3.0f, 0.0f), 6.0f) / 6.0f",
            "gelu_tanh": "v / (1.0f + fast_exp(-1.5957691216f * (v + 0.044715f * v * v * v)))"},
    "cuda": {"silu": "v / (1.0f + expf(-v))", "relu": "fmaxf(v, 0.0f)", "sigmoid": "1.0f / (1.0f + expf(-v))",
             "tanh": "tanhf(v)", "gelu": "0.5f * v * (1.0f + erff(v * 0.70710678f))", "neg": "-v", "abs": "fabsf(v)",
             "exp": "expf(v)", "hardswish": "v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f",
             "gelu_tanh": "0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)))"},
}


def epilogue_missing(ex: Exemplar, scaffold: Scaffold) -> list[str]:
    """The missing operators when all of them are elementwise epilogues the problem applies last
    (GroupNorm's exemplar for GroupNorm + SiLU); empty otherwise."""
    missing = missing_ops(ex, scaffold)
    table = EPILOGUE_OPS.get(scaffold.language, {})
    if not missing or any(op not in table for op in missing):
        return []
    tail = list(problem_ops(scaffold)[-len(missing):])
    return missing if tail == missing else []


def output_fits(ex: Exemplar, scaffold: Scaffold) -> bool:
    """Whether the exemplar writes as many values as the problem's one output holds."""
    if len(scaffold.outputs) != 1:
        return False
    inputs = [a.name for a in scaffold.args if a.role == "input"]
    out, primary = scaffold.shapes.get(scaffold.outputs[0]), scaffold.shapes.get(inputs[0]) if inputs else None
    if out is None or not primary:
        return False
    if ex.output == "reduced":  # written for this problem's reduction
        return scaffold.reduced_dim() is not None
    if ex.output not in ("like-input", "per-row"):
        return False
    want = math.prod(primary) if ex.output == "like-input" else math.prod(primary[:-1])
    return math.prod(out) == want


def seed_exemplars(scaffold: Scaffold, source: str, limit: int = 1, min_score: float = 3.0,
                   memory: bool = True) -> list[tuple[Exemplar, str]]:
    """Exemplars to place in the tree as seeds: those that adapt exactly, clearly match, meet their
    family's ``needs``, apply no activation the problem lacks, and compute every operator of the
    problem, or all but an elementwise epilogue at the end (that seed is incomplete on purpose: its
    repair asks the model to add exactly that).
    An exemplar that leaves out anything else (a constant factor included: quick GELU's 1.702 beside
    SiLU) is no seed: it would be a wrong first node, and on
    targets whose output is smaller than their input, such as pooling, it would write out of bounds.

    ``limit`` counts our exemplars; the best fitting kernel of the user's memory comes as well."""
    fitting = [(ex, code) for score, ex, code in rank(scaffold, source, memory=memory)
               if code is not None and score >= min_score and output_fits(ex, scaffold) and needs_met(ex, scaffold)
               and (not missing_ops(ex, scaffold) or epilogue_missing(ex, scaffold))
               and not extra_activations(ex, scaffold) and not unexplained_factors(ex, scaffold, source)]
    guide = reduction_guide(scaffold)  # the sum over a middle dimension, written for this problem
    if guide is not None and not missing_ops(guide, scaffold) and not unexplained_factors(guide, scaffold, source):
        fitting.insert(0, (guide, guide.code))
    ours = [(ex, code) for ex, code in fitting if ex.origin != "memory"][:limit]
    remembered = [(ex, code) for ex, code in fitting if ex.origin == "memory" and not missing_ops(ex, scaffold)][:1]
    return remembered + ours


def exemplar_named(name: str, language: str) -> Exemplar | None:
    """Our exemplar, else the remembered kernel, called ``name``."""
    return next((ex for ex in library(language) if ex.name == name), None)


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
# one without defining it gets the exemplar's definition (fast_exp calls fast_exp_neg: listed after it, the
# helper a definition needs lands above it)
SHARED_HELPERS = {"cpp": {"fast_exp": "row_softmax", "fast_exp_neg": "row_softmax"}}
PROVIDED = "provided (a float exp that vectorizes): call it, do not define it"  # how prompts name them
# what a shared helper computes only under a condition, said on its line: shown "provided" like fast_exp, the
# uncapped exp could be called on a value above 88 (exp(89) is infinite in float; fast_exp_neg returns a finite
# wrong value there), and the evaluator's inputs would not show it
CONDITIONS = {"fast_exp_neg": "only for x <= 0, a value minus the maximum of values that include it (fast_exp for any x); "}
_PROVIDED_LINE = re.compile(rf"^[^\n]*{re.escape(PROVIDED)}[^\n]*(?:\n|$)", re.M)


def provide_helpers(kernel: str, language: str, library: tuple[Exemplar, ...] | None = None) -> tuple[str, list[str]]:
    """``kernel`` with the definition of every shared helper it calls but does not define, placed
    above the first function that calls it; and the names added. ``library``: the exemplars to take
    the definitions from (default: the loaded ones). The prompt's one-line stand-in for a helper
    (``collapse_helpers``) is dropped wherever the answer copied it: without its ``//`` (seen on
    dev/causal_scaled_softmax) it is a prototype followed by words, which does not compile."""
    added = []
    kernel = _PROVIDED_LINE.sub("", kernel)
    for name, source in SHARED_HELPERS.get(language, {}).items():
        if not calls(kernel, name) or function_text(kernel, name) is not None:
            continue
        ex = next((e for e in (load_exemplars(language) if library is None else library) if e.name == source), None)
        helper = function_text(ex.code, name) if ex is not None else None
        placed = insert_before_caller(kernel, name, helper) if helper is not None else None
        if placed is None:
            continue
        kernel = placed
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
    ``provide_helpers`` puts the definition back into the kernel it writes. A shared helper that only other
    shared helpers call (fast_exp's fast_exp_neg in a SiLU), or none (fast_exp beside the row softmax's
    fast_exp_neg), is left out: shown, it is one more name to call, and fast_exp_neg is wrong above exp(88)."""
    shared = SHARED_HELPERS.get(language, {})
    own = "\n".join(it.text for it in split_items(code) if it.kind == "function" and it.name not in shared)
    for name in shared:
        text, head = function_text(code, name), function_head(code, name)
        if text is None or head is None:
            continue
        if calls(own, name):
            code = code.replace(text.strip(), f"// {head[:-1].strip()};  {CONDITIONS.get(name, '')}{PROVIDED}", 1)
        else:  # left out with the blank lines after it
            code = re.sub(re.escape(text.strip()) + r"\n*", "", code, count=1)
    return code
