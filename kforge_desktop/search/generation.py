"""One expansion's answer: written by the model in a generation thread, then stored as a node with
its LLM call on the engine's thread.

Why apart from the loop, and why in two halves: a generation runs in a thread of its own and writes
nothing to the store (its tokens go to the listeners, and between two tokens it waits while a
kernel is timed on its device: ``kernels.gate``); its answer is stored later, on the engine's
thread and in the order the expansions were asked for (``inflight``), so that node ids, duplicate
checks and LLM call numbers do not depend on which answer came back first. The engine hands each
half what it needs (the model, the gate, the stop event and two callbacks; the store and the
slot), never itself.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..kernels.gate import DeviceGate
from ..llm.generator import Generation, GenerationError, GenerationRequest, repeating
from ..store import SessionStore
from . import answers, prompting
from .inflight import Slot, generation_parallel, generation_slots
from .scaffold import Scaffold


def device_gate(evaluator) -> DeviceGate:
    """The gate a generation shares with the evaluator's timings; a stand-in evaluator has none."""
    return getattr(evaluator, "gate", None) or DeviceGate()


def thread_pool(generator, inflight: int, name: str) -> cf.ThreadPoolExecutor:
    """As many generation threads as the model serves requests at once (at most K): they start in
    the order asked."""
    width = min(inflight, generation_parallel(generator))
    return cf.ThreadPoolExecutor(max_workers=max(1, width), thread_name_prefix=name)


def generate(generator, request: GenerationRequest, gate: DeviceGate, stop: threading.Event,
             on_token: Callable[[str, float | None], None], on_rate: Callable[[float | None], None]) -> Generation:
    """One generation (in a generation thread): every token goes to ``on_token(text, tokens/s)``, the
    rate to ``on_rate`` at most once a second, and between two tokens the model waits while a kernel
    is timed on its device. ``stop`` cancels it; an answer that falls into a loop is cut short
    (finish reason "repeating"). Writes nothing to the store."""
    halt = _Halt(stop)
    streamed: list[str] = []
    n_tok = [0]
    with generation_slots(generator):
        t0 = time.monotonic()
        last = [t0]

        def token(text: str) -> None:
            n_tok[0] += 1
            streamed.append(text)
            if n_tok[0] % 16 == 0 and not halt.looping and repeating("".join(streamed)):
                halt.looping = True  # the model is in a loop: the rest of the budget would be more of it
                halt.set()
            now = time.monotonic()
            tps = n_tok[0] / (now - t0) if now > t0 else None
            on_token(text, tps)
            if now - last[0] > 1.0:
                last[0] = now
                on_rate(tps)
            gate.token_boundary()  # a kernel is being timed: the model waits, so it cannot disturb it

        if halt.is_set():
            return Generation("", 0, 0, 0.0, 0.0, "", "cancelled", cancelled=True)
        with gate.generating():
            gen = generator.generate(request, on_token=token, cancel=halt)
    if halt.looping and not stop.is_set():
        gen = replace(gen, finish_reason="repeating", cancelled=False)
    return gen


class _Halt(threading.Event):
    """The cancel event one generation watches: set by the engine's stop, or by ``generate`` itself
    when the answer falls into a loop (``looping``)."""

    def __init__(self, stop: threading.Event) -> None:
        super().__init__()
        self._stop = stop
        self.looping = False

    def is_set(self) -> bool:
        return super().is_set() or self._stop.is_set()


@dataclass(frozen=True)
class Received:
    """What a finished generation came back with: the answer to store (None when there is none: its
    call number may be given back), whether the model failed (three failures in a row stop the
    search), and what to tell the user (``persist``: in the session's log too)."""

    gen: Generation | None
    failed: bool = False
    message: str = ""
    level: str = "info"
    persist: bool = True

    def failures(self, before: int) -> int:
        """The model's failures in a row with this outcome, ``before`` before it (an answer ends a run
        of failures; a cancelled request neither adds to it nor ends it)."""
        return before + 1 if self.failed else (0 if self.gen is not None else before)


def received(generation: cf.Future) -> Received:
    """The outcome of a finished generation: an answer, a model that could not answer, a cancelled
    request, or an answer cut short because it kept repeating itself."""
    try:
        gen = generation.result()
    except GenerationError as err:
        return Received(None, failed=True, message=f"the model could not answer: {err}", level="error")
    if gen.cancelled:
        return Received(None, message="generation cancelled", persist=False)
    if gen.finish_reason == "repeating":
        return Received(gen, message=f"the model kept repeating itself: stopped after {gen.completion_tokens} "
                        "tokens", level="warning")
    return Received(gen)


def lineage(store: SessionStore, node) -> list[str]:
    """The kernels of ``node`` and its ancestors, nearest first (the root and nodes without code left out)."""
    out = []
    while node is not None:
        if node.kernel_source:
            out.append(node.kernel_source)
        node = store.node(node.parent_id) if node.parent_id is not None else None
    return out


def save_answer(store: SessionStore, problem_id: int, slot: Slot, gen: Generation, *, language: str,
                scaffold: Scaffold | None, fix: bool, save_state: Callable[[], None]) -> tuple[int, answers.Answer]:
    """Store the LLM call of ``slot``'s expansion and the node its answer makes (``answers``: the
    code, or why there is none, and whether it repeats an earlier node), in one transaction with
    ``save_state()`` (the call count saved with the call). Returns the node's id and the answer."""
    exp = slot.expansion
    parent = store.node(exp.parent_id)
    answer = answers.shape_answer(gen, slot.context.kind, exp.target, parent, language=language,
                                  scaffold=scaffold, fix=fix,
                                  find_duplicate=lambda norm: store.find_duplicate(problem_id, norm),
                                  example=answers.example_norm(slot.context.exemplar, language),
                                  lineage=lineage(store, parent))
    state = answer.state
    shown, params = prompting.call_record(slot.request, gen, slot.trimmed)
    with store.transaction():
        call_id = store.add_llm_call(problem_id, exp.kind, gen.model, shown, gen.text, gen.prompt_tokens,
                                     gen.completion_tokens, gen.seconds, params)
        node_id = store.add_node(
            problem_id, exp.parent_id, "llm", exp.kind if exp.kind != "module" else "whole", answer.language,
            source=answer.source, kernel_source=answer.kernel, directive=exp.directive, state=state,
            note=answer.note, norm_code=answer.norm, duplicate_of=answer.duplicate_of, llm_call_id=call_id,
        )
        store.log_event(problem_id, "node_added", f"node {node_id} ({exp.kind}, {state})",
                        payload={"node": node_id, "parent": exp.parent_id, "state": state})
        save_state()
    return node_id, answer
