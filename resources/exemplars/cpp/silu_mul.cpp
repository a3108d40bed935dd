// exemplar: silu_mul
// keywords: silu swish swiglu sigmoid gate mul multiply elementwise activation mlp
// ops: silu mul sigmoid
// optional: b=1
// about: silu(a) * b elementwise (the SwiGLU gate; without b, SiLU itself), silu(a) = a / (1 + exp(-a)).
#include <cmath>
#include <cstdint>

// silu(v) = v * sigmoid(v), with the vectorizable fast_exp of the row_softmax exemplar (its
// definition is added when the exemplars are loaded)
static inline float silu(float v) { return v / (1.0f + fast_exp(-v)); }

// out[i] = silu(a[i]) * b[i] for i in [begin, end)
static inline void silu_mul_range(const float* a, const float* b, float* out, int64_t begin, int64_t end) {
    #pragma omp simd
    for (int64_t i = begin; i < end; ++i) out[i] = silu(a[i]) * b[i];
}

extern "C" void kernel_forward(const float* a, const float* b, float* out, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) silu_mul_range(a, b, out, r * cols, (r + 1) * cols);
}
