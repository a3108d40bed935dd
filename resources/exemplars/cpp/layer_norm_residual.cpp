// exemplar: layer_norm_residual
// keywords: layernorm layer_norm residual skip add sum norm mean variance var eps weight bias affine transformer
// ops: add native_layer_norm layer_norm
// needs: add
// optional: weight=1 bias=0
// about: LayerNorm of a residual sum, norm(x + residual), over the last dimension: the sum is written to out once, then normalized there in place: (v - mean) / sqrt(var + eps) * weight + bias.
#include <cmath>
#include <cstdint>

// yr[c] = xr[c] + rr[c] over one row; returns the sum of those values
static inline float add_row(const float* xr, const float* rr, float* yr, int64_t cols) {
    float s = 0.0f;
    #pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < cols; ++c) {
        float v = xr[c] + rr[c];
        yr[c] = v;
        s += v;
    }
    return s;
}

// the sum of squared differences from the mean of one row
static inline float row_sq_dev(const float* vr, float mean, int64_t cols) {
    float s = 0.0f;
    #pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < cols; ++c) {
        float d = vr[c] - mean;
        s += d * d;
    }
    return s;
}

// yr[c] = (yr[c] - mean) * inv_std * weight[c] + bias[c], in place
static inline void normalize_row(float* yr, const float* weight, const float* bias, float mean, float inv_std,
                                 int64_t cols) {
    #pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] = (yr[c] - mean) * inv_std * weight[c] + bias[c];
}

extern "C" void kernel_forward(const float* x, const float* residual, const float* weight, const float* bias,
                               float* out, int64_t rows, int64_t cols, float eps) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        float* yr = out + r * cols;
        const float mean = add_row(x + r * cols, residual + r * cols, yr, cols) / (float)cols;
        const float var = row_sq_dev(yr, mean, cols) / (float)cols;
        const float inv_std = 1.0f / std::sqrt(var + eps);
        normalize_row(yr, weight, bias, mean, inv_std, cols);
    }
}
