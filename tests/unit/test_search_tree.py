"""Selection, backpropagation, progressive widening, pinning and duplicates on hand-made trees."""

from __future__ import annotations

from dataclasses import replace

import pytest
from search_nodes import REPO_PROBLEMS, first_edit_of_the_seed, node, ok

from kforge_desktop.kernels.verdict import Verdict
from kforge_desktop.problem.problem import load_problem
from kforge_desktop.search import events as ev
from kforge_desktop.search import prompting
from kforge_desktop.search.config import SearchConfig
from kforge_desktop.search.engine import SearchEngine
from kforge_desktop.search.setup import create_session
from kforge_desktop.search.strategies import MCTSParams, pending_repair, select, widening_limit
from kforge_desktop.search.tree import Tree, backprop, reward
from kforge_desktop.store import SessionStore


def test_reward_orders_failures_below_any_success_and_grows_with_speedup():
    failures = [reward(Verdict(s, "x")) for s in ("rejected", "compile_error", "crashed", "incorrect")]
    successes = [reward(ok(s)) for s in (0.1, 0.5, 1.0, 2.0, 4.0, 100.0)]
    assert max(failures) < min(successes)
    assert successes == sorted(successes) and successes[-1] == 1.0
    assert 0.0 <= min(failures) and reward(ok(1.0)) == pytest.approx(0.675)
    assert reward(None) == 0.0


def test_reward_believes_no_lucky_median():
    noisy = ok(3.5, significant=False, latency_iqr_ms=7.9)  # "3.51x (within noise)"
    assert reward(noisy) == reward(ok(1.0))
    assert reward(ok(3.5, disturbed="the runs sat on whole milliseconds")) == reward(ok(1.0))
    spread = ok(2.0, latency_iqr_ms=0.5, baseline_iqr_ms=0.4)  # 2x on medians, 1.44x at the IQRs' ends
    assert reward(ok(1.0)) < reward(spread) < reward(ok(2.0))


def test_a_kernel_that_leaves_work_to_pytorch_is_chosen_only_when_pinned():
    partial = ok(3.0, library_calls=("aten::mean", "aten::pow"))
    nodes = [node(1, None, origin="root"), node(2, 1, verdict=ok(1.5)), node(3, 1, verdict=partial)]
    assert Tree(nodes).best().id == 2
    nodes[2] = node(3, 1, verdict=partial, pinned=True)
    assert Tree(nodes).best().id == 3


def test_backprop_adds_a_visit_on_the_path_and_keeps_the_best_value():
    tree = Tree([node(1, None, origin="root", visits=3, value=0.7), node(2, 1, verdict=ok(2.0), visits=2, value=0.8),
                 node(3, 2, verdict=ok(1.0)), node(4, 1, verdict=ok(1.5), visits=1, value=0.72)])
    assert backprop(tree, 3, 0.675) == [(3, 1, 0.675), (2, 3, 0.8), (1, 4, 0.7)]
    assert backprop(tree, 3, 0.95) == [(3, 1, 0.95), (2, 3, 0.95), (1, 4, 0.95)]


def test_widening_limit_grows_with_visits():
    assert [widening_limit(v) for v in (0, 1, 2, 4, 9, 10)] == [1, 1, 2, 2, 3, 4]
    assert widening_limit(4, k=2.0) == 4


def test_mcts_widens_the_root_then_descends_to_the_better_child():
    # root has 2 children and 4 visits: limit ceil(4^0.5) = 2, so it descends
    nodes = [node(1, None, origin="root", visits=4, value=0.9),
             node(2, 1, verdict=ok(1.0), visits=2, value=0.675),
             node(3, 1, verdict=ok(4.0), visits=2, value=1.0)]
    assert select("mcts", Tree(nodes), 1) == 3
    # one more visit on the root: limit ceil(5^0.5) = 3 > 2 children, so the root is widened
    nodes[0] = node(1, None, origin="root", visits=5, value=0.9)
    assert select("mcts", Tree(nodes), 1) == 1


def test_mcts_exploration_prefers_the_less_visited_child_when_values_are_close():
    nodes = [node(1, None, origin="root", visits=40, value=0.9),
             node(2, 1, verdict=ok(1.0), visits=30, value=0.70),
             node(3, 1, verdict=ok(1.0), visits=2, value=0.69)]
    params = MCTSParams(widening_k=0.1)  # no widening: compare the two children
    assert select("mcts", Tree(nodes), 1, params) == 3
    assert select("mcts", Tree(nodes), 1, MCTSParams(exploration=0.0, widening_k=0.1)) == 2


