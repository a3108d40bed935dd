"""The one interface the search engine uses to ask a language model for text.

Why a protocol: the engine should not care whether tokens come from llama.cpp in this process or
from an OpenAI-compatible server on this machine; tests and benchmarks swap backends freely. The
request and the result are frozen values, so they can be stored and compared as-is.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class GenerationError(Exception):
    """The model could not produce an answer; the message is one sentence a user can act on."""


@dataclass(frozen=True)
class Message:
    role: str  # "system", "user" or "assistant"
    content: str

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class GenerationRequest:
    """What to generate. Give ``messages`` (chat) or ``prompt`` (raw text, for models such as KernelLLM).

    ``temperature`` 0 means greedy decoding; together with ``seed`` it makes answers repeatable.
    ``grammar`` is optional GBNF text that constrains the output. ``prefill`` is the beginning of the
    answer, written for the model (an edit's answer begins with the edited function's first line, so a
    small model writes that function instead of copying every other one first); the in-process backend
    continues from it and returns it as the start of the text, a server backend asks without it.
    """

    messages: tuple[Message, ...] = ()
    prompt: str | None = None
    max_tokens: int = 1024
    temperature: float = 0.7
    top_p: float = 0.95
    seed: int | None = None
    stop: tuple[str, ...] = ()
    grammar: str | None = None
    prefill: str = ""

    def __post_init__(self) -> None:
        # accept lists and dicts for convenience, store tuples of Message so the value stays frozen
        msgs = tuple(m if isinstance(m, Message) else Message(m["role"], m["content"]) for m in self.messages)
        object.__setattr__(self, "messages", msgs)
        object.__setattr__(self, "stop", tuple(self.stop))
        if not msgs and self.prompt is None:
            raise ValueError("a GenerationRequest needs messages or a prompt")
        if msgs and self.prompt is not None:
            raise ValueError("a GenerationRequest takes messages or a prompt, not both")
        if self.max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")

    @classmethod
    def chat(cls, user: str, system: str | None = None, **kwargs) -> GenerationRequest:
        msgs = ([Message("system", system)] if system else []) + [Message("user", user)]
        return cls(messages=tuple(msgs), **kwargs)


@dataclass(frozen=True)
class Generation:
    """One answer and what it cost. ``finish_reason``: "stop", "length" or "cancelled".

    ``tokens_per_s`` is the decoding speed after the first token; ``prompt_seconds`` is the time to
    the first token (prompt processing runs at a different rate, and a reused prefix makes it cheap).
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    tokens_per_s: float
    model: str
    finish_reason: str
    cancelled: bool = False
    prompt_seconds: float = 0.0

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def decode_speed(completion_tokens: int, seconds: float, prompt_seconds: float) -> float:
    """Tokens per second after the first token (falls back to the overall rate for tiny answers)."""
    decode = seconds - prompt_seconds
    if completion_tokens > 1 and decode > 0:
        return (completion_tokens - 1) / decode
    return completion_tokens / seconds if seconds > 0 else 0.0


OnToken = Callable[[str], None]

REPEAT_SPAN = 400  # characters: about 120 tokens, longer than any line a kernel repeats on purpose


def repeating(text: str, span: int = REPEAT_SPAN) -> bool:
    """Whether an answer has fallen into a loop: its last ``span`` characters already appeared, whole,
    earlier in it. A small model that starts writing the same functions again never gets out (the
    default model wrote three copies of softmax's helpers and ran out of tokens before the kernel);
    stopping there saves the rest of the token budget."""
    return len(text) >= 2 * span and text.find(text[-span:], 0, len(text) - span) >= 0


@runtime_checkable
class Generator(Protocol):
    """A loaded model that turns requests into text; must be safe to call repeatedly (not concurrently)."""

    @property
    def name(self) -> str: ...

    @property
    def context_size(self) -> int: ...

    def generate(self, request: GenerationRequest, on_token: OnToken | None = None,
                 cancel: threading.Event | None = None) -> Generation: ...

    def count_tokens(self, text: str) -> int: ...

    def close(self) -> None: ...


def longest_stop_prefix(text: str, stops: Sequence[str]) -> int:
    """How many trailing characters of ``text`` could be the start of a stop string.

    Streaming must hold those back: they might become a stop string with the next token, and a stop
    string never reaches the caller.
    """
    best = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), 0, -1):
            if text.endswith(s[:k]):
                best = max(best, k)
                break
    return best


def find_stop(text: str, stops: Sequence[str]) -> int:
    """Index where the earliest stop string starts in ``text``, or -1."""
    hits = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return min(hits) if hits else -1
