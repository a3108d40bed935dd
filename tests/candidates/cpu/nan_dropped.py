# expect: incorrect -- right on every finite input, but a guard on the scale turns a row holding NaN into finite values (PyTorch gives NaN across that row)
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cmath>
#include <cstdint>
extern "C" void rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t cols, float eps) {
  #pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols; float* yr = y + r * cols;
    double acc = 0.0;
    for (int64_t c = 0; c < cols; ++c) acc += (double)xr[c] * xr[c];
    float inv = fminf(1.0f / std::sqrt((float)(acc / cols) + eps), 1e6f);  // "never divide by zero"
    for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * inv * w[c];
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
