// exemplar: rms_norm
// keywords: rmsnorm rms_norm rms rsqrt pow mean norm eps weight scale
// ops: pow mean add rsqrt mul sqrt div rms_norm
// optional: weight=1
// about: RMSNorm over the last dimension with a learned scale: x / sqrt(mean(x*x) + eps) * weight.
#include <cmath>
#include <cstdint>

// the sum of squares of one row
static inline float row_sumsq(const float* xr, int64_t cols) {
    float s = 0.0f;
    #pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < cols; ++c) s += xr[c] * xr[c];
    return s;
}

// yr[c] = xr[c] * scale * weight[c]
static inline void scale_row(const float* xr, const float* weight, float scale, float* yr, int64_t cols) {
    #pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * scale * weight[c];
}

extern "C" void kernel_forward(const float* x, const float* weight, float* out,
                               int64_t rows, int64_t cols, float eps) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        const float scale = 1.0f / std::sqrt(row_sumsq(xr, cols) / (float)cols + eps);
        scale_row(xr, weight, scale, out + r * cols, cols);
    }
}
