// exemplar: gelu_bias
// keywords: gelu tanh bias add elementwise activation 0.7978845608 0.044715 approximate
// ops: add mul tanh pow gelu_tanh
// optional: bias=0
// about: bias add then tanh-approximated GELU, elementwise over [rows, cols] with a per-column bias.
#include <cmath>
#include <cstdint>

// tanh-approximated GELU of one value: 0.5 * y * (1 + tanh(u)) is y / (1 + exp(-2u)), with the
// vectorizable fast_exp of the row_softmax exemplar (std::tanh in a loop is not vectorized; its
// definition is added when the exemplars are loaded)
static inline float gelu_tanh(float y) {
    const float k0 = 0.7978845608028654f;  // sqrt(2 / pi)
    const float k1 = 0.044715f;
    const float u = k0 * (y + k1 * y * y * y);
    return y / (1.0f + fast_exp(-2.0f * u));
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
