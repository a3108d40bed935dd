"""``kforge optimize | resume | show | sample``: the search, headless.

``optimize`` runs a search on a KernelBench problem (or hands a model file, one that defines
``get_model()``, to the whole-model flow), drawing a one-line progress bar from the engine's
events and ending with a table of the best candidates; ``--json`` prints the best verdict and the
session path instead. ``resume`` continues a session, ``show`` prints its tree and best path,
``sample`` writes N candidates straight from the model without evaluating them.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

from .errors import UserError
from .session_view import ProgressLine, render_tree, summary_json, summary_table

SESSION_SUFFIX = ".kforge"


def register(sub) -> None:
    p = sub.add_parser("optimize", help="search for faster kernels for a problem (or a whole model) file",
                       description="Search for faster kernels: a local LLM writes candidates, MCTS explores, "
                                   "every candidate is built, verified and timed in an isolated worker.")
    p.add_argument("problem", help="a KernelBench problem file (Model, get_inputs, get_init_inputs) or a model "
                                   "file that defines get_model()")
    _llm_args(p)
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available, else cpu)")
    p.add_argument("--budget", type=int, default=12, help="candidates to evaluate (default 12)")
    p.add_argument("--minutes", type=float, default=None, help="stop after this many minutes")
    p.add_argument("--strategy", choices=("mcts", "greedy", "best-of-n"), default="mcts")
    p.add_argument("--session", default=None, help="session file to create (default: in the sessions folder)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--language", choices=("cpp", "cuda", "triton"), default=None,
                   help="kernel language (default: cuda on a GPU, cpp on the CPU)")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--max-tokens", type=int, default=None,
                   help="longest answer per LLM call (default: 1024 for C++, 2048 for CUDA and Triton)")
    p.add_argument("--repair-rounds", type=int, default=1, help="follow-up calls that repair a failed candidate")
    p.add_argument("--no-scaffold", action="store_true", help="let the model write the whole ModelNew module")
    p.add_argument("--no-exemplars", action="store_true", help="no exemplar kernels in prompts")
    p.add_argument("--no-seeds", action="store_true", help="do not place exemplar kernels in the tree as seeds")
    p.add_argument("--no-memory", action="store_true",
                   help="leave the kernels your earlier sessions verified out of this search (as exemplars and "
                        "seeds), and do not add this one's (see `kforge memory`)")
    p.add_argument("--seeds-only", action="store_true",
                   help="evaluate only the seeds (the exemplar kernels and, on a GPU, torch.compile's code) and "
                        "use the best; no model is loaded (for a whole model: every target worth a search)")
    p.add_argument("--workers", type=int, default=None, help="evaluation worker processes (per device)")
    _scale_args(p)
    p.add_argument("--json", action="store_true", help="print the best verdict and the session path as JSON")
    p.set_defaults(func=cmd_optimize)

    r = sub.add_parser("resume", help="continue a saved search session")
    r.add_argument("session", help="a .kforge session file")
    _llm_args(r)
    r.add_argument("--problem", type=int, default=None, help="problem id in the session (default: the first "
                                                              "whose search has not finished)")
    r.add_argument("--budget", type=int, default=None, help="new candidate budget (total for the problem)")
    r.add_argument("--minutes", type=float, default=None, help="new time budget (total)")
    r.add_argument("--workers", type=int, default=None)
    _scale_args(r)
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=cmd_resume)

    s = sub.add_parser("show", help="print a session's search tree and best path")
    s.add_argument("session", help="a .kforge session file")
    s.add_argument("--problem", type=int, default=None)
    s.add_argument("--json", action="store_true", help="nodes as JSON lines")
    s.set_defaults(func=cmd_show)

    m = sub.add_parser("sample", help="write N candidates from the model without evaluating them")
    m.add_argument("problem", help="a KernelBench problem file")
    m.add_argument("--n", type=int, default=4, help="how many candidates")
    m.add_argument("--out", required=True, help="folder to write candidate_NNN.py files into")
    m.add_argument("--target", choices=("cpp", "cuda", "triton"), default="cpp")
    _llm_args(m)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--start", type=int, default=0, metavar="I",
                   help="write samples I..N-1 only: sample I is the request a full run makes I-th (its directive "
                        "follows the ones before it), so one sample of an earlier run can be asked again")
    m.add_argument("--temperature", type=float, default=0.7)
    m.add_argument("--max-tokens", type=int, default=None, help="default: 1024 for C++, 2048 for CUDA and Triton")
    m.add_argument("--no-scaffold", action="store_true")
    m.add_argument("--no-exemplars", action="store_true")
    m.add_argument("--kind", choices=("whole", "edit"), default="whole",
                   help="whole: a kernel from scratch, as a search's first request; edit: the seed a search places, "
                        "rewritten with one optimization directive per sample (default: whole)")
    m.add_argument("--directive", default=None, metavar="KEY",
                   help="with --kind edit: ask every sample for this directive (e.g. hoist_invariants) instead of "
                        "the ones a search would choose in turn")
    m.set_defaults(func=cmd_sample)


def _scale_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--devices", default=None, metavar="LIST",
                   help="GPUs to evaluate on, one worker pool each: cuda:0,cuda:1 or all (default: --device)")
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="evaluate on the actors of a Ray cluster (one per GPU): its address, auto for the cluster "
                        "this machine belongs to, local for a new one of this machine alone (default with no "
                        "value: $RAY_ADDRESS, else auto); the session stays here; needs the ray extra")
    p.add_argument("--inflight", type=int, default=None, metavar="K",
                   help="expansions in flight: the model writes the next candidates while earlier ones are "
                        "evaluated (default: chosen by the machine, 1 on 4 cores or fewer)")


def _devices(args, device: str) -> list[str]:
    """--devices as a list (its first device is the search's ``device``); [] when not given."""
    from ..kernels.devices import DeviceError, parse_devices

    spec = getattr(args, "devices", None)
    if not spec:
        return []
    try:
        return parse_devices(spec, device)
    except DeviceError as err:
        raise UserError(str(err)) from None


def _llm_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--llm", default=None, metavar="PATH", help="a GGUF model file (default: $KFORGE_MODEL, "
                                                               "else the default model)")
    p.add_argument("--server", default=None, metavar="URL", help="an OpenAI-compatible server on this machine "
                                                                 "(llama-server, vLLM, Ollama, SGLang)")
    p.add_argument("--server-model", default=None, help="model name on the server")
    p.add_argument("--n-ctx", type=int, default=None, help="context size for a GGUF")


# -- opening things, errors as one sentence -----------------------------------------------------------


def _device(requested: str | None, remote: bool = False) -> str:
    """The search's device; ``remote``: evaluated on a Ray cluster, whose GPUs this machine may lack."""
    import torch

    if requested is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available() and not remote:
        raise UserError("--device cuda was asked for but torch sees no CUDA device here; use --device cpu.")
    if requested not in ("cpu",) and not requested.startswith("cuda"):
        raise UserError(f"unknown device {requested!r}; use cpu or cuda.")
    return requested


def _model_choice(args):
    from ..search.runner import ModelChoice

    n_ctx = getattr(args, "n_ctx", None)
    return ModelChoice(path=args.llm, server_url=args.server, server_model=args.server_model,
                       context=n_ctx if n_ctx and not args.server else None)


def _open_model(open_it):
    """Open the model now, so that a missing one is one sentence before anything else happens."""
    from ..llm import ModelNotFound
    from ..llm.generator import GenerationError

    try:
        return open_it()
    except (ModelNotFound, GenerationError) as err:
        raise UserError(str(err)) from None
    except ValueError as err:  # e.g. a non-loopback server URL
        raise UserError(str(err)) from None


def _generator(args):
    from ..search.runner import open_generator

    return _open_model(lambda: open_generator(_model_choice(args)))


def _runner(args, devices: list[str] | None = None):
    """The model (opened now) and the evaluator (on the search's devices, or Ray, when it starts)."""
    from ..kernels.ray_pool import ray_address
    from ..search.runner import SearchRunner

    ray = ray_address(getattr(args, "ray", None))
    if ray:
        _check_ray()
    seeds_only = getattr(args, "seeds_only", False)  # nothing asks the model: it is never loaded
    runner = SearchRunner(_model_choice(args), workers=args.workers, devices=devices, ray=ray,
                          lazy_model=seeds_only, say=lambda m: print(m, file=sys.stderr))
    if not seeds_only:
        _open_model(runner.open_model)
    return runner


def _check_ray() -> None:
    from ..kernels.ray_pool import RayUnavailable, import_ray

    try:
        import_ray()
    except RayUnavailable as err:
        raise UserError(str(err)) from None


def _problem(path: str):
    from ..problem.problem import ProblemError, load_problem

    try:
        return load_problem(path)
    except ProblemError as err:
        raise UserError(str(err)) from None


def _open_session(path: str):
    from ..store import SessionStore, StoreError

    try:
        return SessionStore.open(path)
    except StoreError as err:
        raise UserError(str(err)) from None


def _default_session(name: str) -> Path:
    from ..paths import sessions_dir

    return sessions_dir() / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}{SESSION_SUFFIX}"


