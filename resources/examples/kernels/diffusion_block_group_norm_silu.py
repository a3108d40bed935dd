"""A hand-written kernel for the group norm + SiLU target of diffusion_block.py (8 groups), one
pass for the statistics and one for normalize, affine and SiLU, native format."""
import torch
import torch.nn as nn

from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cmath>
#include <cstdint>

extern "C" void gn_silu(const float* x, const float* w, const float* b, float* out, int64_t n, int64_t c,
                        int64_t hw, int64_t groups, float eps) {
    const int64_t cpg = c / groups;
    const int64_t len = cpg * hw;
    #pragma omp parallel for collapse(2)
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t g = 0; g < groups; ++g) {
            const float* xp = x + (i * c + g * cpg) * hw;
            float* op = out + (i * c + g * cpg) * hw;
            double sum = 0.0, sq = 0.0;
            for (int64_t k = 0; k < len; ++k) {
                sum += xp[k];
                sq += (double)xp[k] * xp[k];
            }
            const double mean = sum / len;
            const double var = sq / len - mean * mean;
            const float rstd = (float)(1.0 / std::sqrt(var + eps));
            for (int64_t cc = 0; cc < cpg; ++cc) {
                const int64_t ch = g * cpg + cc;
                const float s = rstd * w[ch];
                const float t = b[ch] - (float)mean * s;
                const float* xr = xp + cc * hw;
                float* orow = op + cc * hw;
                for (int64_t k = 0; k < hw; ++k) {
                    const float y = xr[k] * s + t;
                    orow[k] = y / (1.0f + std::exp(-y));
                }
            }
        }
    }
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cpp")


class ModelNew(nn.Module):
    def forward(self, x, weight, bias):
        x = x.contiguous()
        out = torch.empty_like(x)
        n, c = x.shape[0], x.shape[1]
        _lib.gn_silu(x, weight.contiguous(), bias.contiguous(), out, n, c, x.numel() // (n * c), 8, 1e-5)
        return out
