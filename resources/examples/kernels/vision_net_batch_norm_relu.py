"""A hand-written kernel for the batch norm + ReLU target of vision_net.py (eval-mode batch norm
folded into one scale and shift per channel, ReLU applied in the same pass), native format."""
import torch
import torch.nn as nn

from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cmath>
#include <cstdint>

extern "C" void bn_relu(const float* x, const float* mean, const float* var, const float* w, const float* b,
                        float* out, int64_t n, int64_t c, int64_t hw, float eps) {
    #pragma omp parallel for collapse(2)
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t ch = 0; ch < c; ++ch) {
            const float s = w[ch] / std::sqrt(var[ch] + eps);
            const float t = b[ch] - mean[ch] * s;
            const float* xp = x + (i * c + ch) * hw;
            float* op = out + (i * c + ch) * hw;
            for (int64_t k = 0; k < hw; ++k) {
                const float v = xp[k] * s + t;
                op[k] = v > 0.f ? v : 0.f;
            }
        }
    }
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cpp")


class ModelNew(nn.Module):
    def forward(self, x, running_mean, running_var, weight, bias):
        x = x.contiguous()
        out = torch.empty_like(x)
        n, c = x.shape[0], x.shape[1]
        _lib.bn_relu(x, running_mean.contiguous(), running_var.contiguous(), weight.contiguous(), bias.contiguous(),
                     out, n, c, x.numel() // (n * c), 1e-5)
        return out