def test_mcts_never_descends_into_failed_excluded_or_duplicate_children():
    nodes = [node(1, None, origin="root", visits=9, value=0.7),
             node(2, 1, verdict=Verdict("incorrect", "x"), visits=1, value=0.15),
             node(3, 1, verdict=ok(3.0), visits=1, value=0.95, excluded=True),
             node(4, 1, verdict=ok(2.0), visits=5, value=0.85),
             node(5, 4, verdict=ok(2.5), visits=1, value=0.9, excluded=True),
             node(6, 1, state="duplicate"), node(7, 1, state="duplicate")]
    tree = Tree(nodes)
    assert [k.id for k in tree.children(1)] == [2, 3, 4]  # duplicates do not count as children
    # root: 3 counted children = limit 3 -> descend; only node 4 is eligible; 4 has 1 child < limit 3 -> expand 4
    assert select("mcts", tree, 1) == 4
    assert not tree.expandable(3) and not tree.expandable(5)


def test_mcts_reaches_a_correct_repair_below_a_failed_seed():
    """An incomplete seed (GroupNorm's exemplar for GroupNorm + SiLU) fails; its completion is the
    first correct kernel. MCTS must refine that one, not keep writing kernels from scratch."""
    nodes = [node(1, None, origin="root", visits=4, value=0.6),
             node(2, 1, origin="seed", kind="seed", verdict=Verdict("incorrect", "x"), visits=2, value=0.6),
             node(3, 2, kind="repair", verdict=ok(0.4), visits=1, value=0.6),
             node(4, 1, verdict=Verdict("compile_error", "x"), visits=1, value=0.1)]
    assert select("mcts", Tree(nodes), 1) == 3


def test_mcts_stops_widening_a_node_whose_new_children_keep_failing():
    """Two from-scratch kernels failed at the root (one did not compile, one repeated the exemplar);
    the root may widen by visit count, but the search refines the working seed instead. Once the
    seed's subtree is gone (excluded), the root is widened again."""
    nodes = [node(1, None, origin="root", visits=16, value=0.7),
             node(2, 1, origin="seed", kind="seed", verdict=ok(1.5), visits=10, value=0.7),
             node(3, 1, verdict=Verdict("compile_error", "x"), visits=1, value=0.1),
             node(4, 1, state="duplicate", visits=1),
             node(5, 2, kind="edit", verdict=ok(1.6), visits=1, value=0.72)]
    assert select("mcts", Tree(nodes), 1) in (2, 5)
    nodes[1] = node(2, 1, origin="seed", kind="seed", verdict=ok(1.5), visits=10, value=0.7, excluded=True)
    assert select("mcts", Tree(nodes), 1) == 1


def test_greedy_refines_the_fastest_and_best_of_n_samples_the_root():
    nodes = [node(1, None, origin="root", visits=3),
             node(2, 1, verdict=ok(1.2)), node(3, 2, verdict=ok(2.4)), node(4, 1, verdict=ok(1.9)),
             node(5, 1, verdict=ok(9.0), excluded=True)]
    tree = Tree(nodes)
    assert select("greedy", tree, 1) == 3
    assert select("best-of-n", tree, 1) == 1
    assert select("greedy", Tree(nodes[:1]), 1) == 1  # nothing correct yet: start from the reference
    with pytest.raises(ValueError):
        select("annealing", tree, 1)


def test_repairs_follow_a_fresh_failure_and_are_bounded():
    base = [node(1, None, origin="root", visits=2), node(2, 1, verdict=Verdict("compile_error", "x"))]
    assert pending_repair(Tree(base), rounds=1) == 2
    assert pending_repair(Tree(base), rounds=0) is None
    tried = base + [node(3, 2, kind="repair", verdict=Verdict("compile_error", "y"))]
    assert pending_repair(Tree(tried), rounds=1) is None  # the repair failed too: bounded at one round
    assert pending_repair(Tree(tried), rounds=2) == 3
    wasted = base + [node(3, 2, kind="repair", state="duplicate")]
    assert pending_repair(Tree(wasted), rounds=1) == 2  # a repeated answer earns one more try
    wasted2 = wasted + [node(4, 2, kind="repair", state="no_code")]
    assert pending_repair(Tree(wasted2), rounds=1) is None
    rejected = [node(1, None, origin="root"), node(2, 1, verdict=Verdict("rejected", "calls torch.softmax"))]
    assert pending_repair(Tree(rejected), rounds=3) is None  # cheating is not repaired


