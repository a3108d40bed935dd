"""Hand-made search trees for the search's unit tests: a correct verdict and a node record."""

from __future__ import annotations

from kforge_desktop.kernels.verdict import Verdict
from kforge_desktop.store import NodeRecord

REPO_PROBLEMS = __import__("pathlib").Path(__file__).resolve().parents[2] / "resources" / "problems"


def ok(s: float, **kw) -> Verdict:
    return Verdict("ok", "correct", **{"speedup": s, "latency_ms": 1.0, "baseline_ms": s, "significant": True, **kw})


def node(i, parent, *, origin="llm", kind="whole", verdict=None, state=None, visits=0, value=0.0,
         directive="", pinned=False, excluded=False, duplicate_of=None) -> NodeRecord:
    if state is None:
        state = "evaluated" if verdict is not None or origin == "root" else "pending"
    return NodeRecord(id=i, problem_id=1, parent_id=parent, origin=origin, state=state, language="cpp",
                      directive=directive, source="", kernel_source="", created_at=float(i), pinned=pinned,
                      excluded=excluded, visits=visits, value=value, kind=kind, verdict=verdict,
                      duplicate_of=duplicate_of)


def first_edit_of_the_seed(engine, speedup: float):
    """The seed of ``engine``'s session judged correct at ``speedup`` and expanded as the user's "expand"
    asks: (the seed, the expansion planned for it, the tree it was planned on)."""
    from kforge_desktop.search import events as ev
    from kforge_desktop.search.tree import Tree, backprop, reward

    store, pid = engine.store, engine.problem_id
    seed = next(n for n in store.nodes(pid) if n.origin == "seed")
    store.record_verdict(seed.id, ok(speedup), reward(ok(speedup)))
    store.update_stats(backprop(Tree(store.nodes(pid, with_source=False)), seed.id, reward(ok(speedup))))
    engine.post(ev.ExpandFrom(seed.id))
    engine.apply_commands()
    tree = Tree(store.nodes(pid))
    return seed, engine.next_expansion(tree), tree