# -- progress ------------------------------------------------------------------------------------------


def _run_engine(engine, progress: ProgressLine):
    """Run in a worker thread so Ctrl-C stops the search cleanly (the session stays resumable)."""
    engine.subscribe(progress)
    result: list = []
    thread = threading.Thread(target=lambda: result.append(engine.run()), daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.2)
    except KeyboardInterrupt:
        progress._print("stopping: finishing the current step (Ctrl-C again to abandon it)")
        engine.stop()
        try:
            while thread.is_alive():
                thread.join(0.2)
        except KeyboardInterrupt:
            pass
    progress.close()
    return result[0] if result else None


# -- commands ------------------------------------------------------------------------------------------


def cmd_optimize(args) -> int:
    import dataclasses

    from ..search.config import SearchConfig, answer_tokens

    path = Path(args.problem)
    if not path.exists():
        raise UserError(f"Problem file {path} does not exist.")
    device = _device(args.device, remote=args.ray is not None)
    devices = [] if args.ray is not None else _devices(args, device)
    device = devices[0] if devices else device
    if args.budget is not None and args.budget < 0:
        raise UserError("--budget must be zero or more.")
    if args.inflight is not None and args.inflight < 1:
        raise UserError("--inflight must be 1 or more.")
    if args.seeds_only and args.no_seeds:
        raise UserError("--seeds-only and --no-seeds leave nothing to evaluate; give one of them.")
    config = SearchConfig(
        strategy=args.strategy, budget_candidates=args.budget, budget_minutes=args.minutes, seed=args.seed,
        device=device, language=args.language or "", temperature=args.temperature,
        repair_rounds=args.repair_rounds, scaffold=not args.no_scaffold, exemplars=not args.no_exemplars,
        seeds=not args.no_seeds, inflight=args.inflight, memory=not args.no_memory,
    )
    config = dataclasses.replace(config, max_tokens=args.max_tokens or answer_tokens(config.kernel_language))
    if args.seeds_only:
        config = dataclasses.replace(config, budget_candidates=0)
    if _is_model_file(path):
        return _optimize_model(path, config, args, devices)
    problem = _problem(str(path))
    session_path = Path(args.session) if args.session else _default_session(problem.name)
    if session_path.exists():
        raise UserError(f"Session file {session_path} already exists; use `kforge resume {session_path}` to "
                        "continue it, or pick another --session.")
    from ..kernels.ray_pool import ray_address
    from ..search.setup import create_session, save_evaluation
    from ..store import SessionStore

    runner = _runner(args, devices)
    try:
        store = SessionStore(session_path)
        try:
            problem_id = create_session(store, problem, config)
            save_evaluation(store, devices, ray_address(args.ray))
            if not args.json:
                print(f"session: {session_path}", file=sys.stderr)
            return _search(runner, store, problem_id, config, args)
        finally:
            store.close()
    finally:
        runner.close()


