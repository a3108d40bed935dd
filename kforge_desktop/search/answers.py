"""From the model's answer to a candidate: extract the code, fit it into the scaffold, fix what is
mechanical, and recognise a repeat of an earlier kernel.

A small model's answer is rarely a clean file: the function may come with copies of helpers, with
torch includes and bindings, or only as the one helper an edit changed. What can be repaired without
judgement is repaired here (a changed helper is merged back into its parent, unreachable code is
dropped, shared helpers are provided, compiler-reported slips are fixed) so that a candidate fails
only for what the model actually got wrong. Before any build, ``g++``/``nvcc -fsyntax-only`` turns
most compile errors into a verdict in a fraction of a second.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..csource.autofix import autofix
from ..csource.items import TORCH_INCLUDE, merge_functions, prune_unreachable, restore_helpers
from ..csource.mends import BLOCK_NOTE, fill_elided_rows
from ..csource.normalize import normalize_code
from ..kernels.native import parse_exports, syntax_check
from ..kernels.verdict import Verdict
from ..llm.extract import extract_code
from ..llm.generator import Generation
from ..store.records import NodeRecord
from .exemplars import provide_helpers
from .scaffold import FUNCTION, PRELUDE, Scaffold, clean_kernel, kernel_from_answer, kernel_of_module


@dataclass(frozen=True)
class Answer:
    """One answer as a node of the tree: its code (empty when there was none), why not, and
    whether it repeats an earlier node."""

    kernel: str
    source: str
    note: str
    language: str
    norm: str
    duplicate_of: int | None
    copied_example: bool = False  # the example kernel its prompt showed, handed back unchanged

    @property
    def state(self) -> str:
        if not self.source:
            return "no_code"
        return "duplicate" if self.duplicate_of or self.copied_example else "pending"


COPIED_EXAMPLE = ("the example kernel handed back unchanged: it computes a similar operation, not this one "
                  "(not evaluated, not counted)")


def example_norm(exemplar_shown: str, language: str) -> str:
    """The normalized form of the example kernel a prompt showed (its shared helpers put back, as they
    are in an answer), to recognise an answer that only copies it; "" when none was shown."""
    if not exemplar_shown or language not in ("cpp", "cuda"):
        return ""
    return normalize_code(provide_helpers(exemplar_shown, language)[0], language)


def shape_answer(gen: Generation, kind: str, target: str, parent: NodeRecord, *, language: str,
                 scaffold: Scaffold | None, fix: bool, find_duplicate: Callable[[str], int | None],
                 example: str = "", lineage: list[str] | None = None) -> Answer:
    """The candidate an answer makes. ``kind`` is the prompt's (whole, edit, repair: a scaffolded
    kernel function; module: a whole ModelNew); ``fix`` applies the compiler-driven fixes.
    ``example``: the normalized example kernel the prompt showed (``example_norm``). When that example
    is not a seed of the tree, an answer equal to it is no candidate: the small model hands the example
    of a nearby family back unchanged (a softmax for a cumulative sum), which is known to be wrong.
    ``lineage``: the kernels of the parent and its ancestors, nearest first, whose helpers an answer
    that calls them without defining them gets back (``restore_helpers``); default: the parent's."""
    finished = gen.finish_reason not in ("length", "repeating")
    kernel, source, note = "", "", ""
    if kind in ("whole", "edit", "repair"):
        wanted = target or FUNCTION
        ex = extract_code(gen.text, function=wanted, language=language, finished=finished)
        code = clean_kernel(ex.code) if ex.ok else None
        if code is None and kind in ("edit", "repair"):
            code = kernel_from_answer(gen.text)  # a changed helper alone is a valid edit
        if code is not None:
            kernel = merge_functions(parent.kernel_source, code) if kind in ("edit", "repair") else code
            elided = 0
            if kind in ("edit", "repair"):
                kernel, elided = fill_elided_rows(kernel, parent.kernel_source)
            kernel, restored = restore_helpers(kernel, [parent.kernel_source] if lineage is None else lineage)
            kernel = prune_unreachable(kernel)
            kernel, provided = provide_helpers(kernel, language)
            kernel, note = autofix_kernel(scaffold, kernel) if fix else (kernel, "")
            if restored:
                note = "; ".join(x for x in (note, f"{', '.join(restored)} put back as an ancestor had it") if x)
            if provided:
                note = "; ".join(x for x in (note, f"{', '.join(provided)} provided") if x)
            if elided:
                note = "; ".join(x for x in (note, "the row's work the answer left as the pattern's comment taken from "
                                             "the parent") if x)
            if BLOCK_NOTE in kernel and BLOCK_NOTE not in parent.kernel_source:
                note = "; ".join(x for x in (note, "each row of a block looped over (the answer handled only the "
                                             "first row of each)") if x)
            source = scaffold.module_source(kernel)
        else:
            note = ex.problem or "the answer had no usable kernel code"
            if gen.finish_reason == "repeating":
                note = (f"the model kept repeating itself and never finished {wanted} (stopped after "
                        f"{gen.completion_tokens} tokens; a larger model loops less)")
    else:
        ex = extract_code(gen.text, finished=finished)
        if ex.ok:
            source = ex.code
            kernel = kernel_of_module(source) or source
        else:
            note = ex.problem or "the answer had no usable code"
    if source:
        norm = normalize_code(kernel if kind != "module" else source, language if kind != "module" else "python")
        dup = find_duplicate(norm)
    else:
        norm, dup = "", None
    copied = bool(source) and dup is None and bool(example) and norm == example
    if copied:
        note = COPIED_EXAMPLE
    node_language = parent.language if kind == "module" and parent.origin != "root" else language
    return Answer(kernel, source, note, node_language, norm, dup, copied)


