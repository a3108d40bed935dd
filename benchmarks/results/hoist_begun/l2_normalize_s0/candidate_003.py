"""Candidate for l2_normalize: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cmath>
#include <cstdint>
#include <cstddef>
#include <algorithm>
#include <limits>

// The reference lowered to plain loops: rows in parallel; per row, one pass per reduction, then the outputs.
// Correct by construction, not fast: each reduction reads the row again.
// the row's sum
static inline float row_sum(const float* emb, int64_t r, int64_t cols) {
    float v_sum_1 = 0.0f;
    #pragma omp simd reduction(+ : v_sum_1)
    for (int64_t c = 0; c < cols; ++c) {
        const float v_pow_1 = (emb[r * cols + c] * emb[r * cols + c]);
        v_sum_1 += v_pow_1;
    }
    return v_sum_1;
}

extern "C" void kernel_forward(const float* emb, float* out, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float v_sum_1 = row_sum(emb, r, cols);
        const float v_pow_2 = sqrtf(v_sum_1);
        const float v_clamp = ((v_pow_2 > 1e-12f || v_pow_2 != v_pow_2) ? v_pow_2 : 1e-12f);
        const float inv_v_clamp = 1.0f / v_clamp;  // new: once, here
        for (int64_t c = 0; c < cols; ++c) {
            const float v_expand = v_clamp;
            const float v_div = (emb[r * cols + c] * inv_v_clamp);  // new: here
            out[r * cols + c] = v_div;
        }
    }
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cpp")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, emb):
        emb = emb.contiguous()
        out = torch.empty_like(emb)
        _lib.kernel_forward(emb, out, emb.numel() // emb.shape[-1], emb.shape[-1])
        return out