def _is_model_file(path: Path) -> bool:
    from ..modelopt.loader import is_model_file

    return is_model_file(path)


def _optimize_model(path: Path, config, args, devices: list[str] | None = None) -> int:
    from ..kernels.ray_pool import ray_address
    from ..modelopt.optimize import ModelOptOptions, optimize_model

    ray = ray_address(getattr(args, "ray", None))
    if ray:
        _check_ray()
    progress = ProgressLine(quiet=args.json)
    try:
        result = optimize_model(path, config, session_path=args.session, llm=args.llm, server=args.server,
                                listener=progress, devices=devices, ray=ray,
                                options=ModelOptOptions(seeds_only=args.seeds_only))
    except Exception as err:
        name = type(err).__name__
        if name.endswith(("Error", "NotFound")) and len(str(err)) < 400 and not args.debug:
            raise UserError(str(err)) from None
        raise
    finally:
        progress.close()
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(_model_summary(result))
    return 0


def _model_summary(result) -> str:
    """A short table of the whole-model run (the model flow's own report has the details)."""
    from ..modelopt.report import format_result

    return format_result(result)


def _search(runner, store, problem_id: int, config, args) -> int:
    from ..kernels.devices import DeviceError
    from ..kernels.ray_pool import RayUnavailable

    progress = ProgressLine(quiet=args.json)
    try:
        engine = runner.engine(store, problem_id, config)  # opens the evaluator: its devices, or Ray
    except (DeviceError, RayUnavailable) as err:
        raise UserError(str(err)) from None
    finished = _run_engine(engine, progress)
    reason = finished.reason if finished else "stopped"
    if args.json:
        print(json.dumps(summary_json(store, problem_id, reason), indent=2))
    else:
        print(summary_table(store, problem_id, reason))
    return 0