def test_mcts_descends_instead_of_asking_a_node_for_a_change_the_model_rarely_makes():
    """A node whose next request would be one this model seldom carries out (``chance`` below the
    bar) is not widened while it has a working child; with nothing below it, it is widened anyway."""
    nodes = [node(1, None, origin="root", visits=9, value=0.7),
             node(2, 1, origin="seed", kind="seed", verdict=ok(1.5), visits=8, value=0.7),
             node(3, 2, kind="edit", verdict=ok(1.6), visits=1, value=0.72)]
    tree = Tree(nodes)
    high = {1: 1.0, 2: 0.6, 3: 0.6}
    low = {1: 1.0, 2: 0.1, 3: 0.6}
    params = MCTSParams(widening_k=3.0)  # room to widen everywhere
    assert select("mcts", tree, 2, params, chance=high.get) == 2
    assert select("mcts", tree, 2, params, chance=low.get) == 3
    assert select("mcts", Tree(nodes[:2]), 2, params, chance=low.get) == 2


# -- the engine's choices, with a real session file and no model -------------------------------------


@pytest.fixture()
def engine(tmp_path):
    store = SessionStore(tmp_path / "t.kforge")
    problem = load_problem(REPO_PROBLEMS / "softmax.py")
    pid = create_session(store, problem, SearchConfig(strategy="mcts", budget_candidates=5, seeds=True))
    eng = SearchEngine(store, pid, generator=None, evaluator=None)
    yield eng
    store.close()


def _add(store, pid, parent, verdict, origin="llm", kind="whole"):
    n = store.add_node(pid, parent, origin, kind, "cpp", source=f"src{parent}-{len(store.nodes(pid))}",
                       kernel_source='extern "C" void kernel_forward(const float* x, float* out, int64_t rows, '
                                     'int64_t cols) { for (int64_t i = 0; i < rows * cols; ++i) out[i] = x[i]; }')
    store.record_verdict(n, verdict, reward(verdict))
    tree = Tree(store.nodes(pid, with_source=False))
    store.update_stats(backprop(tree, n, reward(verdict)))
    return n


def test_a_new_session_has_the_reference_root_and_an_exemplar_seed(engine):
    nodes = engine.store.nodes(engine.problem_id)
    assert nodes[0].origin == "root" and nodes[0].parent_id is None
    seeds = [n for n in nodes if n.origin == "seed"]
    assert len(seeds) == 1 and seeds[0].state == "pending" and "row_softmax" in seeds[0].directive
    assert "kernel_forward" in seeds[0].kernel_source and "class ModelNew" in seeds[0].source
    assert engine.store.candidates_done(engine.problem_id) == 0  # a seed is not a candidate


def test_pin_focuses_expansion_on_the_pinned_subtree_and_stays_chosen(engine):
    store, pid = engine.store, engine.problem_id
    root = store.root(pid).id
    a = _add(store, pid, root, ok(1.5))
    b = _add(store, pid, root, ok(1.1))
    engine.post(ev.Pin(b))
    engine.apply_commands()
    for _ in range(3):  # later, faster nodes elsewhere do not move the pin
        _add(store, pid, a, ok(3.0), kind="edit")
    assert store.chosen_node(pid).id == b and store.best_node(pid).id != b
    exp = engine.next_expansion()
    assert exp.parent_id in Tree(store.nodes(pid)).subtree(b)
    assert exp.kind == "edit"
    engine.post(ev.Unpin(b))
    engine.apply_commands()
    assert store.pinned_node(pid) is None and store.chosen_node(pid).speedup == 3.0


def test_while_the_seed_works_the_budget_goes_to_its_edits_not_to_kernels_from_nothing(engine):
    """The default model's kernels from nothing are correct about one time in ten, its edits of a working
    kernel about one in two: while the root has a working child no kernel from nothing is asked; once
    this problem's record says they work, they are asked again."""
    from kforge_desktop.search.planner import WHOLE_PRIOR, whole_chance

    store, pid = engine.store, engine.problem_id
    root = store.root(pid).id
    seed = next(n for n in store.nodes(pid) if n.origin == "seed")
    store.record_verdict(seed.id, ok(1.3), reward(ok(1.3)))
    store.update_stats(backprop(Tree(store.nodes(pid, with_source=False)), seed.id, reward(ok(1.3))))
    kinds = []
    for i in range(6):
        exp = engine.next_expansion(Tree(store.nodes(pid)))
        kinds.append((exp.kind, exp.parent_id == root))
        _add(store, pid, exp.parent_id, ok(1.3 + 0.01 * i) if i % 2 else Verdict("incorrect", "wrong values"),
             kind=exp.kind)
    assert kinds and all(k in ("edit", "repair") and not at_root for k, at_root in kinds), kinds
    assert Tree(store.nodes(pid)).node(root).visits >= 4  # the root could have been widened: it was not chosen
    tree = Tree(store.nodes(pid, with_source=False))
    assert whole_chance(tree, root) == pytest.approx(WHOLE_PRIOR)
    for _ in range(2):  # two kernels from nothing correct on this problem: worth asking again
        _add(store, pid, root, ok(1.2))
    assert whole_chance(Tree(store.nodes(pid, with_source=False)), root) > 0.5


