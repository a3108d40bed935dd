# expect: compile_error -- a helper promises a float and falls off its end (a crash at run time, caught at build)
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cmath>
#include <cstdint>
static inline float scale_row(const float* xr, const float* w, float scale, float* yr, int64_t cols) {
    for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * scale * w[c];
}
extern "C" void rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t cols, float eps) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float s = 0.0f;
        for (int64_t c = 0; c < cols; ++c) s += xr[c] * xr[c];
        scale_row(xr, w, 1.0f / std::sqrt(s / (float)cols + eps), y + r * cols, cols);
    }
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cpp")


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
