// exemplar: row_softmax
// keywords: softmax row exp max sum normalize attention logits dim
// about: softmax over the last dimension, one row at a time: max, then exp and sum, then scale.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

// exp(x) as 2^n * p(r) (Cephes' single-precision polynomial, relative error about 2e-7); unlike
// std::exp it has no call inside, so the compiler vectorizes the loops that use it
static inline float fast_exp(float x) {
    x = std::min(std::max(x, -87.3f), 88.7f);
    const float n = std::floor(x * 1.44269504088896341f + 0.5f);
    const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

// the largest value of one row
static inline float row_max(const float* xr, int64_t cols) {
    float m = -INFINITY;
    #pragma omp simd reduction(max : m)
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, xr[c]);
    return m;
}

// yr[c] = exp(xr[c] - m); returns the sum of those values
static inline float exp_row(const float* xr, float m, float* yr, int64_t cols) {
    float s = 0.0f;
    #pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < cols; ++c) {
        float e = fast_exp(xr[c] - m);
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
