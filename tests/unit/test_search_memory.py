"""Kernel memory: a session of one family teaches it; a later problem of that family, with another
signature, gets the remembered kernel as its exemplar and seed (real evaluator, real builds)."""

from __future__ import annotations

import textwrap
import types

import pytest
import torch

from kforge_desktop.kernels.evaluator import Evaluator
from kforge_desktop.kernels.options import EvalOptions
from kforge_desktop.problem.problem import Problem
from kforge_desktop.search import memory
from kforge_desktop.search.config import SearchConfig
from kforge_desktop.search.exemplars import Exemplar, best_exemplar, rank, seed_exemplars
from kforge_desktop.search.scaffold import build_scaffold
from kforge_desktop.search.setup import LOWERED_SEED, create_session
from kforge_desktop.store import SessionStore

FAST = EvalOptions(trials=2, timed_runs=5, warmup_runs=1, compare_compile=False)

# family A: log-softmax over rows. None of our exemplars computes it (the row softmax is the nearest)
FIRST = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, x):
            return torch.log_softmax(x, dim=-1)


    def get_inputs():
        return [3.0 * torch.randn(32, 256)]


    def get_init_inputs():
        return []
''')
# the same family with another signature: a module with a dim setting, another input name, a 3-D input
SECOND = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.logprobs = nn.LogSoftmax(dim=-1)

        def forward(self, scores):
            return self.logprobs(scores)


    def get_inputs():
        return [2.0 * torch.randn(4, 8, 96)]


    def get_init_inputs():
        return []
''')
# what the user wrote by hand in the first session (a child node of the root)
USER_KERNEL = textwrap.dedent('''
    // log_softmax of each row: x - (max + log(sum of exp(x - max)))
    extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {
        #pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            const float* xr = x + r * cols;
            float* yr = out + r * cols;
            float m = -INFINITY;
            for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
            float s = 0.0f;
            for (int64_t c = 0; c < cols; ++c) s += std::exp(xr[c] - m);
            const float lse = m + std::log(s);
            for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] - lse;
        }
    }
''')


@pytest.fixture()
def memory_dir(tmp_path, monkeypatch):
    d = tmp_path / "memory"
    monkeypatch.setenv("KFORGE_MEMORY_DIR", str(d))
    return d


def _teach(tmp_path) -> Exemplar:
    first = Problem(name="log_softmax_rows", source=FIRST)
    store = SessionStore(tmp_path / "first.kforge")
    pid = create_session(store, first, SearchConfig(budget_candidates=1))
    # no exemplar computes a log-softmax: the one seed is the reference lowered to loops
    assert [n.directive for n in store.nodes(pid) if n.origin == "seed"] == [LOWERED_SEED]
    scaffold = build_scaffold(first)
    root = store.root(pid).id
    node = store.add_node(pid, root, "user", "whole", "cpp", source=scaffold.module_source(USER_KERNEL),
                          kernel_source=USER_KERNEL)
    with Evaluator("cpu", workers=1, options=FAST) as evaluator:
        verdict = evaluator.evaluate(first, scaffold.module_source(USER_KERNEL))
    assert verdict.status == "ok", verdict.reason
    store.record_verdict(node, verdict)
    learned = memory.learn_from_session(store, pid)
    store.close()
    assert learned is not None
    return learned


