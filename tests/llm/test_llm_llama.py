"""The real small GGUF through llama.cpp: text, counts, streaming, cancellation, determinism, grammar."""

from __future__ import annotations

import threading

import pytest

from kforge_desktop.llm.generator import GenerationError, GenerationRequest, Generator
from kforge_desktop.llm.llama_backend import LlamaCppGenerator

pytestmark = pytest.mark.llm

ASK = "Write a Python function `add(a, b)` that returns the sum."


@pytest.fixture(scope="module")
def gen(test_model_path):
    g = LlamaCppGenerator(test_model_path, n_ctx=2048)
    yield g
    g.close()


def test_is_a_generator_with_a_name_and_context(gen):
    assert isinstance(gen, Generator)
    assert "Qwen2.5 Coder" in gen.name
    assert gen.context_size == 2048
    assert gen.count_tokens("def add(a, b):\n    return a + b\n") > 5


def test_generates_text_with_token_counts_and_streams_it(gen):
    pieces: list[str] = []
    out = gen.generate(GenerationRequest.chat(ASK, max_tokens=24, temperature=0), on_token=pieces.append)
    assert out.text.strip()
    assert "".join(pieces) == out.text
    assert 1 <= out.completion_tokens <= 24
    assert out.prompt_tokens == gen.count_tokens(gen.render_prompt(GenerationRequest.chat(ASK)))
    assert out.finish_reason in ("stop", "length") and not out.cancelled
    assert out.tokens_per_s > 0 and out.seconds >= out.prompt_seconds > 0
    assert out.model == gen.name


def test_chat_template_from_the_gguf_is_used(gen):
    prompt = gen.render_prompt(GenerationRequest.chat("hi", system="be brief"))
    assert "<|im_start|>system\nbe brief<|im_end|>" in prompt
    assert prompt.rstrip().endswith("<|im_start|>assistant")
    out = gen.generate(GenerationRequest.chat("Say hello.", max_tokens=40, temperature=0))
    assert "<|im_end|>" not in out.text and "<|im_start|>" not in out.text


def test_temperature_zero_is_deterministic(gen):
    req = GenerationRequest.chat(ASK, max_tokens=20, temperature=0, seed=7)
    assert gen.generate(req).text == gen.generate(req).text


def test_same_seed_same_sample(gen):
    req = GenerationRequest.chat("Name a sorting algorithm and describe it.", max_tokens=16, temperature=1.0, seed=123)
    assert gen.generate(req).text == gen.generate(req).text


class _Chunks:
    """Records, for every position of the context, the batch of tokens llama.cpp computed it in.

    llama.cpp's logits depend (in the last digits, on some CPUs) on how the tokens were batched, so
    "same seed, same sample" holds on every machine only if each prompt position is computed in the
    same batch whatever the prompt cache held.
    """

    def __init__(self, gen: LlamaCppGenerator) -> None:
        self.where: dict[int, tuple[int, int]] = {}
        llm = gen._llm
        real_eval = llm.eval

        def eval_and_record(tokens):
            start = llm.n_tokens
            for i in range(0, len(tokens), llm.n_batch):
                n = min(len(tokens), i + llm.n_batch) - i
                for p in range(start + i, start + i + n):
                    self.where[p] = (start + i, start + i + n)
            return real_eval(tokens)

        llm.eval = eval_and_record

    def of_prompt(self, n_prompt: int) -> list[tuple[int, int]]:
        return [self.where[p] for p in range(n_prompt)]


def test_same_seed_same_sample_whatever_the_cache_held(test_model_path):
    """A request gives the same sample on a cold model, after itself, and after prompts that share
    a long or a short beginning with it; its prompt is computed in the same batches every time."""
    warm = LlamaCppGenerator(test_model_path, n_ctx=2048, n_batch=16)
    cold = LlamaCppGenerator(test_model_path, n_ctx=2048, n_batch=16)
    try:
        warm_chunks, cold_chunks = _Chunks(warm), _Chunks(cold)
        task = "Name a sorting algorithm, describe how it works and give its complexity."
        system = "You are a careful computer science teacher who answers in plain words."
        req = GenerationRequest.chat(task, system=system, max_tokens=12, temperature=1.2, seed=11)
        long_shared = GenerationRequest.chat(task + " Then compare it with merge sort.", system=system,
                                             max_tokens=4, temperature=1.2, seed=3)
        short_shared = GenerationRequest.chat("Say hi.", system=system, max_tokens=4, seed=4)
        first = cold.generate(req)
        expected = cold_chunks.of_prompt(first.prompt_tokens)
        assert len(set(expected)) > 2  # the prompt spans several batches, or the test shows nothing
        for before in (None, req, long_shared, short_shared, req):
            if before is not None:
                warm.generate(before)
            again = warm.generate(req)
            assert again.text == first.text, f"after {before and before.messages[-1].content!r}"
            assert warm_chunks.of_prompt(again.prompt_tokens) == expected
    finally:
        warm.close()
        cold.close()


def test_cancel_stops_between_tokens(gen):
    cancel = threading.Event()
    seen: list[str] = []

    def on_token(piece: str) -> None:
        seen.append(piece)
        if len(seen) == 3:
            cancel.set()

    out = gen.generate(GenerationRequest.chat(ASK, max_tokens=200, temperature=0), on_token=on_token, cancel=cancel)
    assert out.cancelled and out.finish_reason == "cancelled"
    assert out.completion_tokens <= 5
    already = threading.Event()
    already.set()
    early = gen.generate(GenerationRequest.chat(ASK, max_tokens=50), cancel=already)
    assert early.cancelled and early.completion_tokens == 0 and early.text == ""


