"""Candidate for channel_sum: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cmath>
#include <cstdint>
#include <cstddef>
#include <algorithm>
#include <limits>

// The reference lowered to plain loops: rows in parallel; per row, one pass per reduction, then the outputs.
// Correct by construction, not fast: each reduction reads the row again.
constexpr int64_t louter = 16, lcols = 96, linner = 512;  // the values before dim 1, along it, after it
extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols, int64_t x_size0, int64_t x_size1, int64_t x_size2, int64_t out_size0, int64_t out_size1) {
    for (int64_t o = 0; o < louter; ++o) {
        for (int64_t i = 0; i < linner; ++i) {
            const int64_t r = o * linner + i;  // the row's index in an output of one value a row
            float v_sum_1 = 0.0f;
            for (int64_t c = 0; c < lcols; ++c) {
                v_sum_1 += x[(o * lcols + c) * linner + i];
            }
            out[r] = v_sum_1;
        }
    }
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cpp")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty((16, 512), dtype=torch.float32, device=x.device)
        _lib.kernel_forward(x, out, x.numel() // x.shape[-1], x.shape[-1], x.shape[0], x.shape[1], x.shape[2], out.shape[0], out.shape[1])
        return out
