// exemplar: gelu_bias
// keywords: gelu tanh bias add elementwise activation 0.7978845608 0.044715 approximate
// about: bias add then tanh-approximated GELU, elementwise over [rows, cols] with a per-column bias.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>

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

// tanh-approximated GELU of one value
static inline float gelu_tanh(float y) {
    const float k0 = 0.7978845608028654f;  // sqrt(2 / pi)
    const float k1 = 0.044715f;
    const float z = k0 * (y + k1 * y * y * y);
    const float t = 1.0f - 2.0f / (fast_exp(2.0f * z) + 1.0f);  // tanh(z)
    return 0.5f * y * (1.0f + t);
}

// yr[c] = gelu(xr[c] + bias[c]) over one row
static inline void bias_gelu_row(const float* xr, const float* bias, float* yr, int64_t cols) {
    #pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] = gelu_tanh(xr[c] + bias[c]);
}

extern "C" void kernel_forward(const float* x, const float* bias, float* out, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) bias_gelu_row(x + r * cols, bias, out + r * cols, cols);
}
