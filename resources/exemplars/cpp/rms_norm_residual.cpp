// exemplar: rms_norm_residual
// keywords: rmsnorm rms_norm rms residual skip add sum rsqrt pow mean norm eps weight fused transformer
// ops: add pow mean rsqrt mul sqrt div rms_norm
// needs: add
// optional: weight=1
// about: RMSNorm of a residual sum, norm(x + residual), over the last dimension: the sum is written to out once, then scaled there in place: v / sqrt(mean(v*v) + eps) * weight.
#include <cmath>
#include <cstdint>

// yr[c] = xr[c] + rr[c] over one row; returns the sum of squares of those values
static inline float add_row_sumsq(const float* xr, const float* rr, float* yr, int64_t cols) {
    float s = 0.0f;
    #pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < cols; ++c) {
        float v = xr[c] + rr[c];
        yr[c] = v;
        s += v * v;
    }
    return s;
}

// yr[c] = yr[c] * scale * weight[c], in place
static inline void scale_row(float* yr, const float* weight, float scale, int64_t cols) {
    #pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] = yr[c] * scale * weight[c];
}

extern "C" void kernel_forward(const float* x, const float* residual, const float* weight, float* out,
                               int64_t rows, int64_t cols, float eps) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        float* yr = out + r * cols;
        const float sumsq = add_row_sumsq(x + r * cols, residual + r * cols, yr, cols);
        const float scale = 1.0f / std::sqrt(sumsq / (float)cols + eps);
        scale_row(yr, weight, scale, cols);
    }
}
