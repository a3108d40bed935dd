"""Which measurements the end-of-search re-timing takes, and a baseline that moved is flagged."""

from __future__ import annotations

from kforge_desktop.kernels.verdict import Verdict
from kforge_desktop.problem.problem import Problem
from kforge_desktop.search.retiming import baseline_moved, contenders
from kforge_desktop.store import SessionStore

SOURCE = "import torch\nclass Model(torch.nn.Module):\n    pass\n"


def ok(speedup: float, eager_ms: float, **kw) -> Verdict:
    return Verdict("ok", "correct", speedup=speedup, baseline_ms=eager_ms, latency_ms=eager_ms / speedup,
                   significant=True, **kw)


def session(tmp_path, verdicts: list[Verdict]) -> tuple[SessionStore, int, list[int]]:
    store = SessionStore(tmp_path / "s.kforge")
    pid = store.add_problem(Problem("p", SOURCE), device="cpu", language="cpp")
    root = store.add_node(pid, None, "root", "root", "python", source=SOURCE, state="evaluated")
    ids = []
    for i, v in enumerate(verdicts):
        node = store.add_node(pid, root, "llm", "whole", "cpp", source=f"candidate {i}")
        store.record_verdict(node, v, 0.5)
        ids.append(node)
    return store, pid, ids


def test_eager_far_from_the_rest_of_the_session_flags_the_measurement(tmp_path):
    store, pid, _ = session(tmp_path, [ok(2.0, 0.70), ok(1.5, 0.64), ok(1.2, 0.77)])
    moved = baseline_moved(store, pid, ok(4.0, 32.0))  # "4.00x" against an eager of 32 ms
    assert moved.disturbed and "32.0000 ms" in moved.disturbed
    steady = baseline_moved(store, pid, ok(1.3, 0.72))
    assert not steady.disturbed
    store.close()


def test_retiming_takes_the_fastest_the_near_ties_and_the_disturbed(tmp_path):
    vs = [ok(3.0, 1.0), ok(2.9, 1.0), ok(1.0, 1.0), ok(0.9, 1.0), ok(0.8, 1.0), ok(0.7, 1.0),
          ok(0.5, 1.0, disturbed="scheduler"), ok(2.5, 1.0, library_calls=("aten::mean",))]
    store, pid, ids = session(tmp_path, vs)
    chosen = [n.id for n in contenders(store, pid)]
    assert chosen[:2] == [ids[0], ids[1]]  # the fastest and its near-tie
    assert ids[6] in chosen  # disturbed: re-timed whatever its figure
    assert ids[7] not in chosen  # leaves work to PyTorch: not a contender unless pinned
    assert len(chosen) <= 6
    store.close()


def test_the_fastest_seed_is_retimed_whatever_its_first_figure(tmp_path):
    """A seed timed at a busy moment (0.5x) beside kernels timed at quiet ones: without it in the
    re-timing, "the best kernel is 2x the seed" would compare two different moments."""
    store, pid, ids = session(tmp_path, [ok(3.0, 1.0), ok(2.9, 1.0), ok(2.8, 1.0), ok(2.7, 1.0), ok(2.6, 1.0),
                                         ok(2.5, 1.0), ok(2.4, 1.0)])
    root = store.nodes(pid)[0].id
    seeds = []
    for figure in (0.5, 0.4):
        node = store.add_node(pid, root, "seed", "seed", "cpp", source=f"seed {figure}")
        store.record_verdict(node, ok(figure, 1.0), 0.5)
        seeds.append(node)
    chosen = [n.id for n in contenders(store, pid)]
    assert seeds[0] in chosen and seeds[1] not in chosen  # the fastest seed only
    assert chosen[:2] == [ids[0], ids[1]] and len(chosen) <= 6
    store.close()
