"""A hand-written kernel for the RMS norm target of llm_block.py, in the fast native format.

The target's problem (``kforge profile llm_block.py --problems DIR``) has the forward
``forward(self, x, weight)``: the model's own pow/mean/add/rsqrt/mul/mul chain, with the norm's
weight as an input. This candidate does the same in one pass per row. Evaluate it with
``kforge eval DIR/t0N_rms_norm.py llm_block_rms_norm.py``; the tests use it to integrate and export.
"""
import torch
import torch.nn as nn

from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cmath>
#include <cstdint>

extern "C" void rms_norm(const float* x, const float* w, float* out, int64_t rows, int64_t cols, float eps) {
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* o = out + r * cols;
        float acc = 0.f;
        for (int64_t c = 0; c < cols; ++c) acc += xr[c] * xr[c];
        const float inv = 1.0f / std::sqrt(acc / cols + eps);
        for (int64_t c = 0; c < cols; ++c) o[c] = xr[c] * inv * w[c];
    }
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cpp")


class ModelNew(nn.Module):
    def forward(self, x, weight):
        out = torch.empty_like(x)
        cols = x.shape[-1]
        _lib.rms_norm(x.contiguous(), weight.contiguous(), out, x.numel() // cols, cols, 1e-6)
        return out
