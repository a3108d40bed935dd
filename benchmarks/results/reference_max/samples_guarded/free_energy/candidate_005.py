"""Candidate for free_energy: a scaffolded ModelNew around a native kernel."""
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

// exp(x) for x up to 88.37 (fast_exp_neg, whose 2^n holds up to 2^127), +inf above: past 88.72 exp overflows a float,
// and from 88.37 to there it gives +inf a little early. +inf gives +inf, NaN gives NaN. Capped at 88 instead, it gave
// exp(88) for anything larger (a logsumexp of a row holding +inf gave 88); exact up to 88.72 (exp(x - 1) * e), the
// seeds that call it ran 1.37-1.52x slower; this costs nothing (benchmarks/exp_clamp.py --fast-exp-before)
static inline float fast_exp(float x) {
    return fast_exp_neg(x > 89.0f ? 89.0f : x);
}

extern "C" void kernel_forward(const float* logits, float* out, int64_t rows, int64_t cols, float temperature) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        float v_amax = -INFINITY;  // the reference: the largest of the row's first 64 values
        const int64_t c1 = 64 < cols ? 64 : cols;

        for (int64_t c = 0; c < c1; ++c) {
            const float v_div = (logits[r * cols + c] / temperature);
            v_amax = v_div > v_amax ? v_div : v_amax;
        }
        float v_where = ((fabsf(v_amax) == INFINITY) ? 0.0f : v_amax);  // as before: the value the exps are taken at
        float bm = -INFINITY;  // the row's maximum
        float v_sum_1 = 0.0f;  // the sum of exponentials at the reference
        #pragma omp simd reduction(max : bm) reduction(+ : v_sum_1)
        for (int64_t c = 0; c < cols; ++c) {
            const float v_div = (logits[r * cols + c] / temperature);
            bm = v_div > bm ? v_div : bm;
            const float v_sub = (v_div - v_where);
            const float v_exp = fast_exp(v_sub);
            v_sum_1 += v_exp;
        }
        if (bm > v_where + 64.0f || bm < v_where - 64.0f) {  // rare: exps this far from the reference could overflow or vanish
            v_where = ((fabsf(bm) == INFINITY) ? 0.0f : bm);  // the sum again, at the row's maximum
            v_sum_1 = 0.0f;
            #pragma omp simd reduction(+ : v_sum_1)
            for (int64_t c = 0; c < cols; ++c) {
                const float v_div = (logits[r * cols + c] / temperature);
                const float v_sub = (v_div - v_where);
                const float v_exp = fast_exp(v_sub);
                v_sum_1 += v_exp;
            }
        }
        const float v_log = logf(v_sum_1);
        const float v_add = (v_log + v_where);
        const float v_mul = (v_add * temperature);
        out[r] = v_mul;
    }
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cpp")


class ModelNew(nn.Module):
    def __init__(self, temperature: float = 0.7):
        super().__init__()
        self.temperature = temperature

    def forward(self, logits):
        logits = logits.contiguous()
        out = torch.empty(logits.shape[:-1], dtype=torch.float32, device=logits.device)
        _lib.kernel_forward(logits, out, logits.numel() // logits.shape[-1], logits.shape[-1], float(self.temperature))
        return out
