"""The evaluator worker: a spawned process that builds, verifies and times one candidate at a time.

Everything here runs in the worker, never in the caller: the candidate is untrusted code. The worker
talks to its parent over a pipe: ``("phase", name)`` as it goes, ``("want_timing",)`` before timing
(the parent grants one timing slot at a time, so timings never overlap), and finally
``("done", verdict_dict, restart)``. A crash, a hang or a poisoned CUDA context ends the process;
the pool notices and starts another. Tasks arrive as ``EvalTask.to_dict()``; the verdict dict
leaves the device out, the pool adds it from the same task's options.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import sys
import time
import traceback

from .options import EvalTask

RESERVED_SEED = 0x5EED
NAN_TRIAL = -1  # the trial index whose inputs get NaNs (0.. are the plain trials, timing and the post-check)


def worker_main(conn, config: dict) -> None:
    """Entry point of a spawned worker process."""
    log_path = config["log_path"]
    fd = os.open(log_path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    os.environ["KFORGE_BUILD_CACHE"] = config["build_cache"]
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(config["build_cache"], "torch_extensions"))
    import torch

    from .policy import instrument_extensions

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    instrument_extensions(os.path.join(config["build_cache"], "inline"))
    runner = TaskRunner(conn, config)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        start = os.lseek(1, 0, os.SEEK_END)
        restart = False
        try:
            verdict, restart = runner.run(task)
        except BaseException as err:  # the worker must answer whatever happens
            verdict = {"status": "runtime_error", "reason": f"the evaluator failed: {type(err).__name__}: {err}",
                       "log": traceback.format_exc()}
            restart = True
        sys.stdout.flush()
        sys.stderr.flush()
        verdict["log"] = (verdict.get("log") or "") + _read_log(log_path, start)
        try:
            conn.send(("done", verdict, restart))
        except (BrokenPipeError, OSError):
            return
        if restart:
            return


def _read_log(path: str, start: int, limit: int = 20000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(start)
            data = fh.read().decode(errors="replace")
    except OSError:
        return ""
    data = data.strip()
    if not data:
        return ""
    if len(data) > limit:
        data = data[: limit // 2] + "\n...\n" + data[-limit // 2:]
    return "\n--- worker output ---\n" + data


class Failure(Exception):
    def __init__(self, status: str, reason: str, log: str = "", restart: bool = False, **extra) -> None:
        super().__init__(reason)
        self.status, self.reason, self.log, self.restart, self.extra = status, reason, log, restart, extra


class TaskRunner:
    def __init__(self, conn, config: dict) -> None:
        self.conn = conn
        self.config = config
        self.compiled_cache: dict = {}
        self.counter = 0

    def phase(self, name: str) -> None:
        self.conn.send(("phase", name))

    def run(self, message: dict) -> tuple[dict, bool]:
        import torch

        self.counter += 1
        if message.get("kind") == "retime":
            from .retime import RetimeTask, run_retime

            task = RetimeTask.from_dict(message)
            try:
                with torch.no_grad():
                    return {"status": "ok", "reason": "re-timed", **run_retime(self, task)}, False
            except Exception as err:
                return {"status": "runtime_error", "reason": f"re-timing failed: {type(err).__name__}: {err}",
                        "log": traceback.format_exc()}, True
            finally:
                _release_device_memory(task.options.is_cuda)
        task = EvalTask.from_dict(message)
        if task.options.is_cuda:
            torch.cuda.reset_peak_memory_stats()
        result: dict = {}
        try:
            with torch.no_grad():
                self._evaluate(task, result)
        except Failure as f:
            result.update(status=f.status, reason=f.reason, log=(result.get("log", "") + f.log), **f.extra)
            return result, f.restart or result.get("tampered", False)
        finally:
            result["peak_mem_bytes"] = _peak_memory(task.options.is_cuda)
            _release_device_memory(task.options.is_cuda)
        return result, result.pop("tampered", False)

    # -- the steps -------------------------------------------------------------------------------

    def _evaluate(self, task: EvalTask, result: dict) -> None:
        import torch

        from ..problem.problem import ProblemError
        from . import policy
        from .candidate import CandidateError, detect_language, load_candidate_module, static_problems
        from .timing import time_interleaved
        from .verdict import ok_reason, timing_fields
        from .verify import (
            NAN_HINT,
            compare,
            flatten_outputs,
            poison_allocator,
            poisoned_cpu_allocations,
            same_inputs,
            with_nans,
        )

        source, opts, device = task.source, task.options, task.options.device
        language = detect_language(source)
        result["language"] = language
        is_cuda = opts.is_cuda
        sync = torch.cuda.synchronize if is_cuda else (lambda: None)

        # 1. the reference (trusted) and all the inputs, before any candidate code runs
        self.phase("reference")
        problem = task.problem
        try:
            ref_mod = problem.load_module()
        except ProblemError as err:
            raise Failure("runtime_error", f"the problem could not be loaded: {err}") from None
        init_inputs = list(ref_mod.get_init_inputs())
        # fresh input values for every evaluation unless the caller fixed them; recorded in the verdict
        seed = opts.seed if opts.seed else int.from_bytes(os.urandom(4), "little") >> 1
        result["input_seed"] = seed
        torch.manual_seed(RESERVED_SEED)  # the weights: the same for every candidate of a problem
        ref_model = ref_mod.Model(*init_inputs).to(device).eval()
        n_trials = max(1, opts.trials)
        n_post = 2

        # inputs are made when they are needed, on the device, and dropped after use, so a problem
        # of G bytes needs a few G of memory, not one copy per trial; the reference runs right
        # before the candidate's call, after a check that nothing has patched PyTorch
        def trial_inputs(t: int) -> list:
            return self._inputs(ref_mod, device, seed * 7919 + t + 1)

        def reference(inp: list):
            self._check_tamper(snapshot, ref_mod, "running the candidate")
            out = ref_model(*[_clone(x) for x in inp])
            sync()
            return out

        replay = []
        if hasattr(ref_mod, "get_replay_inputs"):
            replay = [self._to_device(list(x), device) for x in ref_mod.get_replay_inputs()]
        first = trial_inputs(0)
        ref_first, ref_ops_list = policy.record_ops(ref_model, *[_clone(x) for x in first])
        ref_ops = policy.compute_ops(ref_ops_list)
        out_bytes = [o.numel() * o.element_size() for o in flatten_outputs(ref_first) if torch.is_tensor(o)]
        del ref_first, first
        sync()

        # 2. static checks, then build (import) the candidate
        snapshot = policy.TorchSnapshot.take({"Model.forward": ref_mod.Model.forward})
        try:
            found = static_problems(source)
        except CandidateError as err:
            raise Failure(err.status, str(err) + ".") from None
        for problem_text in found:
            raise Failure("rejected", problem_text + ".") if "inherits" in problem_text else \
                Failure("compile_error", problem_text + ".")
        delegated = policy.static_delegations(source, ref_ops)
        if delegated:
            raise Failure("rejected", f"the candidate calls PyTorch's {', '.join(delegated)} itself instead of "
                                      "computing it with its own kernel")
        fallbacks = policy.fallback_calls(source)
        if fallbacks:
            raise Failure("rejected", f"the candidate falls back to PyTorch ({fallbacks[0]}) in an except branch; "
                                      "a kernel that fails must fail, not hand the work back")
        self.phase("build")
        calls_before_build = policy.compiled_calls()
        t0 = time.perf_counter()
        try:
            cand_mod = load_candidate_module(source, f"{self.counter}_{os.getpid()}")
        except CandidateError as err:
            result["build_s"] = time.perf_counter() - t0
            raise Failure(err.status, str(err), log=err.log) from None
        result["build_s"] = time.perf_counter() - t0
        result["cached_build"] = result["build_s"] < 0.05
        self._check_tamper(snapshot, ref_mod, "importing the candidate")
        try:
            torch.manual_seed(RESERVED_SEED)
            cand_model = cand_mod.ModelNew(*init_inputs)
            _copy_matching_state(ref_model, cand_model)
            cand_model = cand_model.to(device).eval()
        except Exception as err:
            raise Failure("runtime_error", f"ModelNew(*get_init_inputs()) raised {type(err).__name__}: "
                                           f"{_short(err)}", log=traceback.format_exc()) from None

        # 3. verify: fresh inputs per trial, poisoned allocator, inputs must stay unchanged
        self.phase("verify")
        t0 = time.perf_counter()
        worst_abs, worst_l2 = 0.0, 0.0
        library_ops: set[str] = set()
        calls_before = policy.compiled_calls()
        checks = list(range(n_trials)) + [("replay", i) for i in range(len(replay))]
        if opts.nan_trial:
            checks.append(("nan", 0))  # last: a kernel wrong on plain values is told that first
        for k in checks:
            if k == ("nan", 0):
                inp, placed = with_nans(trial_inputs(NAN_TRIAL), seed)
                try:
                    ref_out = reference(inp) if placed else None
                except Failure:
                    raise
                except Exception:  # a reference that refuses NaN (a sampler, an assertion): nothing to match
                    ref_out = None
                if ref_out is None:  # no floating-point input, or no answer to match
                    checks.remove(k)
                    break
                label = f"with NaN at {placed} places of its inputs"
            else:
                inp = trial_inputs(k) if isinstance(k, int) else replay[k[1]]
                ref_out = reference(inp)
                label = f"trial {k + 1}" if isinstance(k, int) else f"captured input {k[1] + 1}"
            args = [_clone(x) for x in inp]
            poison_allocator(out_bytes, device)
            with poisoned_cpu_allocations() if not is_cuda else contextlib.nullcontext():
                out = self._call(cand_model, args, sync, record=(k == 0))
            if k == 0:
                out, ops = out
                library_ops = policy.compute_ops(ops)
            cmp = compare(out, ref_out, getattr(ref_mod, "tolerance", None))
            worst_abs, worst_l2 = max(worst_abs, cmp.max_abs_err), max(worst_l2, cmp.rel_l2_err)
            result.update(max_abs_err=_finite(worst_abs), rel_l2_err=_finite(worst_l2))
            if not cmp.ok:
                hint = NAN_HINT if k == ("nan", 0) and "NaN/Inf values where" in cmp.reason else ""
                raise Failure("incorrect", f"{label}: {cmp.reason}{hint}", trials=checks.index(k) + 1)
            changed = same_inputs(inp, args)
            if changed:
                raise Failure("incorrect", f"{label}: the candidate modified its {changed} in place")
            del out, ref_out, inp, args
        result["trials"] = len(checks)
        result["verify_s"] = time.perf_counter() - t0
        ran_compiled = policy.compiled_calls() > calls_before or (
            policy.compiled_calls() > calls_before_build and language == "triton")
        if ref_ops and ref_ops <= library_ops:
            raise Failure("rejected", "the candidate's forward computes " + ", ".join(sorted(ref_ops))
                          + " with PyTorch operators, as the reference does, instead of its own kernel",
                          library_calls=tuple(sorted(library_ops)))
        if not ran_compiled:
            raise Failure("rejected", "the candidate's forward runs no kernel of its own (no compiled "
                                      "function was called)", library_calls=tuple(sorted(library_ops)))
        result["library_calls"] = tuple(sorted(library_ops))
        if library_ops:
            result["policy_flags"] = ("library calls: " + ", ".join(sorted(library_ops)),)

        # 4. time: candidate, eager and torch.compile interleaved, inputs refreshed every run
        if language == "triton" and not is_cuda:
            result.update(status="ok", reason="correct under Triton's interpreter; not timed without a GPU")
            return
        sources = {0: trial_inputs(n_trials), 1: trial_inputs(n_trials + 1)}
        compiled = self._compiled(problem, ref_model, sources[0], device) if opts.compare_compile else None
        self.conn.send(("want_timing",))
        grant = self.conn.recv()
        if grant != "timing_granted":
            raise Failure("runtime_error", "the evaluator did not grant a timing slot")
        self.phase("time")
        t0 = time.perf_counter()
        buffers = [_clone(x) for x in sources[0]]
        rng = random.Random(os.urandom(8))
        runs = opts.timed_runs
        # checked rounds: a few among the first ten (always run, whatever the time budget) and
        # the last round run, which time_interleaved names as final
        check_at = set(rng.sample(range(min(runs, 10)), k=min(3, runs)))
        late_failure: list[str] = []

        def before_run(i: int) -> None:
            for buf, src in zip(buffers, sources[i % 2]):
                if torch.is_tensor(buf):
                    buf.copy_(src)

        def after_run(name: str, i: int, out, final: bool) -> None:
            if name == "candidate" and (i in check_at or final) and not late_failure:
                cmp = compare(out, reference(sources[i % 2]), getattr(ref_mod, "tolerance", None))
                if not cmp.ok:
                    late_failure.append(f"timed run {i + 1}: {cmp.reason}")

        contenders = {"candidate": lambda: cand_model(*buffers), "eager": lambda: ref_model(*buffers)}
        if compiled is not None:
            contenders["compile"] = lambda: compiled(*buffers)
        try:
            timings = time_interleaved(contenders, device, runs=runs, warmup=opts.warmup_runs,
                                       before_run=before_run, after_run=after_run, budget_s=opts.timing_budget_s)
        except Exception as err:
            raise Failure("runtime_error", f"the candidate failed while being timed: {type(err).__name__}: "
                                           f"{_short(err)}", log=traceback.format_exc(),
                          restart=is_cuda) from None
        finally:
            self.conn.send(("timing_done",))
        buffers.clear()  # the timing inputs are not needed any more: free them before the rechecks
        sources.clear()
        result["time_s"] = time.perf_counter() - t0
        result.update(timing_fields(timings, is_cuda))

        # 5. after timing: still right on fresh inputs? still no tampering?
        if late_failure:
            raise Failure("incorrect", "outputs during timing differ from the reference ("
                          + late_failure[0] + "): the candidate behaves differently when timed")
        for k in range(n_trials + 2, n_trials + 2 + n_post):
            inp = trial_inputs(k)
            expected = reference(inp)
            args = [_clone(x) for x in inp]
            poison_allocator(out_bytes, device)
            with poisoned_cpu_allocations() if not is_cuda else contextlib.nullcontext():
                out = self._call(cand_model, args, sync)
            cmp = compare(out, expected, getattr(ref_mod, "tolerance", None))
            del inp, expected, args
            if not cmp.ok:
                raise Failure("incorrect", f"after timing, on fresh inputs: {cmp.reason} (the candidate was "
                                           "right during the checks but not after warm-up)")
        self._check_tamper(snapshot, ref_mod, "running the candidate")
        result.update(status="ok", reason=ok_reason(result))

    # -- helpers -----------------------------------------------------------------------------------

    def _inputs(self, ref_mod, device: str, seed: int) -> list:
        import torch

        torch.manual_seed(seed)
        random.seed(seed)
        with torch.device(device):  # made where they are used: no host copy of a big input
            raw = ref_mod.get_inputs()
        if not isinstance(raw, (list, tuple)):
            raise Failure("runtime_error", "the problem's get_inputs() must return a list of tensors, "
                                           f"not {type(raw).__name__}")
        for i, x in enumerate(raw):
            if not isinstance(x, (torch.Tensor, int, float, bool)):
                raise Failure("runtime_error", f"the problem's get_inputs() item {i} is a {type(x).__name__}, "
                                               "not a tensor or a number")
        return self._to_device(list(raw), device)

    @staticmethod
    def _to_device(values: list, device: str) -> list:
        import torch

        return [x.to(device) if torch.is_tensor(x) else x for x in values]

    def _call(self, model, args, sync, record: bool = False):
        import torch

        from . import policy

        try:
            if record:
                out, ops = policy.record_ops(model, *args)
                sync()
                return out, ops
            out = model(*args)
            sync()
            return out
        except Exception as err:
            msg = f"{type(err).__name__}: {_short(err)}"
            restart = False
            if torch.cuda.is_available() and ("CUDA" in str(err) or "cuda" in str(err)):
                restart = not _cuda_healthy()
            status = "runtime_error"
            reason = "the candidate raised " + msg
            if isinstance(err, torch.cuda.OutOfMemoryError):
                reason = "the candidate ran out of GPU memory: " + _short(err)
            if restart:
                reason += " (the CUDA context is unusable afterwards; the worker was replaced)"
            raise Failure(status, reason, log=traceback.format_exc(), restart=restart) from None

    def _compiled(self, problem, ref_model, sample_inputs, device):
        """torch.compile of the reference, once per worker and problem; None where it fails."""
        import torch

        key = (problem.digest, device)
        if key not in self.compiled_cache:
            self.phase("baseline")
            try:
                fn = torch.compile(ref_model)
                fn(*[_clone(x) for x in sample_inputs])
                fn(*[_clone(x) for x in sample_inputs])
                self.compiled_cache[key] = fn
            except Exception as err:
                print(f"torch.compile baseline unavailable: {type(err).__name__}: {_short(err)}")
                self.compiled_cache[key] = None
        return self.compiled_cache[key]

    def _check_tamper(self, snapshot, ref_mod, when: str) -> None:
        from .policy import TorchSnapshot

        now = TorchSnapshot.take({"Model.forward": ref_mod.Model.forward})
        changed = snapshot.changed(now)
        if changed:
            raise Failure("rejected", f"{when} replaced PyTorch functions ({', '.join(changed[:4])}); "
                                      "a candidate may not patch torch", restart=True)


def _clone(x):
    import torch

    return x.clone() if torch.is_tensor(x) else x


def _copy_matching_state(ref_model, cand_model) -> None:
    """Give ModelNew the reference's parameter values where names and shapes match (scaffolds and
    KernelBench candidates that rebuild the same layers get identical weights)."""
    import torch

    ref_state = ref_model.state_dict()
    mine = cand_model.state_dict()
    update = {k: v for k, v in ref_state.items() if k in mine and tuple(mine[k].shape) == tuple(v.shape)}
    if update:
        with torch.no_grad():
            cand_model.load_state_dict(update, strict=False)


def _peak_memory(is_cuda: bool) -> int | None:
    """Peak device memory of this task (GPU), or the worker's peak resident size so far (CPU)."""
    try:
        if is_cuda:
            import torch

            return int(torch.cuda.max_memory_allocated())
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    except Exception:
        return None


def _release_device_memory(is_cuda: bool) -> None:
    """Give cached GPU memory back after each task: the pool's workers share one card, and an idle
    worker's caching allocator must not hold what the next evaluation in another worker needs."""
    import gc

    gc.collect()
    if is_cuda:
        import torch

        try:
            torch.cuda.empty_cache()
        except Exception:  # a broken context: the worker is being replaced anyway
            pass


def _cuda_healthy() -> bool:
    import torch

    try:
        torch.cuda.synchronize()
        (torch.ones(1, device="cuda") + 1).item()
        return True
    except Exception:
        return False


def _short(err, n: int = 240) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _finite(x: float) -> float | None:
    return None if x is None or math.isinf(x) or math.isnan(x) else x


if __name__ == "__main__":
    import json as _json
    from multiprocessing.connection import Connection as _Connection

    worker_main(_Connection(int(sys.argv[1])), _json.loads(sys.argv[2]))
