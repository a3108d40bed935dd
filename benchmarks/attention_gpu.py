"""The flash-attention exemplar (Triton) on the two GPU-sized attentions of the example models.

For each problem of ``benchmarks/problems_attention/`` (the diffusion block's spatial attention, the
LLM block's causal attention) this script fits the exemplar to the problem exactly as a search
places it as a seed (``search.attention_seed``), then measures, in device time (a CUDA graph of
``--reps`` calls replayed after an L2 flush, median of ``--samples``; ``gpu_exemplars.DeviceClock``):
the seed (with the tile sizes its autotuning chose on this card, reported), eager PyTorch,
``torch.compile``, and PyTorch's own fused fp32 attention (``F.scaled_dot_product_attention``) for
scale. Accuracy is the relative L2 error against the reference computed in float64 (the evaluator's
fp32 check is 2e-5).

The floor: the FLOPs of the two products (the causal one counts half) at the H200's dense TF32
tensor rate divided by three (fp32 accuracy takes three TF32 products), or the bytes of the inputs
and the output at 4.3 TB/s, whichever is longer.

    PYTHONPATH=$PWD TORCH_CUDA_ARCH_LIST=9.0 python3 benchmarks/attention_gpu.py

Prints a table and writes ``$OUT/attention_gpu.json`` when ``OUT`` is set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

PROBLEMS = REPO / "benchmarks" / "problems_attention"
TF32_DENSE = 494e12  # H200 (SXM) dense TF32 tensor FLOP/s
BANDWIDTH = 4.3e12


def load(source: str, name: str) -> types.ModuleType:
    """A module from a file (Triton reads a kernel's source from its file)."""
    import importlib.util
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="kforge-attention-")) / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # torch.compile of a function in it imports it by name
    spec.loader.exec_module(module)
    return module


def floor_ms(name: str, inputs, out) -> float:
    x = inputs[0]
    if name == "spatial":
        b, c3, h, w = x.shape
        n, d = h * w, c3 // 3
        flops = 2 * 2 * b * n * n * d
    else:
        b, t, d3 = x.shape
        flops = 2 * 2 * b * t * t * (d3 // 3) / 2
    bytes_ = sum(t.numel() * t.element_size() for t in inputs) + out.numel() * out.element_size()
    return max(3 * flops / TF32_DENSE, bytes_ / BANDWIDTH) * 1e3


def sdpa_fn(name: str, x):
    import torch.nn.functional as F

    if name == "spatial":
        q, k, v = x.chunk(3, dim=1)
        b, c, h, w = q.shape
        q, k, v = (t.reshape(b, c, h * w).transpose(1, 2) for t in (q, k, v))
        return lambda: F.scaled_dot_product_attention(q, k, v, scale=0.0625)
    q, k, v = x.view(4, 1024, 3, 16, 128).permute(2, 0, 3, 1, 4).unbind(0)
    return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)


def run_problem(name: str, clock) -> dict:
    import torch

    from kforge_desktop.search.attention_seed import attention_module

    source = (PROBLEMS / f"{name}.py").read_text()
    ref_mod = load(source, f"problem_{name}")
    seed_source = attention_module(source)
    row: dict = {"problem": name, "seed": seed_source is not None}
    if seed_source is None:
        return row
    seed = load(seed_source, f"seed_{name}")
    torch.manual_seed(0)
    inputs = [t.cuda() for t in ref_mod.get_inputs()]
    model = ref_mod.Model().cuda().eval()
    ours = seed.ModelNew().cuda().eval()
    with torch.no_grad():
        ref64 = ref_mod.Model().double()(*[t.double() if t.is_floating_point() else t for t in inputs])
        out = ours(*inputs)
        best = seed._attention_kernel.best_config  # what the exemplar's autotuning chose on this card
        row["config"] = {**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages}
        row["rel_l2_seed"] = float((out.double() - ref64).norm() / ref64.norm())
        row["rel_l2_eager"] = float((model(*inputs).double() - ref64).norm() / ref64.norm())
        row["floor_ms"] = floor_ms(name, inputs, out)
        row["eager_ms"] = clock.measure(lambda: model(*inputs))[0]
        compiled = torch.compile(model)
        row["compile_ms"] = clock.measure(lambda: compiled(*inputs))[0]
        row["sdpa_ms"] = clock.measure(sdpa_fn(name, inputs[0]))[0]
        row["seed_ms"] = clock.measure(lambda: ours(*inputs))[0]
    return row



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", default="spatial,causal")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--samples", type=int, default=15)
    args = parser.parse_args(argv)
    from gpu_exemplars import DeviceClock

    clock = DeviceClock(args.reps, args.samples)
    rows = []
    for name in args.problems.split(","):
        try:
            rows.append(run_problem(name, clock))
        except Exception:
            rows.append({"problem": name, "error": traceback.format_exc()[-2000:]})
        print(json.dumps(rows[-1], indent=1), flush=True)
    print(f"\n{'problem':8} {'seed ms':>8} {'floor':>7} {'eager':>7} {'compile':>8} {'sdpa':>7} "
          f"{'seed/floor':>10} {'compile/seed':>12} {'rel L2':>9}  config")
    for r in rows:
        if "seed_ms" in r:
            print(f"{r['problem']:8} {r['seed_ms']:8.4f} {r['floor_ms']:7.4f} {r['eager_ms']:7.4f} "
                  f"{r['compile_ms']:8.4f} {r['sdpa_ms']:7.4f} {r['seed_ms'] / r['floor_ms']:10.2f} "
                  f"{r['compile_ms'] / r['seed_ms']:12.2f} {r['rel_l2_seed']:9.2e}  {r['config']}")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "attention_gpu.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
