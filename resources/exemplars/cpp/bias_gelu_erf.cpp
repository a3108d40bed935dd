// exemplar: bias_gelu_erf
// keywords: gelu erf exact bias add elementwise activation mlp
// ops: add gelu erf mul div
// optional: bias=0
// about: bias add then exact GELU (PyTorch's default, with erf), elementwise over [rows, cols] with a per-column bias: gelu(y) = 0.5 * y * (1 + erf(y / sqrt(2))).
#include <cmath>
#include <cstdint>

// erf(z) in plain float arithmetic, so that a loop calling it is vectorized (std::erf is not):
// Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7) with the vectorizable fast_exp of the
// row_softmax exemplar; erf(-z) = -erf(z)
static inline float erf_approx(float z) {
    const float a = std::fabs(z);
    const float t = 1.0f / (1.0f + 0.3275911f * a);
    float p = 1.061405429f;
    p = p * t - 1.453152027f;
    p = p * t + 1.421413741f;
    p = p * t - 0.284496736f;
    p = p * t + 0.254829592f;
    const float e = 1.0f - p * t * fast_exp(-a * a);
    return z < 0.0f ? -e : e;
}

// exact GELU of one value: 0.5 * y * (1 + erf(y / sqrt(2)))
static inline float gelu_erf(float y) { return 0.5f * y * (1.0f + erf_approx(y * 0.7071067811865476f)); }

// yr[c] = gelu(xr[c] + bias[c]) over one row
static inline void bias_gelu_row(const float* xr, const float* bias, float* yr, int64_t cols) {
    #pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] = gelu_erf(xr[c] + bias[c]);
}

extern "C" void kernel_forward(const float* x, const float* bias, float* out, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) bias_gelu_row(x + r * cols, bias, out + r * cols, cols);
}
