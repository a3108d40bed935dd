"""The engine loop with the real evaluator and no model: seeds, hand-edited children, commands
from another thread, and work caught in flight by a crash being redone."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kforge_desktop.kernels.evaluator import Evaluator
from kforge_desktop.kernels.options import EvalOptions
from kforge_desktop.problem.problem import load_problem
from kforge_desktop.search import events as ev
from kforge_desktop.search.config import SearchConfig
from kforge_desktop.search.engine import SearchEngine
from kforge_desktop.search.setup import create_session
from kforge_desktop.store import SessionStore

pytestmark = pytest.mark.slow

PROBLEMS = Path(__file__).resolve().parents[2] / "resources" / "problems"
FAST = EvalOptions(trials=2, timed_runs=5, warmup_runs=1, compare_compile=False)


@pytest.fixture(scope="module")
def evaluator():
    with Evaluator("cpu", workers=1, options=FAST) as e:
        yield e


@pytest.fixture()
def session(tmp_path, build_cache):
    store = SessionStore(tmp_path / "e.kforge")
    pid = create_session(store, load_problem(PROBLEMS / "softmax.py"), SearchConfig(budget_candidates=1))
    yield store, pid
    store.close()


def test_seed_and_a_hand_edited_child_are_evaluated_and_the_budget_ends_the_search(session, evaluator):
    store, pid = session
    seed = next(n for n in store.nodes(pid) if n.origin == "seed")
    broken = seed.source.replace("yr[c] *= k;", "yr[c] *= k + 1.0f;")  # a wrong hand edit
    engine = SearchEngine(store, pid, generator=None, evaluator=evaluator)
    seen: list = []
    engine.subscribe(seen.append)
    engine.post(ev.AddChild(seed.id, broken, note="try a different scale"))
    finished = engine.run()
    assert finished.reason == "budget"
    nodes = {n.id: n for n in store.nodes(pid)}
    user = next(n for n in nodes.values() if n.origin == "user")
    assert nodes[seed.id].status == "ok" and user.status == "incorrect"
    assert finished.best_node_id == seed.id and store.candidates_done(pid) == 1
    assert nodes[store.root(pid).id].visits == 2 and nodes[seed.id].visits == 2
    assert {type(e) for e in seen} >= {ev.NodeAdded, ev.NodeEvaluated, ev.NodeChanged, ev.Progress, ev.Finished}
    assert store.search_state(pid).status == "finished"


def test_nodes_caught_evaluating_by_a_crash_are_evaluated_again(session, evaluator):
    store, pid = session
    seed = next(n for n in store.nodes(pid) if n.origin == "seed")
    store.set_state(seed.id, "evaluating")  # what a kill -9 mid-evaluation leaves behind
    engine = SearchEngine(store, pid, generator=None, evaluator=evaluator, config=SearchConfig(budget_candidates=0))
    engine.run()
    again = store.node(seed.id)
    assert again.state == "evaluated" and again.status == "ok"
    assert len(store.nodes(pid)) == 2  # nothing duplicated


def test_pause_and_stop_from_another_thread_leave_the_session_resumable(session, evaluator):
    store, pid = session
    seed = next(n for n in store.nodes(pid) if n.origin == "seed")
    engine = SearchEngine(store, pid, generator=None, evaluator=evaluator)
    paused = threading.Event()
    engine.subscribe(lambda e: paused.set() if isinstance(e, ev.Progress) and e.phase == "paused" else None)
    engine.post(ev.Pause())
    thread = engine.start()
    assert paused.wait(30)
    assert store.search_state(pid).status == "paused"
    assert store.node(seed.id).state == "pending"  # nothing runs while paused
    engine.post(ev.Stop())
    thread.join(60)
    assert not thread.is_alive()
    assert store.search_state(pid).status == "stopped" and store.node(seed.id).state == "pending"


def test_a_triton_seed_in_a_native_search_is_refined_as_a_whole_triton_module(tmp_path):
    """torch.compile's seed is a Triton module inside a CUDA (here: C++) search. The model is asked to
    improve that module as Triton, and its answer is a Triton node: no scaffold, no C++ rules."""
    from kforge_desktop.kernels.verdict import Verdict
    from kforge_desktop.llm import prompts

    store = SessionStore(tmp_path / "t.kforge")
    pid = create_session(store, load_problem(PROBLEMS / "softmax.py"),
                         SearchConfig(budget_candidates=2))
    module = "import torch\nimport triton\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    seed = store.add_node(pid, store.root(pid).id, "seed", "seed", "triton", source=module, kernel_source=module,
                          directive="torch.compile")
    store.record_verdict(seed, Verdict("ok", "correct", speedup=1.0, latency_ms=1.0, baseline_ms=1.0), 0.7)
    engine = SearchEngine(store, pid, generator=None, evaluator=None, config=SearchConfig(budget_candidates=2))
    tree = engine._tree()
    exp = engine.planner.expansion(tree, seed, None, engine.config)
    assert exp.kind == "module"
    ctx = engine.prompt(exp, tree)
    system, user = prompts.render(ctx)
    assert ctx.language == "triton" and module.strip() in user and "Triton" in system
    assert "kernel_forward" not in user  # the C++ signature is not asked for
    store.close()


def test_the_repair_of_a_failed_edit_asks_for_the_one_changed_function_next_to_its_working_version(tmp_path):
    """An edit that broke a correct kernel changed one helper; its repair shows that helper as it was
    when it worked, asks for only that helper, and the answer is merged back into the kernel."""
    from kforge_desktop.csource.items import function_text
    from kforge_desktop.kernels.verdict import Verdict
    from kforge_desktop.llm import prompts

    store = SessionStore(tmp_path / "r.kforge")
    pid = create_session(store, load_problem(PROBLEMS / "softmax.py"), SearchConfig(budget_candidates=2))
    seed = next(n for n in store.nodes(pid) if n.origin == "seed")
    store.record_verdict(seed.id, Verdict("ok", "correct", speedup=1.0, latency_ms=1.0, baseline_ms=1.0), 0.7)
    good = function_text(seed.kernel_source, "row_max")
    broken = seed.kernel_source.replace(good, good.replace("xr[c] * scale > m ? xr[c] * scale : m",
                                                           "xr[c + 1] * scale > m ? xr[c + 1] * scale : m"))
    assert broken != seed.kernel_source
    edit = store.add_node(pid, seed.id, "llm", "edit", "cpp", source="x", kernel_source=broken,
                          directive="simd_inner@row_max")
    store.record_verdict(edit, Verdict("incorrect", "values differ", max_abs_err=1.0), -1.0)
    engine = SearchEngine(store, pid, generator=None, evaluator=None, config=SearchConfig(budget_candidates=2))
    tree = engine._tree()
    exp = engine.next_expansion(tree)
    assert (exp.kind, exp.parent_id, exp.target) == ("repair", edit, "row_max")
    system, user = prompts.render(engine.prompt(exp, tree))
    assert good.strip() in user and "xr[c + 1]" in user  # the working and the broken version, side by side
    assert "only the fixed `row_max`" in user
    store.close()


def test_repairs_stop_once_they_keep_failing_and_the_budget_goes_to_edits(tmp_path):
    """Three "fix it" repairs on this problem and none correct: the next failure is not repaired, the
    search edits a correct node instead and says why. A named completion is not affected."""
    from kforge_desktop.kernels.verdict import Verdict

    store = SessionStore(tmp_path / "g.kforge")
    pid = create_session(store, load_problem(PROBLEMS / "softmax.py"), SearchConfig(budget_candidates=8))
    seed = next(n for n in store.nodes(pid) if n.origin == "seed")
    store.record_verdict(seed.id, Verdict("ok", "correct", speedup=1.0, latency_ms=1.0, baseline_ms=1.0), 0.7)
    bad = Verdict("incorrect", "values differ", max_abs_err=1.0)
    for i in range(2):
        edit = store.add_node(pid, seed.id, "llm", "edit", "cpp", source=f"e{i}", kernel_source=f"e{i}",
                              directive="simd_inner")
        store.record_verdict(edit, bad, 0.1)
        fix = store.add_node(pid, edit, "llm", "repair", "cpp", source=f"r{i}", kernel_source=f"r{i}", directive="repair")
        store.record_verdict(fix, bad, 0.1)
    store.add_node(pid, edit, "llm", "repair", "cpp", state="duplicate", directive="repair", duplicate_of=fix)
    last = store.add_node(pid, seed.id, "llm", "edit", "cpp", source="e2", kernel_source="e2", directive="float_math")
    store.record_verdict(last, bad, 0.1)

    patient = SearchEngine(store, pid, generator=None, evaluator=None,
                           config=SearchConfig(budget_candidates=8, repair_patience=None))
    assert patient.next_expansion().kind == "repair"
    engine = SearchEngine(store, pid, generator=None, evaluator=None, config=SearchConfig(budget_candidates=8))
    logs: list = []
    engine.subscribe(lambda e: logs.append(e.message) if isinstance(e, ev.Log) else None)
    exp = engine.next_expansion()
    assert exp.kind != "repair" and exp.parent_id in (seed.id, store.root(pid).id)
    assert any("none of 3 repairs was correct" in m for m in logs)
    store.close()


class _EchoExample:
    """A model that answers every prompt with the first kernel the prompt shows (the example), as the
    small model did on the dev half's cumulative sum: a softmax handed back for a cumsum."""

    name = "echo"
    context_size = 8192
    raw_completion = False

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def count_tokens(self, text: str) -> int:
        return max(1, len(text) // 4)

    def generate(self, request, on_token=None, cancel=None):
        import re

        from kforge_desktop.llm.generator import Generation

        user = request.messages[-1].content
        self.prompts.append(user)
        shown = re.findall(r"```cpp\n(.*?)```", user, re.S)
        code = next((c for c in shown if "kernel_forward(" in c and "{" in c), "")
        return Generation(f"```cpp\n{code}```\n", 10, 10, 0.01, 1000.0, self.name, "stop")

    def close(self) -> None:
        pass


CUMSUM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=-1)


