// exemplar: masked_softmax
// keywords: softmax causal mask masked masked_fill triu tril inf scale scaled attention scores logits
// ops: softmax _softmax mul div triu tril masked_fill where exp amax max sum sub eq logical_not bitwise_not
// needs: masked_fill|where
// optional: scale=1
// about: attention-style softmax(masked_fill(x * scale, causal mask, -inf)) over the last dimension of scores (..., T, T): row r is query r % T, which sees keys 0..r % T; masked keys are never read and come out 0.
#include <cmath>
#include <cstdint>

// the largest of xr[c] * scale over the first n values of a row
static inline float scaled_max(const float* xr, float scale, int64_t n) {
    float m = -INFINITY;
    #pragma omp simd reduction(max : m)
    for (int64_t c = 0; c < n; ++c) {
        float v = xr[c] * scale;
        m = v > m ? v : m;
    }
    return m;
}

// yr[c] = exp(xr[c] * scale - m) over the first n values; returns the sum of those values
static inline float scaled_exp_row(const float* xr, float scale, float m, float* yr, int64_t n) {
    float s = 0.0f;
    #pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < n; ++c) {
        float e = fast_exp_neg(xr[c] * scale - m);  // never positive: m is their maximum
        yr[c] = e;
        s += e;
    }
    return s;
}

// yr[c] *= k for the first n values; the masked rest of the row (n <= c < cols) is 0, or NaN where a NaN among
// the row's keys made k NaN (torch's softmax is then NaN across the whole row)
static inline void finish_row(float* yr, float k, int64_t n, int64_t cols) {
    #pragma omp simd
    for (int64_t c = 0; c < n; ++c) yr[c] *= k;
    for (int64_t c = n; c < cols; ++c) yr[c] = 0.0f * k;
}

// x holds scores of shape (..., T, T) with T = cols: row r is query q = r % T, which sees keys 0..q (the causal
// mask triu(ones(T, T), diagonal=1) hides keys > q). Every row keeps key 0, so none is all -inf.
extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols, float scale) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = out + r * cols;
        const int64_t valid = r % cols + 1;  // unmasked keys of this row: 0..q
        const float m = scaled_max(xr, scale, valid);
        const float s = scaled_exp_row(xr, scale, m, yr, valid);
        finish_row(yr, 1.0f / s, valid, cols);
    }
}