def cmd_resume(args) -> int:
    import dataclasses

    from ..search.config import SearchConfig
    from ..search.setup import saved_evaluation

    store = _open_session(args.session)
    try:
        problems = store.problems()
        if not problems:
            raise UserError(f"{args.session} holds no problem to search.")
        if args.problem is not None:
            if args.problem not in {p.id for p in problems}:
                raise UserError(f"{args.session} has no problem {args.problem}; `kforge show` lists them.")
            problem_id = args.problem
        else:
            unfinished = [p.id for p in problems if (store.search_state(p.id) or _NoState).status != "finished"]
            problem_id = unfinished[0] if unfinished else problems[0].id
        state = store.search_state(problem_id)
        config = SearchConfig.from_dict(state.config if state else {})
        if args.inflight is not None and args.inflight < 1:
            raise UserError("--inflight must be 1 or more.")
        config = dataclasses.replace(
            config,
            budget_candidates=args.budget if args.budget is not None else config.budget_candidates,
            budget_minutes=args.minutes if args.minutes is not None else config.budget_minutes,
            inflight=args.inflight if args.inflight is not None else config.inflight,
        )
        if args.devices is None and args.ray is None:  # where the search was started, unless told otherwise
            saved = saved_evaluation(store)
            args.devices = ",".join(saved.get("devices") or []) or None
            args.ray = saved.get("ray")
            if (args.devices or args.ray) and not args.json:
                print(f"evaluating on {args.devices or 'the Ray cluster at ' + args.ray} as when the search started "
                      "(--devices or --ray to change)", file=sys.stderr)
        _device(config.device, remote=args.ray is not None)
        devices = [] if args.ray is not None else _devices(args, config.device)
        if devices and devices[0] != config.device:
            config = dataclasses.replace(config, device=devices[0])
        done = store.candidates_done(problem_id)
        pending = len(store.pending_nodes(problem_id))
        if not args.json:
            print(f"resuming {store.problem(problem_id).name}: {done} candidates done, {pending} waiting, budget "
                  f"{config.budget_candidates}", file=sys.stderr)
        runner = _runner(args, devices)
        try:
            return _search(runner, store, problem_id, config, args)
        finally:
            runner.close()
    finally:
        store.close()


class _NoState:
    status = "new"


def cmd_show(args) -> int:
    store = _open_session(args.session)
    try:
        problems = store.problems()
        if args.problem is not None:
            problems = [p for p in problems if p.id == args.problem]
            if not problems:
                raise UserError(f"{args.session} has no problem {args.problem}.")
        for p in problems:
            if args.json:
                for n in store.nodes(p.id, with_source=False):
                    print(json.dumps({"problem": p.id, "id": n.id, "parent": n.parent_id, "origin": n.origin,
                                      "kind": n.kind, "state": n.state, "status": n.status,
                                      "directive": n.directive, "speedup": n.speedup, "visits": n.visits,
                                      "value": round(n.value, 4), "pinned": n.pinned, "excluded": n.excluded}))
                continue
            print(render_tree(store, p.id))
            print()
        env = store.environment()
        if env and not args.json:
            print(f"measured on: {env.get('device_name', '?')} ({env.get('arch', '?')}), torch {env.get('torch', '?')}"
                  + (f", CUDA {env['cuda']}" if env.get("cuda") else ""))
    finally:
        store.close()
    return 0


def cmd_sample(args) -> int:
    from ..search.config import answer_tokens
    from ..search.sampling import SampleError, sample_candidates

    if args.n < 1:
        raise UserError("--n must be at least 1.")
    if not 0 <= args.start < args.n:
        raise UserError(f"--start must be from 0 to {args.n - 1} (--n is {args.n}).")
    if args.directive is not None and args.kind != "edit":
        raise UserError("--directive names the change an edit asks for; add --kind edit.")
    problem = _problem(args.problem)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot create {out}: {err}.") from None
    generator = _generator(args)
    written = 0
    try:
        for i, sample in enumerate(sample_candidates(problem, generator, args.n, target=args.target, seed=args.seed,
                                                     temperature=args.temperature,
                                                     max_tokens=args.max_tokens or answer_tokens(args.target),
                                                     scaffold=not args.no_scaffold,
                                                     exemplars=not args.no_exemplars, kind=args.kind,
                                                     start=args.start, directive=args.directive), start=args.start):
            if sample.source:
                (out / f"candidate_{i:03d}.py").write_text(sample.source)
                written += 1
                what = f"candidate_{i:03d}.py"
            else:
                (out / f"candidate_{i:03d}.answer.txt").write_text(sample.answer)
                what = f"no usable code ({sample.problem}); answer kept in candidate_{i:03d}.answer.txt"
            asked = f"{sample.directive}: " if sample.directive else ""
            note = f"; {sample.note}" if sample.note and sample.source else ""
            print(f"[{i + 1}/{args.n}] {asked}{what} ({sample.completion_tokens} tokens, {sample.seconds:.1f}s{note})",
                  file=sys.stderr)
    except SampleError as err:
        raise UserError(f"{err}.") from None
    finally:
        generator.close()
    print(f"wrote {written} of {args.n - args.start} candidates to {out}; evaluate them with `kforge eval {args.problem} {out}/`")
    return 0
