"""Which node the search expands next, and what it asks the model for there.

Planning reads the tree (light records, no source), the config and, for the few decisions that
look at code, the full record of one node; it writes nothing. The order is: a node the user asked
to expand from, then a pending repair of a failed candidate, then the strategy's pick (MCTS,
greedy or best-of-N) under the pinned node when one is pinned. At the chosen node it picks the
kind of request (a whole kernel from the root, an edit of a scaffolded kernel, a repair, or a
whole module when there is no scaffold) and one optimization directive.

Directive choices draw from a ``random.Random`` seeded by the session seed, the node and its number
of children, so a seeded search replays the same choices on a resumed or repeated run; the LLM
calls' sampling seeds derive from their numbers (``CallNumbers``). Which limit ends the search is
decided here too (``limit_reached``).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ..csource.items import split_items
from ..store.records import NodeRecord
from .config import SearchConfig
from .directives import CORRECT_FIRST, choose_directive, directive_by_key, expected_rate, smoothed_rate
from .edit_targets import edit_target, length_parameter, open_tried, outer_loop, returns_value
from .exemplars import (
    EPILOGUE_OPS,
    SHARED_HELPERS,
    best_exemplar,
    epilogue_missing,
    exemplar_named,
    output_writer,
)
from .prompting import provided_note
from .requests import (
    hoist_begun,
    hoist_text,
    launch_shape_text,
    reduction_term,
    reference_begun,
    reference_max_text,
    simd_text,
    single_pass_text,
)
from .scaffold import FUNCTION, Scaffold
from .strategies import MCTSParams, pending_repair, select
from .tree import Tree

MAX_REPEATS = 8  # answers in a row that only repeat earlier kernels before the search gives up


@dataclass(frozen=True)
class Expansion:
    """One request to the model: from which node, what kind, and the directive it carries."""

    parent_id: int
    kind: str  # whole | edit | repair | module
    directive: str  # directive key ("key@function" when an edit targets one helper function)
    directive_text: str
    target: str = ""  # edit: the function to rewrite
    begun: str = ""  # edit: the answer's start written for the model (the target's lines kept, up to the change)


@dataclass
class Tally:
    """What a search has spent and concluded that its next run continues from, saved with its state:
    the LLM calls made (each call's sampling seed derives from this count, so a seeded search
    replays) and whether "fix it" repairs were given up on this problem."""

    llm_calls: int = 0
    repairs_given_up: bool = False

    @classmethod
    def from_saved(cls, saved: object) -> Tally:
        d = saved if isinstance(saved, dict) else {}
        return cls(llm_calls=int(d.get("llm_calls", 0)), repairs_given_up=bool(d.get("repairs_given_up", False)))

    def to_saved(self) -> dict:
        out: dict = {"llm_calls": self.llm_calls}
        if self.repairs_given_up:
            out["repairs_given_up"] = True
        return out


class CallNumbers:
    """The LLM call numbers of a running search (each call's sampling seed derives from its number):
    handed out in the order the expansions are asked for, counted in the ``Tally`` once answered. A
    call that failed or was cancelled gives its number back when no later call took one (so with
    K = 1 the next request asks with the same seed)."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.next = tally.llm_calls  # the number the next expansion gets

    def take(self) -> int:
        index = self.next
        self.next += 1
        return index

    def give_back(self, index: int | None) -> None:
        if index is not None and index == self.next - 1:
            self.next = index

    def answered(self, index: int) -> None:
        self.tally.llm_calls = max(self.tally.llm_calls, index + 1)


class Planner:
    """Decides the next expansion of one problem's search.

    ``scaffold`` is asked lazily (building it runs the reference once); ``node`` returns a full
    record (with source) by id; ``warn`` tells the user something about the plan. ``forced`` (the
    nodes the user asked to expand from, in order) and ``focus`` (expand under the pin) are set by
    the engine's commands."""

    def __init__(self, language: str, problem_source: str, scaffold: Callable[[], Scaffold | None],
                 node: Callable[[int], NodeRecord], tally: Tally, warn: Callable[[str], None]) -> None:
        self.language = language
        self.problem_source = problem_source
        self.scaffold = scaffold
        self.node = node
        self.tally = tally
        self.warn = warn
        self.forced: list[int] = []
        self.focus = True
        self._said_call_cap = False

    def limit(self, tree: Tree, config: SearchConfig, elapsed_s: float, llm_calls: int) -> str | None:
        """Which limit ends the search (``limit_reached``), the LLM call cap as "repeats" (the model kept
        repeating its answers); the cap is said once, while the calls still in flight come back."""
        limit = limit_reached(tree, config, elapsed_s, llm_calls)
        if limit == "llm_calls":
            if not self._said_call_cap:
                self._said_call_cap = True
                self.warn(f"stopped after {config.llm_call_cap} LLM calls: the model keeps repeating earlier answers")
            return "repeats"
        return limit

    def next_expansion(self, tree: Tree, config: SearchConfig) -> Expansion | None:
        """What to expand next (forced, then a repair, then the strategy's pick); None when nothing can be."""
        while self.forced:
            node_id = self.forced.pop(0)
            if node_id in tree.nodes and not tree.excluded(node_id):
                if tree.repairable(node_id):
                    return self.expansion(tree, node_id, "repair", config)
                if tree.expandable(node_id):
                    return self.expansion(tree, node_id, None, config)
        repair = pending_repair(tree, config.repairs)
        if repair is not None:
            exp = self.expansion(tree, repair, "repair", config)
            if exp.directive != "repair" or not self.repairs_given_up(tree, config):
                return exp
        start = start_node(tree, self.focus)
        if start is None or tree.excluded(start):
            return None
        node_id = select(config.strategy, tree, start,
                         MCTSParams(config.exploration, config.widening_k, config.widening_alpha),
                         chance=lambda i: self.edit_chance(tree, i, config))
        if not tree.expandable(node_id):
            return None
        return self.expansion(tree, node_id, None, config)

    def edit_chance(self, tree: Tree, node_id: int, config: SearchConfig) -> float:
        """How likely the model is to carry out the edit this node would be asked for next; at the root, a
        kernel from nothing (``whole_chance``)."""
        node = tree.node(node_id)
        if self.scaffold() is None:
            return 1.0
        if node.origin == "root":
            return whole_chance(tree, node_id)
        if node.language != self.language:
            return 1.0
        exp = self.expansion(tree, node_id, None, config)
        d = directive_by_key(self.language, exp.directive.split("@")[0])
        return expected_rate(d, tree.directive_record()) if d is not None else 1.0

    def repairs_given_up(self, tree: Tree, config: SearchConfig) -> bool:
        """Whether "fix it" repairs have stopped paying on this problem: ``repair_patience`` attempts
        and none correct. With the default model such repairs are rarely correct (and often repeat
        the broken code), against about a third of edits: the budget goes to edits (the record is in
        docs/benchmarks.md, counted by ``benchmarks/directive_record.py``).
        Named completions of an incomplete seed are not affected."""
        patience = config.repair_patience
        if patience is None:
            return False
        ok, tried = tree.repair_record()
        if ok or tried < patience:
            return False
        if not self.tally.repairs_given_up:
            self.tally.repairs_given_up = True
            self.warn(f"none of {tried} repairs was correct: no more repairs on this problem, the budget goes to "
                      "new edits (a larger model repairs better)")
        return True

    def expansion(self, tree: Tree, node_id: int, kind: str | None, config: SearchConfig) -> Expansion:
        """The request at ``node_id``: ``kind`` "repair", or None for the kind the node calls for."""
        node = tree.node(node_id)
        scaffold = self.scaffold()
        language = self.language
        if kind is None:
            if scaffold is None or (node.origin != "root" and node.language != language):
                kind = "module"  # no scaffold, or a node in another language (torch.compile's Triton seed)
            else:
                kind = "whole" if node.origin == "root" else "edit"
        if kind == "repair":
            completion = completion_of(node, self.node, scaffold, language) if scaffold is not None else None
            if completion is not None:
                return completion
            changed = edited_function(node, self.node) if scaffold is not None else None
            return Expansion(node_id, "repair", "repair", "fix the error", changed or "")
        n_children = len(tree.children(node_id, counted=False))
        rng = random.Random(f"{config.seed}:{node_id}:{n_children}")
        full = None
        if node.origin == "root" and kind == "whole":
            # a kernel from scratch: correctness first. Once the model has answered that request by
            # copying the exemplar unchanged (or has a correct kernel already), later whole kernels
            # are the exemplar rewritten with one named optimization, so that they differ; once every
            # optimization was asked, the one asked the fewest times comes next. Without that count the
            # same one came back every time: the root of a search whose other nodes had stopped giving new
            # kernels was asked for the exemplar with cache blocking 18 times in 21 (dev:
            # causal_scaled_softmax, generalize_r57da; 12 of those answers repeated an earlier kernel)
            d = CORRECT_FIRST.get(language) or choose_directive(language, {}, rng)
            wholes = [k for k in tree.children(node_id, False) if k.kind == "whole"]
            answered = [k for k in wholes
                        if k.state == "duplicate" or (k.verdict is not None and k.verdict.status == "ok")]
            found = (best_exemplar(scaffold, self.problem_source, memory=config.memory)
                     if scaffold is not None and config.exemplars else None)
            if answered and found is not None:
                tried = {k.directive: "failed" for k in wholes}
                d = choose_directive(language, tried, rng, kernel=found[1], aten_ops=scaffold.aten_ops,
                                     record=tree.directive_record(), attempts=Counter(k.directive for k in wholes))
                return Expansion(node_id, kind, d.key, d.prompt_text("cuda" if language == "cuda" else "cpp"))
        else:
            full = self.node(node_id) if kind == "edit" else None
            functions = kernel_functions(full.kernel_source, language) if full else []
            lang = node.language if node.origin != "root" and kind == "module" else language
            tried = tree.tried(node_id)
            answers = [k for k in tree.children(node_id, counted=False) if k.directive]
            d = choose_directive(lang, open_tried(tried, functions, FUNCTION) if full else tried, rng,
                                 first=node.origin == "root", kernel=full.kernel_source if full else "",
                                 aten_ops=scaffold.aten_ops if scaffold else (), record=tree.directive_record(),
                                 attempts=Counter(k.directive for k in answers),
                                 repeats=Counter(k.directive for k in answers if k.state == "duplicate"))
        if kind == "edit":
            return edit_expansion(node_id, functions, d, language, rng, tried)
        return Expansion(node_id, kind, d.key, d.text)


# How often the default model's kernel from nothing is correct, before this problem says otherwise: 6 of 94 over
# the recorded dev searches before the lowered seeds, 4 of 23 on the dev half at 07ccfdf, against edits of a working
# kernel 19 of 36 and 22 of 56 (docs/benchmarks.md). Below FRESH_MIN: while the root has a working child (a seed or
# a correct kernel) the budget goes to edits of it; with none, kernels from nothing are still asked.
WHOLE_PRIOR = 0.1


def whole_chance(tree: Tree, root_id: int) -> float:
    """The chance that one more kernel from nothing is correct: WHOLE_PRIOR updated by the root's answers on this problem (an answer with no code is a miss; repeats say nothing)."""
    asked = [k for k in tree.children(root_id, counted=False) if k.origin == "llm" and k.kind == "whole"
             and (k.verdict is not None or k.state == "no_code")]
    ok = sum(1 for k in asked if k.verdict is not None and k.verdict.status == "ok")
    return smoothed_rate(ok, len(asked), WHOLE_PRIOR)


def kernel_functions(kernel: str, language: str) -> list[tuple[str, str]]:
    """(name, text) of the functions of a kernel an edit may rewrite (shared helpers are provided, not edited)."""
    return [(it.name, it.text) for it in split_items(kernel) if it.kind == "function"
            and it.name not in SHARED_HELPERS.get(language, {})]


def edit_expansion(node_id: int, functions: list[tuple[str, str]], d, language: str, rng: random.Random,
                   tried: dict[str, str]) -> Expansion:
    """The edit of node ``node_id`` (its kernel's ``functions``) that carries directive ``d``: which
    function it rewrites, and the directive's text for that function."""
    target = edit_target(functions, d.key, FUNCTION, rng, tried)
    key = d.key if target == FUNCTION else f"{d.key}@{target}"
    helper = dict(functions)[target] if target != FUNCTION else ""
    text = d.prompt_text("cuda" if language == "cuda" else "cpp", length_parameter(helper),
                         returns_value(helper), reduction_term(helper) if d.key == "unroll_accumulators" else "",
                         outer_loop(dict(functions).get(FUNCTION, "")) if target == FUNCTION else None)
    if d.key == "simd_inner" and language == "cpp":
        text = simd_text(dict(functions).get(target, ""))
    if d.key == "single_pass" and language == "cpp":
        text = single_pass_text("\n".join(f for _, f in functions), target)
    begun = ""
    if d.key == "reference_max" and language == "cpp":
        text = reference_max_text("\n".join(f for _, f in functions), target) or text
        begun = reference_begun("\n".join(f for _, f in functions), target)
    if d.key == "hoist_invariants" and language == "cpp":
        text = hoist_text("\n".join(f for _, f in functions)) or text
        begun = hoist_begun("\n".join(f for _, f in functions), target)
    if d.key == "launch_shape" and language == "cuda":
        text = launch_shape_text("\n".join(f for _, f in functions)) or text
    return Expansion(node_id, "edit", key, text, target, begun)


def start_node(tree: Tree, focus: bool) -> int | None:
    """Where selection starts: the pinned node while the search is focused on it, else the root."""
    pinned = next((n for n in tree.nodes.values() if n.pinned), None)
    if focus and pinned is not None and (tree.expandable(pinned.id) or pinned.origin == "root"):
        return pinned.id
    return tree.root_id


def completion_of(node: NodeRecord, full_node: Callable[[int], NodeRecord], scaffold: Scaffold,
                  language: str) -> Expansion | None:
    """The repair of a seed that leaves out an elementwise epilogue on purpose: one named change
    in the function that writes the output ("apply silu to every value you store")."""
    if node.origin != "seed" or not node.directive.startswith("exemplar:"):
        return None
    exemplar = exemplar_named(node.directive.split(":", 1)[1], language)
    missing = epilogue_missing(exemplar, scaffold) if exemplar is not None else []
    if not missing:
        return None
    target = output_writer(full_node(node.id).kernel_source, scaffold)
    table = EPILOGUE_OPS[language]
    expr = "v"
    for op in missing:
        expr = table[op].replace("v", f"({expr})") if expr != "v" else table[op]
    names = " then ".join(missing)
    text = (f"The kernel computes everything except the final {names}. Apply {names} to every value `{target}` "
            f"stores: compute the value exactly as now into `float v`, then store `{expr}` instead.")
    provided = provided_note(expr, language)
    if provided:
        text += f" ({provided}.)"
    text += f"\nThe pattern:\n```{'cuda' if language == 'cuda' else 'cpp'}\nfloat v = /* the value stored now */;\n" \
            f"y[i] = {expr};\n```"
    return Expansion(node.id, "repair", f"complete:{'+'.join(missing)}@{target}", text, target)


def edited_function(node: NodeRecord, full_node: Callable[[int], NodeRecord]) -> str | None:
    """The one function a failed edit changed in its correct parent (None when it changed several,
    added some, or the parent was not correct): its repair asks for that function back."""
    if node.kind != "edit" or node.parent_id is None:
        return None
    parent = full_node(node.parent_id)
    if parent.verdict is None or parent.verdict.status != "ok":
        return None
    before = {it.name: it.text for it in split_items(parent.kernel_source) if it.kind == "function"}
    after = {it.name: it.text for it in split_items(full_node(node.id).kernel_source) if it.kind == "function"}
    changed = [n for n in after if before.get(n) != after[n]]
    if len(changed) != 1 or changed[0] not in before or set(after) - set(before):
        return None
    return changed[0]


def repeats_in_a_row(tree: Tree) -> int:
    """How many of the newest LLM answers were duplicates (not candidates, but time spent)."""
    n = 0
    for node in sorted(tree.nodes.values(), key=lambda x: -x.id):
        if node.origin != "llm":
            continue
        if node.state != "duplicate":
            break
        n += 1
    return n


def limit_reached(tree: Tree, config: SearchConfig, elapsed_s: float, llm_calls: int) -> str | None:
    """Which limit ends the search: "time", "budget" (the candidates the budget counts: LLM and
    hand-written nodes judged or waiting; seeds and duplicates are free), "llm_calls" (the guard
    against a model that only repeats itself), or None."""
    if config.budget_minutes is not None and elapsed_s >= config.budget_minutes * 60:
        return "time"
    if config.budget_candidates is not None:
        counted = sum(1 for n in tree.nodes.values() if n.origin in ("llm", "user")
                      and n.state in ("pending", "evaluating", "evaluated", "no_code"))
        if counted >= config.budget_candidates:
            return "budget"
    cap = config.llm_call_cap
    if cap is not None and llm_calls >= cap:
        return "llm_calls"
    return None
