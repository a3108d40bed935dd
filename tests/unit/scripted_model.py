"""A scripted model for search tests that must not wait for a real one: it answers every request
with a whole ModelNew module for ``resources/problems/rms_norm.py`` (searches run with
``scaffold=False``), chosen by a hash of the prompt and the seed, so the same question always gets
the same answer and another question (another tree) another one. It takes a random time to answer
(``delay_s``), so that answers asked for together come back in a different order every run.

Imported by the tests and by the search process of the kill -9 test (``python scripted_model.py``).
"""

from __future__ import annotations

import hashlib
import random
import sys
import threading
import time
from pathlib import Path

from kforge_desktop.llm.generator import Generation, GenerationRequest

REPO = Path(__file__).resolve().parents[2]
OK = (REPO / "tests" / "candidates" / "cpu" / "ok_rms_norm.py").read_text()


def answer_module(h: int) -> str:
    """A candidate module: correct (most), wrong by a scale, or not compiling; each one different."""
    n = h % 1_000_003
    code = OK.replace("double acc = 0.0;", f"double acc = 0.0 * {n};")
    kind = h % 5
    if kind == 3:
        code = code.replace("inv * w[c];", "inv * w[c] * 1.5f;")  # incorrect
    elif kind == 4:
        code = code.replace(f"double acc = 0.0 * {n};", f"double acc = 0.0 * {n}")  # compile error
    return f"Here is the kernel.\n\n```python\n{code}```\n"


class ScriptedModel:
    """The ``Generator`` protocol, scripted. ``parallel`` requests are served at once (a server with
    that many slots); ``peak`` is the most that were ever generating together."""

    name = "scripted"
    context_size = 8192
    raw_completion = False

    def __init__(self, delay_s: float = 0.3, parallel: int = 3, tokens: int = 24, trace: str | None = None,
                 staggered: bool = False) -> None:
        self.trace = trace  # a file that gets "start SEED" and "end SEED" lines: what is being generated
        self.delay_s = delay_s
        self.staggered = staggered  # answers asked together come back in the order asked, a third of delay_s apart
        self.parallel = parallel
        self.tokens = tokens
        self.calls: list[int | None] = []
        self.peak = 0
        self._now = 0
        self._lock = threading.Lock()
        self._jitter = random.Random()  # not seeded: the order answers come back in differs every run

    def count_tokens(self, text: str) -> int:
        return max(1, len(text) // 4)

    def generate(self, request: GenerationRequest, on_token=None, cancel=None) -> Generation:
        with self._lock:
            self._now += 1
            self.peak = max(self.peak, self._now)
            self.calls.append(request.seed)
            if self.staggered:
                pause = self.delay_s * ((len(self.calls) - 1) % self.parallel + 1) / self.parallel
            else:
                pause = self._jitter.uniform(0.3 * self.delay_s, self.delay_s)
        self._note(f"start {request.seed}")
        try:
            prompt = "\n".join(m.content for m in request.messages) if request.messages else request.prompt or ""
            h = int(hashlib.sha256(f"{request.seed}\0{prompt}".encode()).hexdigest()[:12], 16)
            text = answer_module(h)
            t0 = time.perf_counter()
            step = max(1, len(text) // self.tokens)
            for i in range(0, len(text), step):
                if cancel is not None and cancel.is_set():
                    return Generation(text[:i], 10, i // step, time.perf_counter() - t0, 1.0, self.name, "cancelled",
                                      cancelled=True)
                time.sleep(pause / self.tokens)
                if on_token is not None:
                    on_token(text[i:i + step])
            seconds = time.perf_counter() - t0
            return Generation(text, self.count_tokens(prompt), self.tokens, seconds, self.tokens / max(seconds, 1e-6),
                              self.name, "stop")
        finally:
            self._note(f"end {request.seed}")
            with self._lock:
                self._now -= 1

    def _note(self, line: str) -> None:
        if self.trace:
            with self._lock, open(self.trace, "a") as fh:
                fh.write(line + "\n")

    def close(self) -> None:
        pass


def run_search(session: str, budget: int, inflight: int, build_cache: str) -> None:
    """The search process of the kill -9 test: a new session on rms_norm, the real evaluator on the
    CPU, this scripted model, K expansions in flight; or, when the session exists, its resume. The
    answers are staggered (1, 2 and 3 s), so the first is evaluated while the others are still being
    written: the moment the test kills the search comes in every run, however busy the machine."""
    import os

    os.environ["KFORGE_BUILD_CACHE"] = build_cache
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.kernels.options import EvalOptions
    from kforge_desktop.problem.problem import load_problem
    from kforge_desktop.search.config import SearchConfig
    from kforge_desktop.search.engine import SearchEngine
    from kforge_desktop.search.setup import create_session
    from kforge_desktop.store import SessionStore

    store = SessionStore(session)
    config = SearchConfig(budget_candidates=budget, scaffold=False, seeds=False, inflight=inflight, seed=7)
    pid = store.problems()[0].id if store.problems() else create_session(
        store, load_problem(REPO / "resources" / "problems" / "rms_norm.py"), config)
    fast = EvalOptions(trials=2, timed_runs=5, warmup_runs=1, compare_compile=False)
    with Evaluator("cpu", workers=2, options=fast) as evaluator:
        SearchEngine(store, pid, ScriptedModel(delay_s=3.0, staggered=True, trace=session + ".trace"), evaluator, config).run()
    store.close()


if __name__ == "__main__":
    run_search(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
