// exemplar: gelu_bias
// keywords: gelu tanh bias add elementwise activation 0.7978845608 0.044715 approximate
// ops: add mul tanh pow gelu
// about: bias add then tanh-approximated GELU, elementwise over [rows, cols] with a per-column bias.
#include <cmath>
#include <cstdint>

// tanh-approximated GELU of one value
static inline float gelu_tanh(float y) {
    const float k0 = 0.7978845608028654f;  // sqrt(2 / pi)
    const float k1 = 0.044715f;
    return 0.5f * y * (1.0f + std::tanh(k0 * (y + k1 * y * y * y)));
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