def get_inputs():
    return [torch.randn(64, 128)]


def get_init_inputs():
    return []
'''


def test_the_example_kernel_handed_back_unchanged_is_no_candidate_and_is_not_shown_again(tmp_path, evaluator):
    """A problem no exemplar fits (a cumulative sum) is shown the nearest family's kernel (row softmax).
    An answer that is that kernel unchanged is known to be wrong: it is not built or counted, and the
    next prompt tells the model what was wrong with it and no longer shows that kernel."""
    from kforge_desktop.problem.problem import Problem

    problem = Problem(name="cumsum", source=CUMSUM, path=str(tmp_path / "cumsum.py"))
    store = SessionStore(tmp_path / "c.kforge")
    # no seed: the lowered running sum would be one (a search without seeds asks kernels from nothing, as one
    # whose problem nothing lowers does)
    # one expansion at a time: on more than 4 cores two are in flight, and the second prompt leaves before the
    # first answer is back (it failed so on the 16-core GPU host)
    config = SearchConfig(budget_candidates=2, memory=False, seeds=False, inflight=1)
    pid = create_session(store, problem, config)
    assert not [n for n in store.nodes(pid) if n.origin == "seed"]
    model = _EchoExample()
    SearchEngine(store, pid, model, evaluator, config).run()
    answers = [n for n in store.nodes(pid) if n.origin == "llm"]
    first = answers[0]
    assert first.state == "duplicate" and first.duplicate_of is None and first.verdict is None
    assert "example kernel handed back unchanged" in answers[0].note
    assert "Here is a correct kernel for a similar operation" in model.prompts[0]
    # the next whole kernel is asked without the example (the model would copy it again), and told why
    assert "Here is a correct kernel" not in model.prompts[1] and "kernel_forward(const float* x" in model.prompts[1]
    assert "handed the example kernel back unchanged" in model.prompts[1]
    # with nothing correct to start from, that kernel is asked for as a straightforward one; what this
    # model computes otherwise than the example still is said (the running sum)
    assert "Approach: Write a straightforward, correct kernel first" in model.prompts[1]
    assert "What this model computes" in model.prompts[1] and "an inclusive running sum" in model.prompts[1]
    store.close()


def test_the_repair_of_a_wrong_kernel_names_what_the_model_computes_and_where_it_went_wrong(tmp_path):
    """A log-softmax kernel that wrote the softmax (what the row-softmax example computes): the repair
    prompt says where the first wrong value is with the values expected there, and repeats what this
    model computes otherwise than the example (the log of the softmax), which the first prompt said."""
    import torch

    from kforge_desktop.kernels.verify import compare

    x = torch.randn(16, 64)
    wrong = compare(torch.softmax(x, -1), torch.log_softmax(x, -1))
    assert not wrong.ok and "; the first at [0, 0]: expected " in wrong.reason and "[0, 0..3] expected [" in wrong.reason
    store = SessionStore(tmp_path / "r.kforge")
    user = _repair_prompt_of_a_wrong_log_softmax(store, wrong)
    assert "the first at [0, 0]: expected" in user
    assert "What this model computes" in user and "the log of the softmax" in user
    store.close()


def test_a_kernel_that_wrote_one_value_per_row_is_told_so_in_its_repair(tmp_path):
    """A log-softmax kernel that wrote only the first value of each row (the row sums a small model
    writes from scratch), into an output that starts as fresh memory does while verifying: the
    verdict and the repair prompt say it wrote 1 of the 64 values of each row, not only "got 3.4e+38".
    A wrong value the kernel did write is not called unwritten."""
    import torch

    from kforge_desktop.kernels.verify import compare, poisoned_cpu_allocations

    x = torch.randn(16, 64)
    with poisoned_cpu_allocations():
        out = torch.empty(16, 64)  # as the scaffold's module allocates its output
    out[:, 0] = x.sum(-1)  # out[r * cols] = sum: one value per row
    wrong = compare(out, torch.log_softmax(x, -1))
    assert not wrong.ok and "the kernel wrote 1 of the 64 values of each row" in wrong.reason
    assert "1008 of the 1024 output values were never assigned" in wrong.reason
    assert "never assigned" not in compare(torch.softmax(x, -1), torch.log_softmax(x, -1)).reason

    store = SessionStore(tmp_path / "w.kforge")
    assert "the kernel wrote 1 of the 64 values of each row" in _repair_prompt_of_a_wrong_log_softmax(store, wrong)
    store.close()


LOG_SOFTMAX = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
               "    def forward(self, logits):\n        return torch.log_softmax(logits, dim=-1)\n\n\n"
               "def get_inputs():\n    return [torch.randn(16, 64)]\n\n\ndef get_init_inputs():\n    return []\n")


def _repair_prompt_of_a_wrong_log_softmax(store, wrong) -> str:
    """The user prompt of the repair the search asks next, of a whole log-softmax kernel judged ``wrong``."""
    from kforge_desktop.kernels.verdict import Verdict
    from kforge_desktop.llm import prompts
    from kforge_desktop.problem.problem import Problem

    pid = create_session(store, Problem(name="log_softmax", source=LOG_SOFTMAX, path=None),
                         SearchConfig(budget_candidates=2))
    whole = store.add_node(pid, store.root(pid).id, "llm", "whole", "cpp", source="x",
                           kernel_source='extern "C" void kernel_forward() {}\n')
    store.record_verdict(whole, Verdict("incorrect", wrong.reason, max_abs_err=wrong.max_abs_err,
                                        rel_l2_err=wrong.rel_l2_err), -1.0)
    engine = SearchEngine(store, pid, generator=None, evaluator=None, config=SearchConfig(budget_candidates=2))
    tree = engine._tree()
    exp = engine.next_expansion(tree)
    assert (exp.kind, exp.parent_id) == ("repair", whole)
    return prompts.render(engine.prompt(exp, tree))[1]


class _Answers:
    """A model that gives each request the next answer of a list (and keeps the prompts)."""

    name = "listed"
    context_size = 8192
    raw_completion = False

    def __init__(self, *answers: str) -> None:
        self.answers, self.prompts = list(answers), []

    def count_tokens(self, text: str) -> int:
        return max(1, len(text) // 4)

    def generate(self, request, on_token=None, cancel=None):
        from kforge_desktop.llm.generator import Generation

        self.prompts.append(request.messages[-1].content)
        return Generation(self.answers.pop(0), 10, 10, 0.01, 1000.0, self.name, "stop")

    def close(self) -> None:
        pass


def test_a_repair_that_calls_a_helper_its_broken_parent_had_inlined_gets_the_helper_back(tmp_path, evaluator):
    """An edit inlined the seed's `row_max` into `kernel_forward` (and got the sum wrong), so its kernel no
    longer has `row_max`; the repair's answer calls `row_max` again, as the seed did. The kernel it makes
    gets `row_max` back from the seed, builds and is correct, and its note says so (before, it failed to
    build: "'row_max' was not declared in this scope", as 13 of 396 recorded dev edits and repairs did)."""
    from kforge_desktop.csource.items import function_text
    from kforge_desktop.kernels.verdict import Verdict

    store = SessionStore(tmp_path / "h.kforge")
    config = SearchConfig(budget_candidates=2, memory=False)  # the edit below, then the repair
    pid = create_session(store, load_problem(PROBLEMS / "softmax.py"), config)
    seed = next(n for n in store.nodes(pid) if n.origin == "seed")
    store.record_verdict(seed.id, Verdict("ok", "correct", speedup=1.0, latency_ms=1.0, baseline_ms=1.0), 0.7)
    entry = function_text(seed.kernel_source, "kernel_forward")
    assert "row_max(xr, scale, cols)" in entry and "scale_row(yr, 1.0f / s, cols)" in entry
    inlined = entry.replace("const float m = row_max(xr, scale, cols);",
                            "float m = -INFINITY;\n        for (int64_t c = 0; c < cols; ++c) m = xr[c] * scale > m "
                            "? xr[c] * scale : m;").replace("1.0f / s,", "1.0f / (s + 1.0f),")
    broken = seed.kernel_source.replace(function_text(seed.kernel_source, "row_max"), "").replace(entry, inlined)
    assert "row_max" not in broken
    edit = store.add_node(pid, seed.id, "llm", "edit", "cpp", source="x", kernel_source=broken,
                          directive="single_pass@kernel_forward")
    store.record_verdict(edit, Verdict("incorrect", "values differ", max_abs_err=0.5), -1.0)
    fixed = entry.replace("scale_row(yr, 1.0f / s, cols);", "const float inv = 1.0f / s;\n        "
                          "scale_row(yr, inv, cols);")
    model = _Answers(f"The sum was off by one.\n\n```cpp\n{fixed}\n```\n")
    SearchEngine(store, pid, model, evaluator, config).run()
    repair = next(n for n in store.nodes(pid) if n.origin == "llm" and n.parent_id == edit)
    assert repair.kind == "repair" and "kernel_forward" in model.prompts[0]
    assert repair.verdict is not None and repair.verdict.status == "ok", repair.verdict
    assert function_text(repair.kernel_source, "row_max") == function_text(seed.kernel_source, "row_max")
    assert "row_max put back as an ancestor had it" in repair.note
    store.close()


def test_an_edit_that_calls_its_helper_by_a_new_name_calls_the_helper(tmp_path, evaluator):
    """Asked for SIMD-friendly loops, the model rewrote `kernel_forward` to call `row_max_simd`, a function it
    never wrote (dev/channel_sum: `add_row_simd`), and the build failed. A call to an undefined name that is a
    helper's name with a word added, with the helper's argument count, is the helper: the kernel builds, is
    correct, and its note names the rename."""
    from kforge_desktop.csource.items import function_text
    from kforge_desktop.kernels.verdict import Verdict

    store = SessionStore(tmp_path / "r.kforge")
    config = SearchConfig(budget_candidates=1, memory=False)
    pid = create_session(store, load_problem(PROBLEMS / "softmax.py"), config)
    seed = next(n for n in store.nodes(pid) if n.origin == "seed")
    store.record_verdict(seed.id, Verdict("ok", "correct", speedup=1.0, latency_ms=1.0, baseline_ms=1.0), 0.7)
    entry = function_text(seed.kernel_source, "kernel_forward")
    renamed = entry.replace("row_max(xr, scale, cols)", "row_max_simd(xr, scale, cols)").replace(
        "scale_row(yr, 1.0f / s, cols);", "const float inv = 1.0f / s;\n        scale_row(yr, inv, cols);")
    assert renamed != entry and "row_max_simd(" in renamed
    model = _Answers(f"```cpp\n{renamed}\n```\n")
    SearchEngine(store, pid, model, evaluator, config).run()
    edit = next(n for n in store.nodes(pid) if n.origin == "llm")
    assert edit.verdict is not None and edit.verdict.status == "ok", edit.verdict
    assert "row_max_simd" not in edit.kernel_source and "row_max(xr, scale, cols)" in edit.kernel_source
    assert "row_max (called row_max_simd)" in edit.note
    store.close()


def test_a_blocked_edit_that_left_the_rows_work_as_the_patterns_comment_gets_the_parents_work(tmp_path, evaluator):
    """Asked to block the rows of a long row kernel, the model wrote the blocked loops around the pattern's own
    comment, "// ... the same per-row work as before ...", and nothing else: the kernel wrote no output
    (dev/smoothed_cross_entropy). The comment is filled with the parent's work of one row: the kernel is the
    blocked parent, builds, is correct, and its note says where the row's work came from."""
    from kforge_desktop.csource.items import function_text
    from kforge_desktop.kernels.verdict import Verdict

    store = SessionStore(tmp_path / "b.kforge")
    config = SearchConfig(budget_candidates=1, memory=False)
    pid = create_session(store, load_problem(PROBLEMS / "softmax.py"), config)
    seed = next(n for n in store.nodes(pid) if n.origin == "seed")
    store.record_verdict(seed.id, Verdict("ok", "correct", speedup=1.0, latency_ms=1.0, baseline_ms=1.0), 0.7)
    head = function_text(seed.kernel_source, "kernel_forward").split("{")[0].strip()
    answer = (f"{head} {{\n    const float scale = 1.0f;\n    const int64_t tile = 8;\n"
              "    #pragma omp parallel for schedule(static)\n    for (int64_t r0 = 0; r0 < rows; r0 += tile) {\n"
              "        const int64_t r1 = std::min(rows, r0 + tile);\n        for (int64_t r = r0; r < r1; ++r) {\n"
              "            // ... the same per-row work as before ...\n        }\n    }\n}\n")
    model = _Answers(f"```cpp\n{answer}```\n")
    SearchEngine(store, pid, model, evaluator, config).run()
    edit = next(n for n in store.nodes(pid) if n.origin == "llm")
    assert edit.verdict is not None and edit.verdict.status == "ok", edit.verdict
    entry = function_text(edit.kernel_source, "kernel_forward")
    assert "same per-row work" not in entry and "r0 += tile" in entry and "row_max(xr, scale, cols)" in entry
    assert "taken from the parent" in edit.note
    store.close()


class _SameAnswer:
    """A model that gives one answer, a correct module, to every request."""

    name = "same"
    context_size = 8192
    raw_completion = False

    def count_tokens(self, text: str) -> int:
        return max(1, len(text) // 4)

    def generate(self, request, on_token=None, cancel=None):
        from scripted_model import answer_module

        from kforge_desktop.llm.generator import Generation

        return Generation(answer_module(1), 10, 10, 0.01, 1000.0, self.name, "stop")

    def close(self) -> None:
        pass


def test_a_model_that_only_repeats_itself_ends_the_search_and_says_so(tmp_path, evaluator):
    """Eight answers in a row that repeat an earlier kernel end the search with candidates left; the reason
    it ends is "repeats" (the app and ``kforge optimize`` say "the model only repeats earlier kernels"), not a
    spent budget."""
    from kforge_desktop.cli.session_view import summary_table

    store = SessionStore(tmp_path / "r.kforge")
    config = SearchConfig(budget_candidates=12, memory=False, seeds=False, scaffold=False, inflight=1)
    pid = create_session(store, load_problem(PROBLEMS / "rms_norm.py"), config)
    finished = SearchEngine(store, pid, _SameAnswer(), evaluator, config).run()
    assert finished.reason == "repeats"
    answers = [n for n in store.nodes(pid) if n.origin == "llm"]
    assert [n.state for n in answers] == ["evaluated"] + ["duplicate"] * 8 and answers[0].status == "ok"
    assert store.candidates_done(pid) == 1 and finished.best_node_id == answers[0].id
    assert any("repeated earlier kernels; stopping" in e.message for e in store.events(pid))
    assert summary_table(store, pid, finished.reason).startswith("search finished: the model only repeats earlier kernels")
    store.close()
