// exemplar: silu_mul
// keywords: silu swish swiglu sigmoid gate mul multiply elementwise activation mlp
// about: silu(a) * b elementwise (the SwiGLU gate), silu(a) = a / (1 + exp(-a)).
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

// silu(v) = v * sigmoid(v)
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
