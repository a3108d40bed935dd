"""Candidate for avg_pool1d: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

// Average pooling lowered to plain loops: each output value reads its window of the input.
// Correct by construction, not fast: neighbouring windows read the same values again.
constexpr int64_t lplanes = 1024, lw = 512, low = 128;  // rows (all but the last dim), input and output length
__global__ void lowered_pool(const float* __restrict__ x, float* __restrict__ out, int64_t rows, int64_t cols, int64_t x_size0, int64_t x_size1, int64_t x_size2, int64_t out_size0, int64_t out_size1, int64_t out_size2) {
    // one thread an output value; the threads of the whole grid stride over them, so any grid covers them all
    const int64_t threads = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < lplanes * low; t += threads) {
        const int64_t q = t % low, r = t / low;
        const int64_t iw0 = q * 4 - 0;
        const int64_t iw1 = (iw0 + 4 < lw + 0) ? iw0 + 4 : lw + 0;
        const int64_t iws = iw0 > 0 ? iw0 : 0, iwe = iw1 < lw ? iw1 : lw;  // inside the input
        float sum = 0.0f;
        for (int64_t iw = iws; iw < iwe; ++iw) {
            sum += x[r * lw + iw];
        }
        const float v = sum / (float)((iw1 - iw0));  // the window, padding included
        out[r * low + q] = v;
    }
}

extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols, int64_t x_size0, int64_t x_size1, int64_t x_size2, int64_t out_size0, int64_t out_size1, int64_t out_size2, cudaStream_t stream) {
    const int64_t n = lplanes * low;
    if (n <= 0) return;
    lowered_pool<<<(unsigned)((n + 127) / 128), 128, 0, stream>>>(x, out, rows, cols, x_size0, x_size1, x_size2, out_size0, out_size1, out_size2);
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty((16, 64, 128), dtype=torch.float32, device=x.device)
        _lib.kernel_forward(x, out, x.numel() // x.shape[-1], x.shape[-1], x.shape[0], x.shape[1], x.shape[2], out.shape[0], out.shape[1], out.shape[2])
        return out