def test_kernels_from_nothing_ask_each_optimization_once_before_any_again(engine):
    """Once every other node's answers repeat earlier kernels, a root whose kernels from nothing have worked is
    asked for the exemplar rewritten with one named optimization. Recorded on dev/causal_scaled_softmax: the same
    one, cache blocking, was asked 18 times in 21, and 12 of those answers repeated an earlier kernel. Each one is
    now asked before any is asked again."""
    from collections import Counter

    store, pid = engine.store, engine.problem_id
    root = store.root(pid).id
    seed = next(n for n in store.nodes(pid) if n.origin == "seed")
    whole = store.add_node(pid, root, "llm", "whole", "cpp", source="whole", directive="straightforward")
    for node_id in (seed.id, whole):
        store.record_verdict(node_id, ok(1.3), reward(ok(1.3)))
        store.update_stats(backprop(Tree(store.nodes(pid, with_source=False)), node_id, reward(ok(1.3))))
        for i in range(2):  # the node's newest answers repeat it: nothing new comes from there
            store.add_node(pid, node_id, "llm", "edit", "cpp", source=f"again{node_id}.{i}", directive="simd_inner",
                           state="duplicate")
    asked = []
    for i in range(9):
        exp = engine.next_expansion(Tree(store.nodes(pid)))
        assert (exp.parent_id, exp.kind) == (root, "whole")
        asked.append(exp.directive)
        store.add_node(pid, root, "llm", "whole", "cpp", source=f"whole{i}", directive=exp.directive,
                       state="duplicate")
    counts = Counter(asked)
    assert len(counts) >= 2, asked  # the ones that can change the exemplar (cache blocking, a single pass), in turn
    assert max(counts.values()) - min(counts.values()) <= 1, asked


def test_exclude_and_expand_from_commands(engine):
    store, pid = engine.store, engine.problem_id
    root = store.root(pid).id
    a = _add(store, pid, root, ok(2.0))
    b = _add(store, pid, root, ok(1.0))
    engine.post(ev.Exclude(a))
    engine.apply_commands()
    tree = Tree(store.nodes(pid))
    assert store.node(a).excluded and not tree.expandable(a)
    for _ in range(5):
        assert engine.next_expansion().parent_id != a
    engine.post(ev.ExpandFrom(b))
    engine.apply_commands()
    exp = engine.next_expansion()
    assert (exp.parent_id, exp.kind) == (b, "edit")


def test_add_child_with_hand_edited_code_is_queued_and_duplicates_are_not(engine):
    store, pid = engine.store, engine.problem_id
    seed = next(n for n in store.nodes(pid) if n.origin == "seed")
    edited = seed.source.replace("schedule(static)", "schedule(static, 4)")
    engine.post(ev.AddChild(seed.id, edited, note="smaller chunks"))
    engine.post(ev.AddChild(seed.id, edited))
    engine.apply_commands()
    users = [n for n in store.nodes(pid) if n.origin == "user"]
    assert [u.state for u in users] == ["pending", "duplicate"]
    assert users[1].duplicate_of == users[0].id and users[0].kernel_source.count("schedule(static, 4)") == 1
    assert store.candidates_done(pid) == 0  # counted once judged


def test_set_budget_is_saved_with_the_search_state(engine):
    engine.post(ev.SetBudget(candidates=30, minutes=2.5))
    engine.apply_commands()
    st = engine.store.search_state(engine.problem_id)
    assert (st.budget_candidates, st.budget_minutes) == (30, 2.5)
    assert SearchConfig.from_dict(st.config).budget_candidates == 30


