"""Candidate for max_pool_overlap: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cmath>
#include <cstdint>
#include <cstddef>
#include <algorithm>
#include <limits>

// Max pooling lowered to plain loops: each output value reads its window of the input.
// Correct by construction, not fast: neighbouring windows read the same values again.
constexpr int64_t lplanes = 1024, lw = 1024, low = 512;  // rows (all but the last dim), input and output length
extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols, int64_t x_size0, int64_t x_size1, int64_t x_size2, int64_t out_size0, int64_t out_size1, int64_t out_size2) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < lplanes; ++r) {
        for (int64_t q = 0; q < low; ++q) {
            const int64_t iw0 = q * 2 - 1;
            float v = -INFINITY;
            for (int64_t j = 0; j < 3; ++j) {
                const int64_t iw = iw0 + j;
                if (iw < 0 || iw >= lw) continue;
                const float e = x[r * lw + iw];
                if (e > v || e != e) v = e;  // a NaN wins, as in torch
            }
            out[r * low + q] = v;
        }
    }
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cpp")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool1d(kernel_size=3, stride=2, padding=1)

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty((16, 64, 512), dtype=torch.float32, device=x.device)
        _lib.kernel_forward(x, out, x.numel() // x.shape[-1], x.shape[-1], x.shape[0], x.shape[1], x.shape[2], out.shape[0], out.shape[1], out.shape[2])
        return out
