"""The GroupNorm+SiLU CUDA exemplar's block shape: threads per block and float4s per thread, swept.

The exemplar (resources/exemplars/cuda/group_norm_silu.cu) takes VEC (float4 a thread holds), THREADS
(threads a block) and MAX_PARTS (blocks a cluster) as macros; this builds it with several settings and
times each against eager and torch.compile on diffusion-like shapes (device time: CUDA events around 20
back-to-back calls after an L2 flush, median of 15), checking every output against F.group_norm + silu.
Its defaults are the fastest setting on the 16x512x64x64 problem of benchmarks/problems_gpu.

    PYTHONPATH=$PWD TORCH_CUDA_ARCH_LIST=9.0 python3 benchmarks/group_norm_variants.py   # writes $OUT/gn_variants.json
"""
import concurrent.futures as cf
import json
import os
import statistics
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.cpp_extension import load

HERE = Path(tempfile.mkdtemp(prefix="gn_variants_"))
NEW = Path(__file__).resolve().parents[1] / "resources/exemplars/cuda/group_norm_silu.cu"
WRAP = r'''
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
extern "C" void kernel_forward(const float*, const float*, const float*, float*, int64_t, int64_t, int64_t, float, int64_t, cudaStream_t);
torch::Tensor run(torch::Tensor x, torch::Tensor w, torch::Tensor b, int64_t groups, double eps) {
  auto y = torch::empty_like(x);
  int64_t sp = 1; for (int i = 2; i < x.dim(); ++i) sp *= x.size(i);
  kernel_forward(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1), sp, (float)eps, groups, at::cuda::getCurrentCUDAStream());
  return y;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }
'''
(HERE / "wrap.cpp").write_text(WRAP)
VARIANTS = {}
for vec, thr, parts in [(4, 512, 8), (4, 1024, 8), (8, 256, 8), (4, 256, 16), (4, 128, 16), (2, 512, 16), (8, 128, 16)]:
    VARIANTS[f"v{vec}t{thr}p{parts}"] = (NEW, [f"-DVEC={vec}", f"-DTHREADS={thr}", f"-DMAX_PARTS={parts}"])

def build(name):
    src, flags = VARIANTS[name]
    load(name=f"gn_{name}", sources=[str(HERE / "wrap.cpp"), str(src)], extra_cuda_cflags=["-O3"] + flags,
         build_directory=str(mk(name)), verbose=False)
    return name

def mk(name):
    d = HERE / "build" / name
    d.mkdir(parents=True, exist_ok=True)
    return d

def dev_ms(fn, reps=20, samples=15):
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(samples):
        flush.zero_()
        a, b = torch.cuda.Event(True), torch.cuda.Event(True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b) / reps)
    return statistics.median(out)


SHAPES = [((16, 512, 64, 64), 32), ((4, 256, 64, 64), 32), ((2, 96, 7, 7), 3), ((1, 64, 256, 256), 2),
          ((3, 40, 9, 11), 5), ((8, 320, 32, 32), 32)]


def measure(mods: dict, shape: tuple, groups: int) -> dict:
    torch.manual_seed(0)
    x = torch.randn(shape, device="cuda") * 2 + 3
    w = torch.randn(shape[1], device="cuda")
    b = torch.randn(shape[1], device="cuda")

    def ref():
        return F.silu(F.group_norm(x, groups, w, b, 1e-5))

    comp = torch.compile(ref)
    want = ref()
    row = {"shape": list(shape), "groups": groups, "floor_ms": 2 * x.numel() * 4 / 4.3e12 * 1e3,
           "eager_ms": dev_ms(ref), "compile_ms": dev_ms(comp)}
    for name, m in mods.items():
        def ours(m=m):
            return m.run(x, w, b, groups, 1e-5)

        row[name] = {"ms": dev_ms(ours), "err": (ours() - want).abs().max().item()}
    return row


def main():
    with cf.ProcessPoolExecutor(len(VARIANTS)) as ex:
        built = list(ex.map(build, VARIANTS))
    mods = {n: load(name=f"gn_{n}", sources=[str(HERE / "wrap.cpp"), str(VARIANTS[n][0])],
                    extra_cuda_cflags=["-O3"] + VARIANTS[n][1], build_directory=str(mk(n))) for n in built}
    res = []
    for shape, groups in SHAPES:
        row = measure(mods, shape, groups)
        res.append(row)
        print(json.dumps(row), flush=True)
    out = os.environ.get("OUT", "/tmp")
    Path(out, "gn_variants.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
