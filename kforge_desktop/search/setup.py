"""Creating a search: the problem's root node, its seed nodes and its saved state, once per problem.

Everything a search starts from is written to the store here, before any engine exists, so that a
session opened later (or on another machine) looks the same to the loop as a new one: the
reference as the root, the exemplars that fit the problem exactly and torch.compile's own code as
pending seeds, the search state, and a record of the machine the verdicts will describe. The same
shape of search state is saved by the engine as it runs (``search_state``), and a search that starts
says when the session was measured on another machine (``measured_elsewhere``).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..csource.normalize import normalize_code
from ..problem.problem import Problem
from ..store import SearchState, SessionStore
from . import attention_seed, matmul_seed
from .config import SearchConfig
from .exemplars import epilogue_missing, seed_exemplars
from .lowering import lower
from .planner import Tally
from .scaffold import Scaffold, ScaffoldError, build_scaffold


def few_cores() -> bool:
    """Whether generation and builds would starve each other here (4 cores or fewer): the engine
    then alternates them instead of generating while candidates are evaluated."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return n <= 4


def environment_record(device: str) -> dict:
    """The machine the verdicts are measured on (device, driver, CUDA, torch), as saved with a session."""
    try:
        from ..hardware import software_record

        return software_record(device)
    except Exception as err:
        return {"device": device, "error": str(err)}


def environment_differences(saved: dict, current: dict) -> list[str]:
    """What differs between the machine a session was measured on and this one (device, driver,
    CUDA, torch), as short phrases; empty when the verdicts still describe this machine."""
    out = []
    for key, label in (("device_name", "device"), ("driver", "driver"), ("cuda", "CUDA"), ("torch", "torch"),
                       ("arch", "architecture")):
        a, b = saved.get(key), current.get(key)
        if a and b and a != b:
            out.append(f"{label} {a} -> {b}")
    return out


def measured_elsewhere(saved: dict | None, device: str) -> str:
    """What to say when a session's verdicts were measured on another machine than this one ("" when
    they describe this machine, or no machine was recorded)."""
    diff = environment_differences(saved, environment_record(device)) if saved else []
    return ("this session was measured on another machine (" + ", ".join(diff) + "); its verdicts may not "
            "hold here") if diff else ""


def try_scaffold(problem: Problem, language: str) -> Scaffold | None:
    """The problem's scaffold, or None when the model must write whole modules (Triton, or a
    problem the scaffold cannot describe)."""
    if language not in ("cpp", "cuda"):
        return None
    try:
        return build_scaffold(problem, language)
    except (ScaffoldError, Exception):  # an odd problem: fall back to whole-module prompts
        return None


class LazyScaffold:
    """The problem's scaffold, built on first need (building it runs the reference once); a problem
    that cannot be scaffolded is said once, and the model then writes whole modules."""

    def __init__(self, problem: Problem, language: str, enabled: bool, warn: Callable[[str], None]) -> None:
        self.problem, self.language, self.enabled, self.warn = problem, language, enabled, warn
        self._scaffold: Scaffold | None = None
        self._done = False

    def __call__(self) -> Scaffold | None:
        if not self._done:
            self._done = True
            if self.enabled:
                self._scaffold = try_scaffold(self.problem, self.language)
                if self._scaffold is None and self.language in ("cpp", "cuda"):
                    self.warn("this problem could not be scaffolded; the model writes whole ModelNew modules")
        return self._scaffold


def create_session(store: SessionStore, problem: Problem, config: SearchConfig, info: dict | None = None) -> int:
    """Add a problem to the session with its root node, its seed nodes and the search state.

    Seeds (exemplars whose signature fits this problem exactly, else the reference lowered to loops:
    ``seed_kernels``) are pending nodes of origin
    ``seed``; the engine evaluates them first. Returns the problem id."""
    language = config.kernel_language
    problem_id = store.add_problem(problem, device=config.device, language=language, info=info or {})
    if not store.environment():
        store.set_environment(environment_record(config.device))
    with store.transaction():
        store.add_node(problem_id, None, "root", "root", "python", source=problem.source, state="evaluated",
                       note="the reference (PyTorch eager)")
        scaffold = try_scaffold(problem, language) if config.scaffold or config.seeds else None
        root_id = store.root(problem_id).id
        if scaffold is not None and config.seeds:
            for directive, code, note in seed_kernels(problem, scaffold, memory=config.memory):
                store.add_node(problem_id, root_id, "seed", "seed", language, source=scaffold.module_source(code),
                               kernel_source=code, directive=directive, norm_code=normalize_code(code, language),
                               note=note)
        if config.seeds and config.device.startswith("cuda"):
            _add_triton_exemplar_seeds(store, problem_id, root_id, problem)
        if config.seeds and config.compile_seed and config.device.startswith("cuda"):
            _add_compile_seed(store, problem_id, root_id, problem, config.device)
        store.save_search_state(search_state(problem_id, config, Tally(), "new"))
        store.log_event(problem_id, "created", f"search of {problem.name} created ({config.strategy}, "
                        f"{language}, budget {config.budget_candidates} candidates)")
    return problem_id


