// exemplar: row_sum
// keywords: sum reduce reduction row mean dim keepdim total
// ops: sum
// output: per-row
// about: sum over the last dimension: one output value per row (out has `rows` elements).
#include <cmath>
#include <cstdint>

// the sum of one row
static inline float row_sum(const float* xr, int64_t cols) {
    float s = 0.0f;
    #pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < cols; ++c) s += xr[c];
    return s;
}

extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) out[r] = row_sum(x + r * cols, cols);
}
