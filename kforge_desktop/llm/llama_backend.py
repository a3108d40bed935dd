"""A GGUF model running in this process through llama.cpp (llama-cpp-python).

Why our own token loop instead of ``create_chat_completion``: we need exact token counts while
streaming, cancellation between any two tokens, and stop strings that never leak into the stream.
``Llama.generate`` gives us the tokens one by one and keeps llama-cpp-python's prompt-prefix reuse:
the same ``Llama`` object is kept for the whole session, so a prompt that shares its beginning with
the previous one (same system prompt, same problem) only evaluates the new tail.

The GGUF header is checked with ``gguf.read_header`` before llama.cpp sees the file, because
llama.cpp may abort the whole process on a corrupt file instead of raising.
"""

from __future__ import annotations

import codecs
import collections
import contextlib
import ctypes
import gc
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

from .default_model import VARIANTS, check_installed
from .generator import (
    Generation,
    GenerationError,
    GenerationRequest,
    OnToken,
    decode_speed,
    find_stop,
    longest_stop_prefix,
)
from .gguf import GGUFError, GGUFInfo, read_header

DEFAULT_N_CTX = 8192
RAW_MODEL_HINTS = ("kernelllm",)  # models trained on a raw prompt, not a chat template


def default_threads() -> int:
    """Threads for llama.cpp: ``$KFORGE_LLM_THREADS``, else all cores but one (half on big machines).

    Why not all cores: llama.cpp's threads spin while they wait for each other, so when anything else
    needs a core (the evaluator compiling a kernel, the GUI) a fully subscribed model slows down by an
    order of magnitude (measured on 2 cores: 20 tokens/s with 1 thread against 0.9 with 2 while another
    process was busy). One spare core keeps generation steady.
    """
    env = os.environ.get("KFORGE_LLM_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, n - 1) if n <= 8 else n // 2


_LOG_CALLBACK = None  # kept referenced: llama.cpp calls it from C for the life of the process
_RECENT_ERRORS: collections.deque[str] = collections.deque(maxlen=4)


def _install_log_filter(llama_cpp) -> None:
    """Keep llama.cpp quiet: its informational chatter would bury the app's own output.

    Error lines are remembered (and shown in our one-sentence errors); ``KFORGE_LLAMA_LOG=1`` prints
    everything for debugging. ggml's levels: 1 debug, 2 info, 3 warn, 4 error, 5 continuation.
    """
    global _LOG_CALLBACK
    if _LOG_CALLBACK is not None:
        return
    state = {"level": 0}

    @llama_cpp.llama_log_callback
    def _callback(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        if level != 5:
            state["level"] = level
        line = text.decode("utf-8", errors="replace")
        if os.environ.get("KFORGE_LLAMA_LOG"):
            sys.stderr.write(line)
        elif state["level"] >= 4 and line.strip():
            _RECENT_ERRORS.append(line.strip())

    llama_cpp.llama_log_set(_callback, ctypes.c_void_p(0))
    _LOG_CALLBACK = _callback


class _Captured:
    text = ""


@contextlib.contextmanager
def _capture_fd2():
    """Collect what C code writes to stderr (llama.cpp's grammar parser prints there, not to the log)."""
    captured = _Captured()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            yield captured
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            captured.text = tmp.read().decode("utf-8", errors="replace")


def _ignore_llama_cpp_teardown(previous):
    """An unraisable-exception hook that hides llama-cpp-python's destructor noise after a failed load."""

    def hook(unraisable) -> None:
        if getattr(unraisable.object, "__module__", "").startswith("llama_cpp"):
            return
        previous(unraisable)

    return hook


def _import_llama_cpp():
    try:
        import llama_cpp
    except ImportError as err:
        raise GenerationError(
            f"llama-cpp-python is not installed ({err}); install it, or point the app at a local "
            "OpenAI-compatible server instead."
        ) from None
    _install_log_filter(llama_cpp)
    return llama_cpp


def check_model_file(path: Path) -> GGUFInfo:
    """Header (and, for the default models, size) check; raises GenerationError with one sentence."""
    try:
        info = read_header(path)
    except GGUFError as err:
        raise GenerationError(str(err)) from None
    known = next((v for v in VARIANTS.values() if v.filename == path.name), None)
    problem = check_installed(path, known) if known is not None else None
    if problem:
        raise GenerationError(problem)
    if info.tensor_count == 0:
        raise GenerationError(f"{path} holds no tensors, so it is not a usable model.")
    return info


class LlamaCppGenerator:
    """A loaded GGUF; one call at a time (a lock serialises callers)."""

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        n_ctx: int | None = None,
        n_threads: int | None = None,
        n_gpu_layers: int | None = None,
        chat_template: str | None = None,
        raw_completion: bool | None = None,
        n_batch: int = 512,
    ) -> None:
        self.path = Path(model_path)
        self.info = check_model_file(self.path)
        llama_cpp = _import_llama_cpp()
        self._llama_cpp = llama_cpp
        if n_gpu_layers is None:
            n_gpu_layers = -1 if llama_cpp.llama_supports_gpu_offload() else 0
        self.n_gpu_layers = n_gpu_layers
        trained = self.info.context_length or DEFAULT_N_CTX
        self._n_ctx = int(n_ctx or min(DEFAULT_N_CTX, trained))
        self.n_threads = int(n_threads or default_threads())
        self._llm = self._load(llama_cpp, n_batch)
        self._n_ctx = self._llm.n_ctx()
        self._aligned = 0  # cached positions that were computed in whole chunks (_evaluate_prompt)
        self._lock = threading.Lock()
        self._active_cancel: list[threading.Event | None] = [None]  # the running request's cancel event
        self._abort_cb = self._install_abort_callback()
        template = chat_template or self.info.chat_template
        if raw_completion is None:
            raw_completion = template is None or any(h in self.name.lower() or h in self.path.name.lower()
                                                     for h in RAW_MODEL_HINTS)
        self.raw_completion = raw_completion
        self._formatter = None if raw_completion else self._make_formatter(template)

    def _load(self, llama_cpp, n_batch: int):
        """Create the ``Llama`` object; a failure becomes one sentence with llama.cpp's own reason."""
        _RECENT_ERRORS.clear()
        failure: str | None = None
        previous_hook = sys.unraisablehook
        sys.unraisablehook = _ignore_llama_cpp_teardown(previous_hook)
        try:
            try:
                return llama_cpp.Llama(
                    model_path=str(self.path),
                    n_ctx=self._n_ctx,
                    n_batch=min(n_batch, self._n_ctx),
                    n_threads=self.n_threads,
                    n_threads_batch=self.n_threads,
                    n_gpu_layers=self.n_gpu_layers,
                    verbose=False,
                )
            except (ValueError, RuntimeError, OSError) as err:
                failure = str(err)
            gc.collect()  # the half-built model's destructor complains; let it do so under our hook
        finally:
            sys.unraisablehook = previous_hook
        specific = [e for e in _RECENT_ERRORS if "failed to load model" not in e]
        detail = (specific or list(_RECENT_ERRORS) or [failure])[0]
        raise GenerationError(f"llama.cpp could not load {self.path.name} ({detail}).")

    def _install_abort_callback(self):
        """Let a cancel interrupt prompt processing too (a long prompt takes many seconds on a CPU).

        llama.cpp polls the callback while it computes; returning True makes ``llama_decode`` stop,
        which llama-cpp-python reports as a RuntimeError that ``_generate`` turns into a cancellation.
        The Python binding lacks the setter, so it is bound here; without it, cancellation still
        happens between tokens.
        """
        lc = self._llama_cpp
        try:
            fn = lc.llama_cpp._lib.llama_set_abort_callback
        except AttributeError:
            return None
        fn.argtypes = [ctypes.c_void_p, lc.ggml_abort_callback, ctypes.c_void_p]
        fn.restype = None
        active = self._active_cancel

        @lc.ggml_abort_callback
        def _should_abort(_data) -> bool:
            event = active[0]
            return event is not None and event.is_set()

        fn(self._llm._ctx.ctx, _should_abort, None)
        return _should_abort  # referenced for as long as the context lives

    # -- properties of the Generator protocol -------------------------------------------------------
    @property
    def name(self) -> str:
        return self.info.name

    @property
    def context_size(self) -> int:
        return self._n_ctx

    # -- prompt construction -------------------------------------------------------------------------
    def _make_formatter(self, template: str):
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        llm = self._llm
        eos_id, bos_id = llm.token_eos(), llm.token_bos()
        eos = llm.detokenize([eos_id], special=True).decode("utf-8", "replace") if eos_id != -1 else ""
        bos = llm.detokenize([bos_id], special=True).decode("utf-8", "replace") if bos_id != -1 else ""
        self._bos_text = bos
        try:
            return Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)
        except Exception as err:  # jinja2's TemplateSyntaxError and friends
            self.close()
            raise GenerationError(f"the chat template in {self.path.name} is not valid ({err}); load it as a "
                                  "raw-completion model instead.") from None

    def render_prompt(self, request: GenerationRequest) -> str:
        """The exact text the model sees (chat template applied, unless raw completion), ending with
        the request's prefill: the model continues the answer from there."""
        if request.prompt is not None:
            return request.prompt + request.prefill
        messages = [m.to_dict() for m in request.messages]
        if self._formatter is None:
            # a raw-prompt model: the conversation as plain text, system first
            return "\n\n".join(m["content"] for m in messages) + ("\n\n" + request.prefill if request.prefill else "")
        try:
            return self._formatter(messages=messages).prompt + request.prefill
        except Exception as err:  # a template that rejects the conversation (e.g. role order)
            raise GenerationError(f"the model's chat template rejected the conversation ({err}).") from None

    def _tokenize_prompt(self, text: str, templated: bool) -> list[int]:
        llm = self._llm
        add_bos = bool(llm._model.add_bos_token()) and llm.token_bos() != -1
        if templated and getattr(self, "_bos_text", "") and text.startswith(self._bos_text):
            add_bos = False  # the template already wrote it
        return llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=templated)

    def count_tokens(self, text: str) -> int:
        if self._llm is None:
            raise GenerationError("the model was closed.")
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _grammar(self, gbnf: str | None):
        """Validate GBNF in llama.cpp first: an invalid grammar handed to the sampler crashes the process."""
        if not gbnf:
            return None
        lc = self._llama_cpp
        with _capture_fd2() as captured:
            sampler = lc.llama_sampler_init_grammar(self._llm._model.vocab, gbnf.encode("utf-8"), b"root")
        if not sampler:
            lines = [ln.strip() for ln in captured.text.splitlines() if ln.strip()]
            detail = next((ln.split("error parsing grammar:", 1)[1].strip() for ln in lines
                           if "error parsing grammar:" in ln), None)
            if detail is None:
                detail = "it has no `root` rule" if any("root" in ln for ln in lines) else "llama.cpp rejected it"
            raise GenerationError(f"the output grammar is not valid GBNF ({detail}).")
        lc.llama_sampler_free(sampler)
        return lc.LlamaGrammar.from_string(gbnf, verbose=False)

    # -- generation ---------------------------------------------------------------------------------
    def generate(self, request: GenerationRequest, on_token: OnToken | None = None,
                 cancel: threading.Event | None = None) -> Generation:
        if self._llm is None:
            raise GenerationError("the model was closed.")
        with self._lock:
            self._active_cancel[0] = cancel
            try:
                return self._generate(request, on_token, cancel)
            finally:
                self._active_cancel[0] = None

    def _generate(self, request: GenerationRequest, on_token: OnToken | None,
                  cancel: threading.Event | None) -> Generation:
        llm = self._llm
        templated = request.prompt is None and self._formatter is not None
        tokens = self._tokenize_prompt(self.render_prompt(request), templated)
        n_prompt = len(tokens)
        if n_prompt == 0:
            raise GenerationError("the prompt is empty.")
        if n_prompt >= self._n_ctx:
            raise GenerationError(f"the prompt has {n_prompt} tokens, more than the model's context of "
                                  f"{self._n_ctx}; shorten it or load the model with a larger context.")
        max_new = min(request.max_tokens, self._n_ctx - n_prompt)
        grammar = self._grammar(request.grammar)
        stops = [s for s in request.stop if s]
        llm.set_seed(request.seed if request.seed is not None else random.randrange(2**31))
        greedy = request.temperature <= 0
        vocab = llm._model.vocab
        is_eog = self._llama_cpp.llama_vocab_is_eog

        t0 = time.perf_counter()
        first_at: float | None = None
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text, emitted, n_out = request.prefill, 0, 0  # the answer begins with the prefill
        finish, hit_stop = "length", False
        gen = None
        try:
            if cancel is not None and cancel.is_set():
                finish = "cancelled"
            else:
                self._evaluate_prompt(tokens)  # a cancel aborts it with a RuntimeError (handled below)
                gen = llm.generate(tokens, temp=0.0 if greedy else request.temperature, top_p=request.top_p,
                                   top_k=40, min_p=0.05, repeat_penalty=1.0, grammar=grammar)
            for tok in gen or ():
                if first_at is None:
                    first_at = time.perf_counter()
                if is_eog(vocab, tok):
                    finish = "stop"
                    break
                n_out += 1
                text += decoder.decode(llm.detokenize([tok]))
                cut = find_stop(text[len(request.prefill):], stops)  # stops count in the model's part
                if cut >= 0:
                    text, finish, hit_stop = text[:len(request.prefill) + cut], "stop", True
                    break
                safe = len(text) - longest_stop_prefix(text, stops)
                if on_token is not None and safe > emitted:
                    on_token(text[emitted:safe])
                    emitted = safe
                if n_out >= max_new:
                    finish = "length"
                    break
                if cancel is not None and cancel.is_set():
                    finish = "cancelled"
                    break
        except RuntimeError as err:
            if cancel is None or not cancel.is_set():
                raise GenerationError(f"llama.cpp failed while generating ({err}).") from None
            finish = "cancelled"  # llama_decode was aborted by the cancel (see _install_abort_callback)
        finally:
            if gen is not None:
                gen.close()
        if not hit_stop:
            text += decoder.decode(b"", final=True)  # bytes of a character cut off by the end
        if on_token is not None and len(text) > emitted and finish != "cancelled":
            on_token(text[emitted:])
        seconds = time.perf_counter() - t0
        prompt_seconds = (first_at - t0) if first_at is not None else seconds
        return Generation(
            text=text,
            prompt_tokens=n_prompt,
            completion_tokens=n_out,
            seconds=seconds,
            tokens_per_s=decode_speed(n_out, seconds, prompt_seconds),
            model=self.name,
            finish_reason=finish,
            cancelled=finish == "cancelled",
            prompt_seconds=prompt_seconds,
        )

    def _evaluate_prompt(self, tokens: list[int]) -> None:
        """Evaluate all but the prompt's last token in chunks aligned to absolute positions.

        Why: llama.cpp's logits depend slightly on how the tokens were batched (a token evaluated
        alone and the same token in a batch of 500 give different rounding), and the sampler turns
        a last-digit difference into a different answer. Left to itself, a prompt seen before is
        re-evaluated from its last token only, a new one in one big batch, so the same seed gave
        different samples depending on what the cache held. Here every position is computed in the
        same chunk whatever the cache held: the reused prefix is cut to a whole number of chunks
        that an earlier prompt computed the same way, the rest goes in chunks of ``n_batch``
        starting at a multiple of it, and the last token is always evaluated alone (by
        ``Llama.generate``, which then finds every other position cached).
        """
        llm = self._llm
        chunk = llm.n_batch
        cached = llm._input_ids
        common = 0
        for a, b in zip(cached[: self._aligned], tokens[:-1]):
            if a != b:
                break
            common += 1
        keep = common // chunk * chunk
        llm.n_tokens = keep
        self._aligned = keep  # what stays true if the evaluation below is aborted by a cancel
        llm.eval(tokens[keep:-1])
        self._aligned = (len(tokens) - 1) // chunk * chunk

    def close(self) -> None:
        llm, self._llm = self._llm, None
        if llm is not None:
            llm.close()

    def __enter__(self) -> LlamaCppGenerator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
