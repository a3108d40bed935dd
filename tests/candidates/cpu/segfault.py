# expect: crashed -- writes through a null pointer
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cmath>
#include <cstdint>
extern "C" void rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t cols, float eps) {
  volatile float* p = nullptr; for (int64_t i = 0; i < rows; ++i) p[i * 1000003] = 1.f;
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