def seed_kernels(problem: Problem, scaffold: Scaffold, memory: bool = True) -> list[tuple[str, str, str]]:
    """The kernels a search starts from, as (directive, kernel, note): the exemplars (and the remembered
    kernel) that fit the problem, else the reference itself lowered to plain loops, where it can be."""
    out = []
    for exemplar, code in seed_exemplars(scaffold, problem.source, memory=memory):
        left_out = epilogue_missing(exemplar, scaffold)
        source_of = "remembered kernel" if exemplar.origin == "memory" else "exemplar"
        note = f"{source_of} {exemplar.name}: {exemplar.about}"
        if left_out:
            note += f" Leaves out {', '.join(left_out)}: its repair asks the model to add that."
        out.append((f"exemplar:{exemplar.name}", code, note))
    lowered = lower(problem, scaffold) if not out else None
    if lowered is not None:
        out.append((LOWERED_SEED, lowered, "the reference lowered to plain loops (a pass per reduction, a loop per "
                    "pooling window): correct by construction, not fast; a working kernel for the model to edit where "
                    "no exemplar fits"))
    return out


COMPILE_SEED = "torch.compile"  # the directive of the seed made of torch.compile's own code
LOWERED_SEED = "lowered"  # the directive of the seed that is the reference lowered to loops (search/lowering.py)
EVALUATION_KEY = "evaluation"  # session meta: where the search evaluates (--devices, --ray), for a resume


def save_evaluation(store: SessionStore, devices: list[str] | None, ray: str | None) -> None:
    """Remember the GPUs (or the Ray cluster) a search was started on, so that a resume uses them
    (one device is the search's own ``device``: nothing to remember)."""
    if len(devices or []) > 1 or ray:
        store.set_meta(EVALUATION_KEY, {"devices": list(devices or []), "ray": ray})


def saved_evaluation(store: SessionStore) -> dict:
    """``{"devices": [...], "ray": address or None}`` as saved when the search started ({} when none)."""
    saved = store.meta(EVALUATION_KEY)
    return saved if isinstance(saved, dict) else {}


def search_state(problem_id: int, config: SearchConfig, tally: Tally, status: str,
                 elapsed_s: float = 0.0) -> SearchState:
    """What the store keeps of a problem's search (``resume`` continues from it): the config and its
    budget, the tally (LLM calls spent), the status and the time spent."""
    return SearchState(
        problem_id=problem_id, strategy=config.strategy, budget_candidates=config.budget_candidates,
        budget_minutes=config.budget_minutes, seed=config.seed, rng_state=tally.to_saved(), config=config.to_dict(),
        status=status, elapsed_s=elapsed_s,
    )


_TRITON_SEEDS = (  # (fit: the candidate module or None, exemplar name, the seed's note)
    (attention_seed.attention_module, attention_seed.EXEMPLAR_NAME,
     "exemplar attention: softmax(scale · a @ b, masked) @ v in one pass (flash attention), "
     "the score matrix never written; fp32 products as three TF32 products on the tensor cores"),
    (attention_seed.attention_products_module, "matmul+softmax",
     "exemplars matmul and softmax: the attention as two products on the tensor cores (fp32 as three TF32 "
     "products) around a row softmax; the score matrix is written, the products run at full tile sizes"),
    (matmul_seed.matmul_module, matmul_seed.EXEMPLAR_NAME,
     "exemplar matmul: the product on the tensor cores, fp32 as three TF32 products each (fp32 accuracy), "
     "where cuBLAS runs fp32 without them"),
    (matmul_seed.softmax_module, "softmax",
     "exemplar softmax: one program per row, a row held in registers read once and written once"),
)


def _add_triton_exemplar_seeds(store: SessionStore, problem_id: int, root_id: int, problem: Problem) -> None:
    """The Triton exemplars that compute the whole problem (read from its forward), as seeds."""
    for fit, name, note in _TRITON_SEEDS:
        source = fit(problem.source)
        if source is not None:
            store.add_node(problem_id, root_id, "seed", "seed", "triton", source=source, kernel_source=source,
                           directive=f"exemplar:{name}", norm_code=normalize_code(source, "python"), note=note)


def _add_compile_seed(store: SessionStore, problem_id: int, root_id: int, problem: Problem, device: str) -> None:
    """torch.compile's own Triton code as a seed (generated in a subprocess): the search starts no
    slower than torch.compile. A model torch.compile cannot handle gets a logged reason instead."""
    from .inductor_seed import SeedError, inductor_module

    try:
        source = inductor_module(problem, device)
    except SeedError as err:
        store.log_event(problem_id, "seed", f"no torch.compile seed: {err}", "warning")
        return
    store.add_node(problem_id, root_id, "seed", "seed", "triton", source=source, kernel_source=source,
                   directive=COMPILE_SEED, norm_code=normalize_code(source, "python"),
                   note="torch.compile's own generated code (TorchInductor's Triton kernels), as a starting point")
