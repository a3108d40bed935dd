"""Candidate for max_pool_overlap: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

// Max pooling lowered to plain loops: each output value reads its window of the input.
// Correct by construction, not fast: neighbouring windows read the same values again.
constexpr int64_t lplanes = 1024, lw = 1024, low = 512;

// rows (all but the last dim), input and output length
__global__ void lowered_pool(const float* __restrict__ x, float* __restrict__ out, int64_t rows, int64_t cols, int64_t x_size0, int64_t x_size1, int64_t x_size2, int64_t out_size0, int64_t out_size1, int64_t out_size2) {
    // one thread an output value; the threads of the whole grid stride over them, so any grid covers them all
    const int64_t threads = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < lplanes * low; t += threads) {
        const int64_t q = t % low, r = t / low;
        const int64_t iw0 = q * 2 - 1;
        float v = -INFINITY;
        for (int64_t j = 0; j < 3; ++j) {
            const int64_t iw = iw0 + j;
            if (iw < 0 || iw >= lw) continue;
            const float e = x[r * lw + iw];
            v = (e > v) | (e != e) ? e : v;  // a NaN wins, as in torch; a select, not a branch
        }
        out[r * low + q] = v;
    }
}

extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols, int64_t x_size0, int64_t x_size1, int64_t x_size2, int64_t out_size0, int64_t out_size1, int64_t out_size2, cudaStream_t stream) {
    const int64_t n = lplanes * low;
    if (n <= 0) return;
    lowered_pool<<<(unsigned)((n + 63) / 64), 64, 0, stream>>>(x, out, rows, cols, x_size0, x_size1, x_size2, out_size0, out_size1, out_size2);
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool1d(kernel_size=3, stride=2, padding=1)

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty((16, 64, 512), dtype=torch.float32, device=x.device)
        _lib.kernel_forward(x, out, x.numel() // x.shape[-1], x.shape[-1], x.shape[0], x.shape[1], x.shape[2], out.shape[0], out.shape[1], out.shape[2])
        return out
