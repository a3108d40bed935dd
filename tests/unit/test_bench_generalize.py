"""The generalization benchmark's arithmetic and its problem set (no model: the searches are the lead's)."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest

from kforge_desktop.problem.problem import load_problem
from kforge_desktop.search.scaffold import build_scaffold
from kforge_desktop.store import stored

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _bench():
    spec = importlib.util.spec_from_file_location("generalize_bench", BENCH / "generalize.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_wilson_intervals_and_the_report():
    g = _bench()
    lo, hi = g.wilson(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-3) and hi == pytest.approx(0.7634, abs=1e-3)
    assert g.wilson(0, 0) == (0.0, 1.0) and g.wilson(0, 8)[0] == 0.0 and g.wilson(8, 8)[1] == 1.0

    def row(half, problem, seed, n, ok, diff, llm, seed_x):
        return {"half": half, "problem": problem, "seed": seed, "budget": 8, "model": "m.gguf", "cores": 2,
                "candidates": n, "self_made": ok, "self_made_different": diff, "duplicates": 1,
                "best_llm_speedup": llm, "best_seed_speedup": seed_x}

    rows = [row("test", "a", s, 8, 4, 3, 2.4, 2.0) for s in (0, 1, 2)]
    rows += [row("test", "b", s, 8, 2, 2, None if s else 1.5, None) for s in (0, 1, 2)]
    s = g.summarize(rows, "test")
    a, b = s["problems"]
    assert (a["n"], a["correct"], a["different"]) == (24, 12, 9)
    assert a["vs_seed"] == pytest.approx(1.2) and a["vs_seed_runs"] == 3
    assert b["vs_seed"] == 0.0 and b["vs_eager_max"] == 1.5  # no seed: against eager; a failed search counts 0
    assert s["gain_problems"] == 1
    text = g.report(rows)
    assert "9/24 (38%, " in text and "1/2 problems >= 1.1x" in text
    assert "correct and different >= 50% of LLM candidates: not met" in text
    assert "best LLM node >= 1.1x the best seed on half the problems: met (1/2)" in text


@pytest.mark.parametrize("half", ["dev", "test"])
def test_every_problem_loads_and_is_scaffolded(half):
    paths = sorted((BENCH / "problems_generalize" / half).glob("*.py"))
    assert len(paths) >= 6
    for path in paths:
        build_scaffold(load_problem(path))  # CPU-sized, float32, one tensor output


def test_a_longer_search_counted_up_to_its_first_candidates(tmp_path):
    """``--report --first N``: a recorded search read as if it had stopped after N LLM candidates (a dev
    session; the record itself is left as it was)."""
    g = _bench()
    results = BENCH / "results" / "generalize" / "generalize_r32d_t07.jsonl"
    row = next(r for r in g.load_rows(results) if r["problem"] == "l2_normalize")
    session = stored(g.ROOT / row["session"])  # as recorded, or packed since
    before = session.read_bytes()
    assert row["candidates"] == 8
    counts = [g.read_again(row, n) for n in (3, 5)]
    assert [c["candidates"] for c in counts] == [3, 5] and [c["budget"] for c in counts] == [3, 5]
    assert counts[0]["self_made"] <= counts[1]["self_made"] <= row["self_made"]
    assert sum(k["n"] for k in counts[1]["by_kind"].values()) == 5
    assert g.read_again(row, 8) is row  # a search no longer than N is counted as recorded
    assert session.read_bytes() == before


def test_what_each_request_gave_counts_every_answer_of_the_searches():
    """``--report --by-request``: per request, the answers of a half's searches (a dev session): every LLM answer
    counted once, repeats apart from the evaluated ones, and one request credited with each search's best LLM node."""
    g = _bench()
    results = BENCH / "results" / "generalize" / "generalize_r32d_t07.jsonl"
    rows = [r for r in g.load_rows(results) if r["problem"] in ("l2_normalize", "cumsum_rows")]
    table = importlib.import_module("generalize_again").by_request(rows)  # on the path generalize.py set
    assert sum(t[0] for t in table.values()) == sum(r["candidates"] for r in rows) + sum(t[1] for t in table.values())
    assert sum(t[2] for t in table.values()) == sum(r["correct"] for r in rows)
    assert sum(t[5] for t in table.values()) == sum(1 for r in rows if r["best_llm_speedup"])
    assert all(ok <= evaluated <= n - dup and len(ratios) <= ok and ok + sum(failed.values()) == evaluated
               for n, dup, ok, evaluated, ratios, _b, failed in table.values())
    assert sum(sum(t[6].values()) for t in table.values()) == sum(sum(r["failures"].values()) for r in rows)
    text = g.request_table(rows, g._failures)
    assert text.count("\n") == len(table) + 1 and "| request | answers | repeats |" in text


