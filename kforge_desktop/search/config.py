"""``SearchConfig``: every knob of a search, stored as JSON with the session so resume is exact."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from .strategies import STRATEGIES

# the longest answer per LLM call by kernel language: a CUDA kernel (its launcher, vector loads, block
# reductions) is about twice a C++ one, and a rewrite of a CUDA exemplar does not fit in 1024 tokens
ANSWER_TOKENS = {"cpp": 1024, "cuda": 2048, "triton": 2048}


def answer_tokens(language: str) -> int:
    return ANSWER_TOKENS.get(language, 1024)


@dataclass(frozen=True)
class SearchConfig:
    strategy: str = "mcts"  # mcts | greedy | best-of-n
    budget_candidates: int | None = 12  # LLM + user candidates judged (seeds and duplicates not counted)
    budget_minutes: float | None = None  # search time over all runs of the session
    seed: int = 0
    device: str = "cpu"
    language: str = ""  # kernel language: "" = cpp on cpu, cuda on a GPU; or triton
    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int = 1024
    repair_rounds: int = 1  # follow-up calls that repair a failed candidate (best-of-n: none)
    repair_patience: int | None = 3  # stop "fix it" repairs after this many without a correct one (None: never)
    scaffold: bool = True  # the tool writes ModelNew, the model only the kernel function
    exemplars: bool = True  # show the most similar exemplar kernel in whole-kernel prompts
    seeds: bool = True  # place exactly-fitting exemplars in the tree as seed nodes
    memory: bool = True  # kernels verified in earlier sessions as exemplars; this one's best joins them
    compile_seed: bool = True  # on a GPU: torch.compile's own generated code as a seed node
    syntax_check: bool = True  # g++/nvcc -fsyntax-only before a real build
    prefill: bool = True  # an edit's answer begins with the edited function's first line, written for the model
    exploration: float = 0.5
    widening_k: float = 1.0
    widening_alpha: float = 0.5
    inflight: int | None = None  # K expansions in flight; None = chosen by the machine (1 on 4 cores or fewer)
    max_llm_calls: int | None = None  # guard against a model that only repeats itself; None = 3*budget+4

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r} (choose one of {', '.join(STRATEGIES)})")
        if self.budget_candidates is not None and self.budget_candidates < 0:
            raise ValueError("the candidate budget cannot be negative")
        if self.inflight is not None and self.inflight < 1:
            raise ValueError("at least one expansion must be in flight")

    @property
    def kernel_language(self) -> str:
        if self.language:
            return self.language
        return "cuda" if self.device.startswith("cuda") else "cpp"

    @property
    def repairs(self) -> int:
        return 0 if self.strategy == "best-of-n" else self.repair_rounds

    @property
    def llm_call_cap(self) -> int | None:
        if self.max_llm_calls is not None:
            return self.max_llm_calls
        return None if self.budget_candidates is None else 3 * self.budget_candidates + 4

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> SearchConfig:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (d or {}).items() if k in names})
