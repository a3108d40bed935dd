# expect: ok -- KernelBench's own format on the CPU backend: load_inline with torch/extension.h
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>
torch::Tensor rms_norm(torch::Tensor x, torch::Tensor w, double eps) {
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  const float* xp = xc.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const int64_t rows = xc.size(0), cols = xc.size(1);
  #pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0.0;
    for (int64_t c = 0; c < cols; ++c) acc += (double)xp[r * cols + c] * xp[r * cols + c];
    const float inv = 1.0f / std::sqrt((float)(acc / cols) + (float)eps);
    for (int64_t c = 0; c < cols; ++c) yp[r * cols + c] = xp[r * cols + c] * inv * wp[c];
  }
  return y;
}
"""
ext = load_inline(name="rms_norm_ext", cpp_sources=cpp_source, functions=["rms_norm"],
                  extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return ext.rms_norm(x, self.weight, self.eps)