@pytest.mark.slow
def test_the_best_kernels_and_the_seed_retimed_together(tmp_path):
    """``--report --retime``: "best LLM vs seed" from re-timings of the search's best kernels and its seed
    together, each on a fresh copy, the median one reported (real builds and timings on this machine, a copy
    of a dev session; the record is left as it was and the shares do not change)."""
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.kernels.options import EvalOptions

    g = _bench()
    results = BENCH / "results" / "generalize" / "generalize_r32d_t07.jsonl"
    row = next(r for r in g.load_rows(results) if r["problem"] == "l2_normalize")
    session = stored(g.ROOT / row["session"])
    before = session.read_bytes()
    quick = EvalOptions(compare_compile=False, timed_runs=10, warmup_runs=1)
    with Evaluator(device="cpu", workers=1, options=quick, build_cache=tmp_path / "builds") as ev:
        again = g.read_again(row, evaluator=ev, rounds=3)
    assert again["retimed"] and "retimed" not in row
    ratios = again["retimed_ratios"]
    assert len(ratios) == 3 and ratios == sorted(ratios)  # each re-timing kept, the middle one read
    assert g.ratio(again) == pytest.approx(ratios[1], abs=1e-3)
    assert "l2_normalize s0 " + ", ".join(f"{x:.2f}x" for x in ratios) in g.report([again])
    assert again["best_seed_speedup"] and again["best_llm_speedup"]  # both measured again, together
    assert (again["best_seed_speedup"], again["best_llm_speedup"]) != (row["best_seed_speedup"], row["best_llm_speedup"])
    assert (again["self_made"], again["self_made_different"]) == (row["self_made"], row["self_made_different"])
    assert session.read_bytes() == before


def test_the_headroom_floor_reads_every_input_value_and_writes_every_output_value(build_cache):
    """benchmarks/headroom.py bounds what any kernel can gain over a seed by a floor kernel that only reads the inputs
    and writes the output. A floor that skipped part of either would be a bound too low: every output value must
    hold the sum of every input value (the class indices of a cross-entropy included)."""
    import torch

    spec = importlib.util.spec_from_file_location("headroom_bench", BENCH / "headroom.py")
    headroom = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(headroom)
    problem = load_problem(BENCH / "problems_generalize" / "dev" / "smoothed_cross_entropy.py")
    scaffold = build_scaffold(problem)
    ref = problem.load_module()
    model = headroom._load(scaffold, headroom.floor_kernel(scaffold), "headroom_floor_test", ref.Model(), [])
    logits, labels = ref.get_inputs()
    out = model(logits, labels)
    expected = logits.double().sum() + labels.double().sum()
    assert out.shape == (logits.shape[0],)
    assert torch.allclose(out.double(), torch.full_like(out.double(), expected.item()), rtol=1e-4)


def test_a_cuda_sample_that_hands_back_the_lowered_seed_is_a_copy(tmp_path):
    """The GPU sample table counts a kernel "not a seed" only when it differs from every kernel a search places:
    for a problem no exemplar fits, that is the reference lowered to loops (renamed locals do not make it new)."""
    spec = importlib.util.spec_from_file_location("gpu_samples_bench", BENCH / "gpu_samples.py")
    g = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(g)
    from kforge_desktop.search.setup import LOWERED_SEED, seed_kernels

    problems = BENCH / "problems_generalize"
    path = g.problem_file("log_softmax", problems)
    assert path == problems / "dev" / "log_softmax.py"
    problem = load_problem(path)
    scaffold = build_scaffold(problem, "cuda")
    [(directive, lowered, _note)] = seed_kernels(problem, scaffold, memory=False)
    assert directive == LOWERED_SEED
    sample = tmp_path / "cuda" / "log_softmax.edit" / "candidate_000.py"
    sample.parent.mkdir(parents=True)
    sample.write_text(scaffold.module_source(lowered.replace("v_amax", "row_max")))
    assert g._copy_of_seed(sample, "cuda", "log_softmax", problems) is True
    sample.write_text(scaffold.module_source(lowered.replace("c += 32", "c += 32 /* */").replace("expf(", "__expf(")))
    assert g._copy_of_seed(sample, "cuda", "log_softmax", problems) is False