def autofix_kernel(scaffold: Scaffold, kernel: str) -> tuple[str, str]:
    """Apply the mechanical fixes (``csource.autofix``) for the errors the syntax check shows, round
    by round, and keep the result only when it then compiles; (kernel, the node's note)."""
    current, notes = kernel.strip() + "\n", []
    for _ in range(3):  # each round fixes what the compiler reported; stop when clean or stuck
        err = syntax_check(scaffold.kernel_file(current), scaffold.language)
        if not err:
            break
        fixed = autofix(current, PRELUDE[scaffold.language], err)
        if fixed is None:
            break
        current, notes = fixed[0].strip() + "\n", notes + fixed[1]
    else:
        err = syntax_check(scaffold.kernel_file(current), scaffold.language)
    if not notes or err:
        return kernel, ""  # only a fix that makes the kernel compile is kept
    return current, "autofix: " + ", ".join(dict.fromkeys(notes))


def native_kernel(node: NodeRecord) -> str | None:
    """The native kernel of a candidate that a syntax check can judge alone: None for Triton, and
    for a kernel that includes torch's headers (only the real build can tell)."""
    kernel = kernel_of_module(node.source) if node.language in ("cpp", "cuda") else None
    if kernel and TORCH_INCLUDE.search(kernel):
        return None
    return kernel


def syntax_verdict_of(node: NodeRecord, scaffold: Callable[[], Scaffold | None], device: str) -> Verdict | None:
    """``syntax_verdict`` of a candidate whose native kernel a syntax check can judge alone
    (``native_kernel``); None for the others, and for a kernel that compiles."""
    kernel = native_kernel(node)
    return syntax_verdict(kernel, node.language, scaffold(), device) if kernel else None


def syntax_verdict(kernel: str, language: str, scaffold: Scaffold | None, device: str) -> Verdict | None:
    """g++/nvcc -fsyntax-only on the module's native kernel (0.2 s instead of a build): most
    compile errors of a small model are caught before a worker is involved. None when it compiles."""
    text = scaffold.kernel_file(kernel) if scaffold else PRELUDE.get(language, "") + "\n" + kernel
    t0 = time.perf_counter()
    err = syntax_check(text, language)
    if err is None and scaffold is not None:
        err = signature_mismatch(scaffold, kernel)
    if err is None:
        return None
    first = next((ln.strip() for ln in err.splitlines() if "error" in ln), err.strip().splitlines()[0] if err.strip() else err)
    return Verdict(status="compile_error", reason=f"the kernel does not compile: {first[:200]}",
                   device=device, language=language, build_s=time.perf_counter() - t0,
                   log=err, policy_flags=("syntax_check",))


def signature_mismatch(scaffold: Scaffold, kernel: str) -> str | None:
    """The compiler accepts an entry point with other parameters than the stated signature, and the
    call would then fail at run time ("takes 9 arguments, got 11", or a tensor passed where the
    kernel takes a number: "a Tensor with 131072 elements cannot be converted to Scalar"); say so
    before any build."""
    found = parse_exports(kernel).get(scaffold.function)
    if found is None:
        return None
    want = [a.name for a in scaffold.args] + (["stream"] if scaffold.language == "cuda" else [])
    have = [n for _, n in found[1]]
    where = f"kernel.{'cu' if scaffold.language == 'cuda' else 'cpp'}:1:1: error: {scaffold.function}"
    if len(have) != len(want):
        return (f"{where} takes {len(have)} parameters ({', '.join(have)}) but the stated signature has "
                f"{len(want)} ({', '.join(want)}): keep the signature exactly as given\n")
    for i, (arg, (ctype, name)) in enumerate(zip(scaffold.args, found[1]), 1):
        if arg.ctype.endswith("*") != ctype.strip().endswith("*"):  # a tensor where a number goes, or back
            return (f"{where}'s parameter {i} is `{ctype.replace(' *', '*')} {name}` but the stated signature has `{arg.ctype} "
                    f"{arg.name}` there: keep the signature exactly as given\n")
    return None
