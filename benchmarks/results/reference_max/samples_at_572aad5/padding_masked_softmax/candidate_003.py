"""Candidate for padding_masked_softmax: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cmath>
#include <cstdint>
#include <cstddef>
#include <algorithm>
#include <limits>

#include <cstring>

// The reference lowered to plain loops: rows in parallel; per row, one pass per reduction, then the outputs.
// Correct by construction, not fast: each reduction reads the row again.
// the row's maximum (a NaN in the row makes the sum below NaN)
static inline float row_max(const float* scores, const bool* keep, int64_t r, int64_t cols) {
    float v_amax = (-INFINITY);
    #pragma omp simd reduction(max : v_amax)
    for (int64_t c = 0; c < cols; ++c) {
        const bool v_bitwise_not = (!(((const unsigned char*)keep)[r / 128 * 128 + c] != 0));
        const float v_where = (v_bitwise_not ? (-INFINITY) : scores[r * cols + c]);
        v_amax = v_where > v_amax ? v_where : v_amax;
    }
    return v_amax;
}

// exp(x) for x <= 88, in plain float arithmetic, so that a loop calling it is vectorized (std::exp is not):
// 2^(n + f): y = x / ln 2, n = round(y), |f| <= 1/2, 2^f by its Taylor polynomial of degree 5 (relative
// error < 5e-6, benchmarks/fast_exp_error.py); 0 below -87 (exp underflows; -inf gives 0). For a value minus
// the maximum of values that include it (never positive), with no test above 88: fast_exp is exp for any x
static inline float fast_exp_neg(float x) {
    const float y = (x < -87.0f ? -87.0f : x) * 1.44269504f;
    const float n = (y + 12582912.0f) - 12582912.0f;  // round to nearest
    const float f = y - n;
    float p = 1.3333558e-3f;  // (ln 2)^k / k!, k = 5 .. 0
    p = p * f + 9.6181291e-3f;
    p = p * f + 5.5504109e-2f;
    p = p * f + 2.4022651e-1f;
    p = p * f + 6.9314718e-1f;
    p = p * f + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;  // the float 2^n
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return x < -87.0f ? 0.0f : p * scale;
}

extern "C" void kernel_forward(const float* scores, const bool* keep, float* out, int64_t rows, int64_t cols, int64_t keep_size0, int64_t keep_size1) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        float v_amax = row_max(scores, keep, r, cols);
        float bm = -INFINITY;  // the row's maximum
        float v_sum_1 = 0.0f;  // the sum of exponentials at the reference

        for (int64_t c = 0; c < cols; ++c) {
            const bool v_bitwise_not = (!(((const unsigned char*)keep)[r / 128 * 128 + c] != 0));
            const float v_where = (v_bitwise_not ? (-INFINITY) : scores[r * cols + c]);
            bm = v_where > bm ? v_where : bm;
            const float v_sub = (v_where - v_amax);
            const float v_exp = fast_exp_neg(v_sub);
            v_sum_1 += v_exp;
        }
        if (bm > v_amax + 64.0f) {  // rare: exps this far above the reference could overflow
            v_amax = bm;  // the sum again, at the row's maximum
            v_sum_1 = 0.0f;
            #pragma omp simd reduction(+ : v_sum_1)
            for (int64_t c = 0; c < cols; ++c) {
                const bool v_bitwise_not = (!(((const unsigned char*)keep)[r / 128 * 128 + c] != 0));
                const float v_where = (v_bitwise_not ? (-INFINITY) : scores[r * cols + c]);
                const float v_sub = (v_where - v_amax);
                const float v_exp = fast_exp_neg(v_sub);
                v_sum_1 += v_exp;
            }
        }
        for (int64_t c = 0; c < cols; ++c) {
            const bool v_bitwise_not = (!(((const unsigned char*)keep)[r / 128 * 128 + c] != 0));
            const float v_where = (v_bitwise_not ? (-INFINITY) : scores[r * cols + c]);
            const float v_sub = (v_where - v_amax);
            const float v_exp = fast_exp_neg(v_sub);
            const float v_div = (v_exp / v_sum_1);
            out[r * cols + c] = v_div;
        }
    }
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cpp")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, scores, keep):
        scores = scores.contiguous()
        keep = keep.contiguous()
        out = torch.empty_like(scores)
        _lib.kernel_forward(scores, keep, out, scores.numel() // scores.shape[-1], scores.shape[-1], keep.shape[0], keep.shape[1])
        return out
