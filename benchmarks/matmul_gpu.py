"""The matmul exemplar (Triton, fp32 as three TF32 products) on the linear layers of the GPU-sized
decoder block (``resources/examples/llm_block_gpu.py``: 4096 tokens, hidden 2048, MLP 5632).

Each shape is written as the profile writes a linear target (``F.linear(x, weight, None)``), the
exemplar is fitted to it exactly as a search places it as a seed (``search.matmul_seed``), and
measured in device time (a CUDA graph of ``--reps`` calls replayed after an L2 flush, median of
``--samples``; ``gpu_exemplars.DeviceClock``) beside eager PyTorch (cuBLAS fp32), torch.compile, and
cuBLAS with TF32 allowed (plain TF32: fast, but not fp32's accuracy; for scale). Accuracy: relative
L2 error against float64 (the evaluator's fp32 check is 2e-5).

Also ``split``: the diffusion block's spatial attention (4 x 4096 positions x 256 channels, no mask)
computed as the exemplar's two products around torch's softmax, against torch.compile's attention.

The floor: the FLOPs at the H200's dense TF32 rate divided by three, or the bytes at 4.3 TB/s.

    PYTHONPATH=$PWD TORCH_CUDA_ARCH_LIST=9.0 python3 benchmarks/matmul_gpu.py

Prints a table and writes ``$OUT/matmul_gpu.json`` when ``OUT`` is set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from attention_gpu import BANDWIDTH, TF32_DENSE, load  # noqa: E402

# (name, tokens, in features, out features): the decoder block's products
SHAPES = [("qkv", 4096, 2048, 6144), ("wo", 4096, 2048, 2048), ("mlp_up", 4096, 2048, 5632),
          ("mlp_down", 4096, 5632, 2048)]

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, weight):
        linear = torch.nn.functional.linear(x, weight, None)
        return linear


def get_inputs():
    return [torch.randn(4, {t4}, {k}), torch.randn({n}, {k}) * {k} ** -0.5]
'''


def run_shape(name: str, tokens: int, k: int, n: int, clock) -> dict:
    import torch
    import torch.nn.functional as F

    from kforge_desktop.search.matmul_seed import matmul_module

    source = PROBLEM.format(t4=tokens // 4, k=k, n=n)
    seed_source = matmul_module(source)
    row: dict = {"shape": name, "m": tokens, "k": k, "n": n, "seed": seed_source is not None}
    if seed_source is None:
        return row
    seed = load(seed_source, f"seed_{name}")
    ref_mod = load(source, f"problem_{name}")
    torch.manual_seed(0)
    x, w = (t.cuda() for t in ref_mod.get_inputs())
    ours = seed.ModelNew().cuda()
    model = ref_mod.Model().cuda()
    with torch.no_grad():
        ref64 = F.linear(x.double(), w.double())
        out = ours(x, w)
        best = seed._matmul_kernel.best_config
        row["config"] = {**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages}
        row["rel_l2_seed"] = float((out.double() - ref64).norm() / ref64.norm())
        row["rel_l2_eager"] = float((model(x, w).double() - ref64).norm() / ref64.norm())
        flops = 2.0 * tokens * k * n
        nbytes = 4.0 * (tokens * k + k * n + tokens * n)
        row["floor_ms"] = 1e3 * max(3 * flops / TF32_DENSE, nbytes / BANDWIDTH)
        row["eager_ms"] = clock.measure(lambda: model(x, w))[0]
        compiled = torch.compile(model)
        row["compile_ms"] = clock.measure(lambda: compiled(x, w))[0]
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            row["tf32_ms"] = clock.measure(lambda: model(x, w))[0]
            row["rel_l2_tf32"] = float((model(x, w).double() - ref64).norm() / ref64.norm())
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
        row["seed_ms"] = clock.measure(lambda: ours(x, w))[0]
        row["seed_tflops"] = flops / row["seed_ms"] / 1e9
    return row


def run_split(clock) -> dict:
    """The spatial attention as two exemplar products around a softmax, against torch.compile."""
    import torch

    from kforge_desktop.search.attention_seed import exemplar_code

    mm = load("import torch\n" + exemplar_code("matmul"), "split_matmul")
    torch.manual_seed(0)
    x = torch.randn(4, 768, 64, 64, device="cuda")
    scale = 256 ** -0.5

    def qkv(x):
        q, k, v = x.chunk(3, dim=1)
        b, c, h, w = q.shape
        return q.reshape(b, c, h * w).transpose(1, 2), k.reshape(b, c, h * w), v.reshape(b, c, h * w).transpose(1, 2)

    def reference(x):
        q, k, v = qkv(x)
        probs = torch.softmax(torch.bmm(q, k) * scale, dim=-1)
        return torch.bmm(probs, v).transpose(1, 2).reshape(x.shape[0], -1, *x.shape[2:])

    def split(x):
        q, k, v = qkv(x)
        probs = torch.softmax(mm.matmul(q, k, alpha=scale), dim=-1)
        return mm.matmul(probs, v).transpose(1, 2).reshape(x.shape[0], -1, *x.shape[2:])

    row: dict = {"shape": "split_attention"}
    with torch.no_grad():
        ref64 = reference(x.double())
        row["rel_l2_seed"] = float((split(x).double() - ref64).norm() / ref64.norm())
        compiled = torch.compile(reference)
        row["compile_ms"] = clock.measure(lambda: compiled(x))[0]
        row["eager_ms"] = clock.measure(lambda: reference(x))[0]
        row["seed_ms"] = clock.measure(lambda: split(x))[0]
        split_c = torch.compile(split)  # the softmax fused by torch.compile around the two products
        row["seed_compiled_softmax_ms"] = clock.measure(lambda: split_c(x))[0]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--no-split", action="store_true")
    parser.add_argument("--only-split", action="store_true")
    args = parser.parse_args(argv)
    from gpu_exemplars import DeviceClock

    clock = DeviceClock(args.reps, args.samples)
    rows = []
    for shape in [] if args.only_split else SHAPES:
        try:
            rows.append(run_shape(*shape, clock))
        except Exception:
            rows.append({"shape": shape[0], "error": traceback.format_exc()[-2000:]})
        print(json.dumps(rows[-1], indent=1), flush=True)
    if not args.no_split:
        try:
            rows.append(run_split(clock))
        except Exception:
            rows.append({"shape": "split_attention", "error": traceback.format_exc()[-2000:]})
        print(json.dumps(rows[-1], indent=1), flush=True)
    print(f"\n{'shape':9} {'seed ms':>8} {'TFLOP/s':>8} {'floor':>7} {'eager':>7} {'compile':>8} {'tf32':>7} "
          f"{'seed/floor':>10} {'compile/seed':>12} {'rel L2':>9}")
    for r in rows:
        if "floor_ms" in r:
            print(f"{r['shape']:9} {r['seed_ms']:8.4f} {r['seed_tflops']:8.1f} {r['floor_ms']:7.4f} {r['eager_ms']:7.4f} "
                  f"{r['compile_ms']:8.4f} {r['tf32_ms']:7.4f} {r['seed_ms'] / r['floor_ms']:10.2f} "
                  f"{r['compile_ms'] / r['seed_ms']:12.2f} {r['rel_l2_seed']:9.2e}")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "matmul_gpu.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
