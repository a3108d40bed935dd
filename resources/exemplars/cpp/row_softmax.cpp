// exemplar: row_softmax
// keywords: softmax row exp max sum normalize attention logits dim scale temperature
// ops: softmax _softmax exp amax max sum sub div mul
// optional: scale=1
// about: softmax of x * scale over the last dimension (a temperature T is scale = 1 / T), one row at a time: max, then exp and sum, then normalize.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

// the largest of xr[c] * scale over one row
static inline float row_max(const float* xr, float scale, int64_t cols) {
    float m = -INFINITY;
    #pragma omp simd reduction(max : m)
    for (int64_t c = 0; c < cols; ++c) m = xr[c] * scale > m ? xr[c] * scale : m;
    return m;
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

// exp(x) for x up to 88.37 (fast_exp_neg, whose 2^n holds up to 2^127), +inf above: past 88.72 exp overflows a float,
// and from 88.37 to there it gives +inf a little early. +inf gives +inf, NaN gives NaN. Capped at 88 instead, it gave
// exp(88) for anything larger (a logsumexp of a row holding +inf gave 88); exact up to 88.72 (exp(x - 1) * e), the
// seeds that call it ran 1.37-1.52x slower; this costs nothing (benchmarks/exp_clamp.py --fast-exp-before)
static inline float fast_exp(float x) {
    return fast_exp_neg(x > 89.0f ? 89.0f : x);
}

// yr[c] = exp(xr[c] * scale - m); returns the sum of those values
static inline float exp_row(const float* xr, float scale, float m, float* yr, int64_t cols) {
    float s = 0.0f;
    #pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < cols; ++c) {
        float e = fast_exp_neg(xr[c] * scale - m);  // never positive: m is the row's maximum
        yr[c] = e;
        s += e;
    }
    return s;
}

// yr[c] *= k
static inline void scale_row(float* yr, float k, int64_t cols) {
    #pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] *= k;
}

extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols, float scale) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = out + r * cols;
        const float m = row_max(xr, scale, cols);
        const float s = exp_row(xr, scale, m, yr, cols);
        scale_row(yr, 1.0f / s, cols);
    }
}
