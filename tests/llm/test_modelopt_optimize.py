"""A whole model optimized end to end with the real small GGUF and real builds, tiny budget.

Profiles the LLM block example, searches one target (its SwiGLU: an exemplar seed fits it, plus one
LLM candidate), integrates whatever verified kernel is faster than eager, checks the patched model
against the original, benchmarks it, and leaves it all in one session file.
"""

from __future__ import annotations

import pytest

from kforge_desktop.paths import RESOURCES
from kforge_desktop.search import events as ev
from kforge_desktop.store import SessionStore

pytestmark = [pytest.mark.llm, pytest.mark.slow]


def test_optimize_one_example_model_end_to_end(tmp_path, test_model_path, build_cache):
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.kernels.options import EvalOptions
    from kforge_desktop.llm.llama_backend import LlamaCppGenerator
    from kforge_desktop.modelopt.optimize import ModelOptOptions, optimize_model
    from kforge_desktop.search.config import SearchConfig

    path = tmp_path / "llm_block.kforge"
    seen: list = []
    gen = LlamaCppGenerator(test_model_path, n_ctx=2048)
    try:
        with Evaluator("cpu", workers=1, options=EvalOptions(compare_compile=False, timed_runs=20)) as evaluator:
            result = optimize_model(
                RESOURCES / "examples" / "llm_block.py", SearchConfig(budget_candidates=1, max_tokens=320, seed=1),
                session_path=path, generator=gen, evaluator=evaluator, listener=seen.append,
                # floor_ratio 0: search the SwiGLU however close to its floor this machine's timings put it (on
                # a loaded machine they put it within 1.2x, and it was skipped); budget.py's own tests cover that
                options=ModelOptOptions(only=("swiglu",), bench_runs=5, bench_compile=False, floor_ratio=0.0))
    finally:
        gen.close()

    by_name = {o.target: o for o in result.outcomes}
    (swiglu,) = [o for o in result.outcomes if o.target.endswith("swiglu")]
    assert swiglu.budget == 1 and swiglu.candidates == 1 and swiglu.problem_id is not None
    others = [o for o in by_name.values() if o is not swiglu]
    assert all(o.budget == 0 and o.why_not for o in others)  # each says why it was not searched
    assert any(isinstance(e, ev.NodeEvaluated) for e in seen) and any(isinstance(e, ev.Finished) for e in seen)
    if swiglu.used:  # a verified kernel faster than eager went into the model: it was checked first
        assert result.checks and all(c.ok for c in result.checks)
        assert result.bench is not None and result.bench.kernel_calls[swiglu.target][0] == 1
    else:
        assert swiglu.why_not

    store = SessionStore.open(path)  # everything is in the one session file
    problems = store.problems()
    assert len(problems) == len(result.profile.targets)
    nodes = store.nodes(swiglu.problem_id)
    assert any(n.origin == "llm" for n in nodes) and any(n.origin == "seed" for n in nodes)
    saved = store.meta("modelopt_result")
    assert saved["targets"] and saved["session"] == str(path)
