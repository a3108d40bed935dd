// exemplar: layer_norm
// keywords: layernorm layer_norm norm mean variance var eps weight bias affine normalize
// ops: native_layer_norm layer_norm
// optional: weight=1 bias=0
// about: LayerNorm over the last dimension with weight and bias: (x - mean) / sqrt(var + eps) * weight + bias.
#include <cmath>
#include <cstdint>

// the sum of one row
static inline float row_sum(const float* xr, int64_t cols) {
    float s = 0.0f;
    #pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < cols; ++c) s += xr[c];
    return s;
}

// the sum of squared differences from the mean of one row
static inline float row_sq_dev(const float* xr, float mean, int64_t cols) {
    float s = 0.0f;
    #pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < cols; ++c) {
        float d = xr[c] - mean;
        s += d * d;
    }
    return s;
}

// yr[c] = (xr[c] - mean) * inv_std * weight[c] + bias[c]
static inline void normalize_row(const float* xr, const float* weight, const float* bias, float mean, float inv_std,
                                 float* yr, int64_t cols) {
    #pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - mean) * inv_std * weight[c] + bias[c];
}

extern "C" void kernel_forward(const float* x, const float* weight, const float* bias, float* out,
                               int64_t rows, int64_t cols, float eps) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        const float mean = row_sum(xr, cols) / (float)cols;
        const float var = row_sq_dev(xr, mean, cols) / (float)cols;
        const float inv_std = 1.0f / std::sqrt(var + eps);
        normalize_row(xr, weight, bias, mean, inv_std, out + r * cols, cols);
    }
}