def test_stop_strings_end_the_answer_and_never_stream(gen):
    pieces: list[str] = []
    req = GenerationRequest.chat("Count from 1 to 20, separated by commas.", max_tokens=60, temperature=0, stop=("7",))
    out = gen.generate(req, on_token=pieces.append)
    assert out.finish_reason == "stop" and "7" not in out.text and "6" in out.text
    assert "".join(pieces) == out.text


def test_max_tokens_is_respected(gen):
    out = gen.generate(GenerationRequest.chat("Explain CUDA shared memory in detail.", max_tokens=8, temperature=0))
    assert out.completion_tokens == 8 and out.finish_reason == "length"


def test_grammar_constrains_the_answer(gen):
    req = GenerationRequest.chat("Is 7 a prime number? Answer yes or no.", max_tokens=8, temperature=0,
                                 grammar='root ::= "yes" | "no"')
    assert gen.generate(req).text in ("yes", "no")
    with pytest.raises(GenerationError, match="GBNF"):
        gen.generate(GenerationRequest.chat("x", max_tokens=4, grammar="root ::= ("))


def test_raw_prompt_completion(gen):
    out = gen.generate(GenerationRequest(prompt="def add(a, b):\n    return", max_tokens=6, temperature=0))
    assert "a" in out.text and out.prompt_tokens == gen.count_tokens("def add(a, b):\n    return")


def test_a_prefilled_answer_is_continued_and_returned_whole(gen):
    head = "```cpp\nint add(int a, int b) {\n"
    pieces: list[str] = []
    req = GenerationRequest.chat("Write a C++ function `add` that returns the sum of two ints.", max_tokens=30,
                                 temperature=0, prefill=head)
    assert gen.render_prompt(req).endswith("<|im_start|>assistant\n" + head)
    out = gen.generate(req, on_token=pieces.append)
    assert out.text.startswith(head) and "".join(pieces) == out.text
    body = out.text[len(head):]
    assert "return" in body and "int add(" not in body  # it went on inside the function, not from the start
    assert out.prompt_tokens == gen.count_tokens(gen.render_prompt(req))


def test_prompt_longer_than_the_context_is_one_sentence(gen):
    with pytest.raises(GenerationError, match="more than the model's context"):
        gen.generate(GenerationRequest.chat("word " * 3000, max_tokens=4))


def test_corrupt_and_truncated_models_are_refused_before_llama_cpp(tmp_path, test_model_path):
    truncated = tmp_path / "truncated.gguf"
    with open(test_model_path, "rb") as src:
        truncated.write_bytes(src.read(8_000_000))  # the header is whole, the tensors are not
    with pytest.raises(GenerationError, match="truncated"):
        LlamaCppGenerator(truncated)
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"\x00" * 4096)
    with pytest.raises(GenerationError, match="not a GGUF"):
        LlamaCppGenerator(garbage)


def test_closed_generator_says_so(test_model_path):
    g = LlamaCppGenerator(test_model_path, n_ctx=512)
    g.close()
    with pytest.raises(GenerationError, match="closed"):
        g.generate(GenerationRequest.chat("hi", max_tokens=2))


def test_code_comes_out_of_a_real_answer(gen):
    from kforge_desktop.llm.extract import extract_code

    ask = ('Write only this C++ function, in one ```cpp block, no explanation: extern "C" void '
           'kernel_forward(const float* x, float* out, int64_t n) that writes max(x[i], 0) into out[i].')
    whole = gen.generate(GenerationRequest.chat(ask, max_tokens=120, temperature=0))
    ex = extract_code(whole.text, function="kernel_forward", finished=whole.finish_reason != "length")
    assert ex.ok, ex.problem
    assert ex.code.lstrip().startswith(("extern", "#include")) and "```" not in ex.code
    cut = gen.generate(GenerationRequest.chat(ask, max_tokens=12, temperature=0))
    assert cut.finish_reason == "length"
    ex_cut = extract_code(cut.text, function="kernel_forward", finished=False)
    assert ex_cut.code is None and "cut off" in ex_cut.problem


def test_cancel_interrupts_prompt_processing_and_the_model_stays_usable(gen, monkeypatch):
    short = GenerationRequest.chat(ASK, max_tokens=12, temperature=0)
    before = gen.generate(short).text
    long_prompt = "Summarize this code:\n" + "\n".join(f"x{i} = compute({i}, y{i}) + {i * 7}" for i in range(80))
    request = GenerationRequest.chat(long_prompt, max_tokens=50, temperature=0)
    batches = -(-gen.count_tokens(gen.render_prompt(request)) // gen._llm.n_batch)
    assert batches >= 3  # the prompt takes several llama_decode calls, or the test shows nothing
    cancel = threading.Event()
    ctx = gen._llm._ctx
    real_decode = ctx.decode
    decodes: list[str] = []

    def decode_then_cancel(batch):
        try:
            real_decode(batch)
        except RuntimeError:
            decodes.append("aborted")
            raise
        decodes.append("done")
        cancel.set()  # the user presses Stop once the prompt's first batch is computed

    monkeypatch.setattr(ctx, "decode", decode_then_cancel)
    out = gen.generate(request, cancel=cancel)
    monkeypatch.undo()
    assert out.cancelled and out.completion_tokens == 0 and out.text == ""
    assert decodes == ["done", "aborted"]  # the next batch was interrupted; no later one was started
    assert gen.generate(short).text == before
