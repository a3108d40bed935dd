"""Evaluator throughput: build / verify / time seconds per candidate and candidates per hour.

Generates distinct small RMSNorm kernels (C++/OpenMP for the CPU backend, CUDA for the GPU), evaluates
them with a cold build cache using the default worker count, then again warm.

    python benchmarks/eval_speed.py --device cpu  [--n 8] [--workers W] [--out result.json]
    python benchmarks/eval_speed.py --device cuda
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CPP = r'''
#include <cmath>
#include <cstdint>
extern "C" void rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t cols, float eps) {
  #pragma omp parallel for schedule(SCHED)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols; float* yr = y + r * cols;
    ACC acc = 0;
    #pragma omp simd reduction(+:acc)
    for (int64_t c = 0; c < cols; ++c) acc += (ACC)xr[c] * xr[c];
    const float inv = 1.0f / std::sqrt((float)(acc / cols) + eps);
    for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * inv * w[c];
  }
}
'''
CUDA = r'''
#include <cuda_runtime.h>
#include <cstdint>
__global__ void rms_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                           int64_t cols, float eps) {
  const float* xr = x + blockIdx.x * cols; float* yr = y + blockIdx.x * cols;
  ACC acc = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) { float v = xr[c]; acc += (ACC)v * v; }
  __shared__ ACC red[THREADS];
  red[threadIdx.x] = acc; __syncthreads();
  for (int s = THREADS / 2; s > 0; s >>= 1) { if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s]; __syncthreads(); }
  const float inv = rsqrtf((float)(red[0] / cols) + eps);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = xr[c] * inv * w[c];
}
extern "C" int rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t cols, float eps,
                        cudaStream_t stream) {
  rms_kernel<<<(unsigned)rows, THREADS, 0, stream>>>(x, w, y, cols, eps);
  return (int)cudaGetLastError();
}
'''
MODULE = '''import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r"""{kernel}"""
_lib = load_native(KERNEL_SOURCE, lang="{lang}")


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _lib.rms_norm(x, self.weight, out, x.shape[0], x.shape[1], self.eps)
        return out
'''


def candidates(device: str, n: int) -> list[str]:
    out = []
    if device == "cuda":
        for threads in (64, 128, 256, 512, 1024):
            for acc in ("float", "double"):
                out.append(MODULE.format(kernel=CUDA.replace("THREADS", str(threads)).replace("ACC", acc), lang="cuda"))
    else:
        for sched in ("static", "dynamic", "guided", "static,4", "dynamic,8"):
            for acc in ("float", "double"):
                out.append(MODULE.format(kernel=CPP.replace("SCHED", sched).replace("ACC", acc), lang="cpp"))
    return out[:n]


def run(device: str, n: int, workers: int | None, cache: str) -> dict:
    from kforge_desktop.kernels.evaluator import Evaluator, default_workers
    from kforge_desktop.kernels.options import EvalOptions
    from kforge_desktop.problem.problem import load_problem

    problem = load_problem(REPO / "resources" / "problems" / "rms_norm.py")
    srcs = candidates(device, n)
    workers = workers or default_workers(device)
    opts = EvalOptions(compare_compile=False)
    result = {"device": device, "workers": workers, "n": len(srcs)}
    with Evaluator(device, workers=workers, options=opts, build_cache=cache) as ev:
        ev.evaluate(problem, srcs[0].replace("rms_norm(", "rms_norm_warmup("))  # start the workers
        for label in ("cold", "warm"):
            t0 = time.perf_counter()
            futs = [ev.submit(problem, s) for s in srcs]
            verdicts = [f.result() for f in futs]
            wall = time.perf_counter() - t0
            result[label] = {
                "wall_s": wall,
                "candidates_per_hour": len(srcs) / wall * 3600,
                "statuses": [v.status for v in verdicts],
                "build_s_median": statistics.median(v.build_s or 0 for v in verdicts),
                "verify_s_median": statistics.median(v.verify_s or 0 for v in verdicts),
                "time_s_median": statistics.median(v.time_s or 0 for v in verdicts),
                "build_s": [v.build_s for v in verdicts],
            }
    return result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import torch

    cache = tempfile.mkdtemp(prefix="kforge-bench-builds-")
    res = run(args.device, args.n, args.workers, cache)
    res["machine"] = {"cpus": os.cpu_count(), "torch": torch.__version__,
                      "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else ""}
    for label in ("cold", "warm"):
        r = res[label]
        print(f"{label}: {res['n']} candidates, {res['workers']} workers, wall {r['wall_s']:.1f} s -> "
              f"{r['candidates_per_hour']:.0f}/hour; median build {r['build_s_median']:.2f} s, "
              f"verify {r['verify_s_median']:.2f} s, time {r['time_s_median']:.2f} s; statuses {set(r['statuses'])}")
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