def test_an_edit_answer_is_begun_with_the_edited_functions_first_line(engine):
    """Asked to edit the entry point, the default model copied every helper first and ran out of tokens
    before the function it had to change; the answer is begun for it at that function's first line.
    On softmax no unroll is asked: its sum loop also writes the output (0 of 26 such edits correct)."""
    from kforge_desktop.search.applicability import applicable

    seed, exp, tree = first_edit_of_the_seed(engine, 1.3)
    kernel = seed.kernel_source
    assert not applicable("unroll_accumulators", kernel)
    assert applicable("unroll_accumulators", kernel.replace("yr[c] = e;", ""))  # a pure sum is unrolled
    assert (exp.kind, exp.directive, exp.target) == ("edit", "cache_blocking", "kernel_forward")
    ctx = engine.prompt(exp, tree)
    assert "fast_exp_neg(float x);  only for x <= 0" in ctx.parent_code and "12582912.0f" not in ctx.parent_code
    assert prompting.prefill(ctx, engine.config, engine.scaffold()) == ('```cpp\nextern "C" void kernel_forward(const float* x, float* out, int64_t rows, '
                                    'int64_t cols) {\n')
    helper = prompting.prefill(replace(ctx, target="exp_row"), engine.config, engine.scaffold())
    assert helper == "```cpp\nstatic inline float exp_row(const float* xr, float scale, float m, float* yr, int64_t cols) {\n"
    # repairs of a whole file and from-scratch kernels are not begun for the model
    assert prompting.prefill(replace(ctx, kind="whole"), engine.config, engine.scaffold()) == ""
    engine.config = replace(engine.config, prefill=False)
    assert prompting.prefill(ctx, engine.config, engine.scaffold()) == ""


def test_a_question_asked_again_after_a_repeated_answer_keeps_the_sessions_temperature(engine):
    """The user's temperature holds for every question: asked hotter after an answer that only repeated a
    kernel, four dev searches repeated as often and made fewer correct kernels (docs/benchmarks.md)."""
    store, pid = engine.store, engine.problem_id
    seed, exp, _tree = first_edit_of_the_seed(engine, 1.3)
    store.add_node(pid, seed.id, "llm", "edit", "cpp", directive=exp.directive, state="duplicate",
                   duplicate_of=seed.id)
    tree = Tree(store.nodes(pid))
    for config in (engine.config, replace(engine.config, temperature=0.2)):
        req = prompting.request(engine.prompt(exp, tree), config, "cpp", engine.problem.source, 1, False,
                                engine.scaffold())
        assert req.temperature == config.temperature


def test_mcts_passes_by_a_node_whose_last_answers_repeated_earlier_kernels():
    """Recorded on dev/channel_sum: the only working edit had no working child, every selection ended
    there, and its answers were the same kernels again until the search gave up on repeats. Once its
    newest two answers repeat, selection widens the node above it instead. Once every working node
    repeats, it is asked again rather than the root for kernels from nothing that are unlikely to work
    (22 such on the test half, none correct); where they have worked, the root."""
    nodes = [node(1, None, origin="root", visits=12, value=0.6),
             node(2, 1, origin="seed", kind="seed", verdict=ok(1.5), visits=11, value=0.6),
             node(3, 2, kind="edit", verdict=None, state="evaluated", visits=1, value=0.05),
             node(4, 2, kind="edit", verdict=ok(1.6), visits=8, value=0.6),
             node(5, 4, kind="edit", verdict=None, state="evaluated", visits=1, value=0.05)]
    repeats = [node(6, 4, kind="edit", state="duplicate", visits=1), node(7, 4, kind="edit", state="duplicate", visits=1)]
    params, chance = MCTSParams(), {1: 0.1, 2: 0.1, 4: 0.6}.get  # the root and the seed are not worth widening
    assert select("mcts", Tree(nodes), 1, params, chance) == 4
    assert select("mcts", Tree(nodes + repeats[:1]), 1, params, chance) == 4  # one repeat: asked again
    assert select("mcts", Tree(nodes + repeats), 1, params, chance) == 2
    seed_repeats = [node(8, 2, kind="edit", state="duplicate", visits=1), node(9, 2, kind="edit", state="duplicate", visits=1)]
    assert select("mcts", Tree(nodes + repeats + seed_repeats), 1, params, chance) == 4  # the best working node again
    worked = {1: 0.4, 2: 0.1, 4: 0.6}.get  # kernels from nothing were correct on this problem
    assert select("mcts", Tree(nodes + repeats + seed_repeats), 1, params, worked) == 1
    assert select("mcts", Tree(nodes[:1]), 1, params, chance) == 1  # nothing works yet: from nothing, however unlikely
