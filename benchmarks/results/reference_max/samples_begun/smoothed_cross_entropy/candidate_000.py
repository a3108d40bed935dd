"""Candidate for smoothed_cross_entropy: a scaffolded ModelNew around a native kernel."""
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

#include <cstring>

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

// the row's sum
static inline float row_sum_2(const float* logits, int64_t r, int64_t cols, float v_amax, float v_log) {
    float v_sum_2 = 0.0f;
    #pragma omp simd reduction(+ : v_sum_2)
    for (int64_t c = 0; c < cols; ++c) {
        const float v_sub = (logits[r * cols + c] - v_amax);
        const float v_sub_1 = (v_sub - v_log);
        v_sum_2 += v_sub_1;
    }
    return v_sum_2;
}

extern "C" void kernel_forward(const float* logits, const int64_t* labels, float* out, int64_t rows, int64_t cols, int64_t labels_size0) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        float v_amax = -INFINITY;  // the reference: the largest of the row's first 64 values
        const int64_t c1 = 64 < cols ? 64 : cols;
        #pragma omp simd reduction(max : v_amax)
        for (int64_t c = 0; c < c1; ++c) {
            v_amax = logits[r * cols + c] > v_amax ? logits[r * cols + c] : v_amax;
        }
        float bm = -INFINITY;  // the row's maximum
        float v_sum_1 = 0.0f;  // the sum of exponentials at the reference
        #pragma omp simd reduction(max : bm) reduction(+ : v_sum_1)
        for (int64_t c = 0; c < cols; ++c) {
            bm = logits[r * cols + c] > bm ? logits[r * cols + c] : bm;
            const float v_sub = (logits[r * cols + c] - v_amax);
            const float v_exp = fast_exp_neg(v_sub);
            v_sum_1 += v_exp;
        }
        if (bm > v_amax + 64.0f) {  // rare: exps this far above the reference could overflow
            v_amax = bm;  // the sum again, at the row's maximum
            v_sum_1 = 0.0f;
            #pragma omp simd reduction(+ : v_sum_1)
            for (int64_t c = 0; c < cols; ++c) {
                const float v_sub = (logits[r * cols + c] - v_amax);
                const float v_exp = fast_exp_neg(v_sub);
                v_sum_1 += v_exp;
            }
        }
        // then, as before:
        const float v_log = logf(v_sum_1);
        const bool v_ne = (labels[r] != -100.0f);
        const int64_t v_scalar_tensor = 0.0f;
        const int64_t v_where = (v_ne ? labels[r] : v_scalar_tensor);
        float v_gather;
        {
            const int64_t c = (int64_t)(v_where);
            const float v_sub = (logits[r * cols + c] - v_amax);
            const float v_sub_1 = (v_sub - v_log);
            v_gather = v_sub_1;
        }
        const float v_neg = (-v_gather);
        const bool v_ne_1 = (labels[r] != -100.0f);
        const float v_where_1 = (v_ne_1 ? v_neg : 0.0f);
        const float v_sum_2 = row_sum_2(logits, r, cols, v_amax, v_log);
        const float v_neg_1 = (-v_sum_2);
        const bool v_eq = (labels[r] == -100.0f);
        const float v_where_2 = (v_eq ? 0.0f : v_neg_1);
        const float v_mul = (v_where_2 * 0.00015625f);
        const float v_mul_1 = (v_where_1 * 0.9f);
        const float v_add = (v_mul_1 + v_mul);
        out[r] = v_add;
    }
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cpp")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits, labels):
        logits = logits.contiguous()
        labels = labels.contiguous()
        out = torch.empty(logits.shape[:-1], dtype=torch.float32, device=logits.device)
        _lib.kernel_forward(logits, labels, out, logits.numel() // logits.shape[-1], logits.shape[-1], labels.shape[0])
        return out