def test_a_session_teaches_memory_and_a_later_problem_of_the_family_gets_that_kernel(tmp_path, memory_dir,
                                                                                       build_cache):
    learned = _teach(tmp_path)
    assert learned.origin == "memory" and learned.problem == "log_softmax_rows" and "log_softmax" in learned.ops
    files = list((memory_dir / "cpp").glob("*.cpp"))
    assert [f.name for f in files] == [f"{learned.name}.cpp"]
    assert files[0].read_text().startswith(f"// exemplar: {learned.name}\n")  # the exemplars' own header

    second = Problem(name="logprobs", source=SECOND)
    scaffold = build_scaffold(second)
    assert scaffold.signature() != build_scaffold(Problem(name="a", source=FIRST)).signature()
    ex, code = best_exemplar(scaffold, SECOND)
    assert ex.name == learned.name  # retrieved by what the op computes
    assert "const float* scores" in code and "xr = scores + r * cols" in code
    (seed, seed_code), *_ = seed_exemplars(scaffold, SECOND)
    assert seed.name == learned.name
    # the remembered kernel, fitted to the second problem, is correct there
    mod = types.ModuleType("memory_seed")
    exec(compile(scaffold.module_source(seed_code), "seed", "exec"), mod.__dict__)  # our test's own kernel
    x = 2.0 * torch.randn(4, 8, 96)
    assert torch.allclose(mod.ModelNew()(x), torch.log_softmax(x, dim=-1), atol=1e-5, rtol=1e-4)

    # without the memory (a benchmark's searches), the row softmax is the nearest again
    assert best_exemplar(scaffold, SECOND, memory=False)[0].name == "row_softmax"
    assert memory.match(scaffold, SECOND)[0][0].name == learned.name
    # learning again changes nothing; forgetting removes it from retrieval
    store = SessionStore(tmp_path / "first.kforge")
    assert memory.learn_from_session(store, store.problems()[0].id).name == learned.name
    store.close()
    assert len(memory.list_memory("cpp")) == 1
    assert memory.remove(learned.name) and not memory.list_memory()
    assert rank(scaffold, SECOND)[0][1].name == "row_softmax"


def test_a_kernel_no_faster_than_its_seed_is_not_learned_but_can_be_remembered_by_hand(tmp_path, memory_dir):
    """A search whose own kernels do not beat its seed (our exemplar) teaches nothing by itself; the
    user can still remember a correct node on purpose."""
    from kforge_desktop.kernels.verdict import Verdict

    rms = textwrap.dedent('''
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = nn.Parameter(torch.ones(64))

            def forward(self, x):
                return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight

        def get_inputs():
            return [torch.randn(8, 64)]

        def get_init_inputs():
            return []
    ''')
    store = SessionStore(tmp_path / "s.kforge")
    pid = create_session(store, Problem(name="rms", source=rms), SearchConfig(budget_candidates=1))
    seed = next(n for n in store.nodes(pid) if n.origin == "seed")
    store.record_verdict(seed.id, Verdict(status="ok", reason="correct", speedup=2.0, device="cpu", language="cpp"))
    llm = store.add_node(pid, seed.id, "llm", "edit", "cpp", source=seed.source, kernel_source=seed.kernel_source)
    store.record_verdict(llm, Verdict(status="ok", reason="correct", speedup=1.5, device="cpu", language="cpp"))
    assert memory.learn_from_session(store, pid) is None  # slower than the seed it started from
    # the seed with `using namespace std;` added, timed faster by chance: a near-copy, not learned
    copy = "using namespace std;\n" + seed.kernel_source
    near = store.add_node(pid, seed.id, "llm", "edit", "cpp", source=seed.source, kernel_source=copy)
    store.record_verdict(near, Verdict(status="ok", reason="correct", speedup=2.9, device="cpu", language="cpp"))
    assert memory.learn_from_session(store, pid) is None
    assert not memory.list_memory()
    # what the GUI's "remember this kernel" calls: the user's choice, checked
    with pytest.raises(memory.KernelMemoryError, match="not a C\\+\\+ or CUDA kernel"):
        memory.remember_node(store, store.root(pid).id)
    remembered = memory.remember_node(store, llm)
    assert remembered.problem == "rms" and [ex.name for ex in memory.list_memory()] == [remembered.name]
    store.close()


def test_the_memory_command_lists_shows_and_forgets(tmp_path, memory_dir, capsys, build_cache):
    from kforge_desktop.cli.main import main

    assert main(["memory", "list"]) == 0
    assert "No remembered kernels" in capsys.readouterr().out
    learned = _teach(tmp_path)
    assert main(["memory", "list"]) == 0
    out = capsys.readouterr().out
    assert learned.name in out and "log_softmax_rows" in out
    assert main(["memory", "show", learned.name]) == 0
    assert "extern \"C\" void kernel_forward" in capsys.readouterr().out
    assert main(["memory", "remove", learned.name]) == 0
    assert main(["memory", "show", learned.name]) == 2
    assert "no remembered kernel" in capsys.readouterr().err