def test_the_cuda_sample_table_counts_each_request_from_the_sample_log(tmp_path):
    """``--report`` joins each sample to the request ``kforge sample`` printed for it (kept as
    ``kforge_sample_log.txt``), two runs' lines side by side and an answer with no code included, so "vectorized
    loads: 0 of 5 correct" comes from the script, not from reading two files by hand."""
    spec = importlib.util.spec_from_file_location("gpu_samples_bench", BENCH / "gpu_samples.py")
    g = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(g)
    log = tmp_path / "kforge_sample_log.txt"
    log.write_text("== dev/a edit 04:31:18\n"
                   "[1/3] launch_shape: candidate_000.py (79 tokens, 67.5s; a seed handed back unchanged)\n"
                   "[2/3] fast_math@lowered_rows: candidate_001.py (412 tokens, 57.4s)\n"
                   "[3/3] vectorized_loads@lowered_rows: no usable code (no kernel); answer kept in "
                   "candidate_002.answer.txt (300 tokens, 30.0s)\n"
                   "wrote 2 of 3 candidates to /tmp/x/cuda/a.edit; evaluate them with `kforge eval a.py /tmp/x/`\n"
                   "[1/1] vectorized_loads@lowered_pool: candidate_000.py (225 tokens, 64.4s)\n"
                   "wrote 1 of 1 candidates to /tmp/x/cuda/b.edit/; evaluate them with `kforge eval b.py /tmp/x/`\n")
    asked = g.requests(log)
    assert asked == {"cuda/a.edit/candidate_000": "launch_shape", "cuda/a.edit/candidate_001": "fast_math",
                     "cuda/a.edit/candidate_002": "vectorized_loads", "cuda/b.edit/candidate_000": "vectorized_loads"}
    outcomes = {"cuda/a.edit/candidate_000": "copy", "cuda/a.edit/candidate_001": "new",
                "cuda/a.edit/candidate_002": "failed", "cuda/b.edit/candidate_000": "failed",
                "cuda/a.seed/candidate_000": "copy"}
    table = g.by_request(outcomes, asked)
    assert "| vectorized_loads | 2 | 0 | 0 |" in table and "| launch_shape | 1 | 1 | 0 |" in table
    assert "| fast_math | 1 | 1 | 1 |" in table and "| (the seed, --add-seeds) | 1 | 1 | 0 |" in table

@pytest.mark.slow
def test_recorded_kernels_judged_again_count_the_ones_that_fail_now(tmp_path):
    """``--report --rejudge``: a recorded dev max pooling search's correct kernels judged again by today's
    evaluator: the ones that dropped the seed's NaN test fail its NaN trial and are counted as failed (a
    copy of the session; the record is left as it was)."""
    from kforge_desktop.kernels.evaluator import Evaluator
    from kforge_desktop.kernels.options import EvalOptions

    g = _bench()
    row = next(r for r in g.load_rows(BENCH / "results" / "generalize" / "generalize_r72db.jsonl")
               if r["problem"] == "max_pool_overlap")
    session = stored(g.ROOT / row["session"])
    before = session.read_bytes()
    quick = EvalOptions(compare_compile=False, timed_runs=3, warmup_runs=1)
    with Evaluator(device="cpu", workers=1, options=quick, build_cache=tmp_path / "builds") as ev:
        again = g.read_again(row, judge=ev)
    assert again["now_failing"] > 0 and "now_failing" not in row
    assert again["self_made"] == row["self_made"] - again["now_failing"]
    assert f"fail now (max_pool_overlap {again['now_failing']})" in g.report([again])
    assert session.read_bytes() == before
