// exemplar: row_softmax
// keywords: softmax row exp max sum normalize attention logits dim
// ops: softmax _softmax exp amax max sum sub div
// about: softmax over the last dimension, one row at a time: max, then exp and sum, then scale.
#include <algorithm>
#include <cmath>
#include <cstdint>

// the largest value of one row
static inline float row_max(const float* xr, int64_t cols) {
    float m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, xr[c]);
    return m;
}

// yr[c] = exp(xr[c] - m); returns the sum of those values
static inline float exp_row(const float* xr, float m, float* yr, int64_t cols) {
    float s = 0.0f;
    #pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < cols; ++c) {
        float e = std::exp(xr[c] - m);
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

extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = out + r * cols;
        const float m = row_max(xr, cols);
        const float s = exp_row(xr, m, yr, cols);
        scale_row(yr, 1.0f / s, cols);
    }
}
