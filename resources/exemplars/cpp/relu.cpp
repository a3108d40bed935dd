// exemplar: relu
// keywords: relu elementwise activation max clamp
// ops: relu clamp clamp_min
// about: an elementwise map over every element of x (here ReLU), row by row.
#include <cmath>
#include <cstdint>

// yr[c] = max(xr[c], 0) over one row; a NaN stays NaN, as in PyTorch (NaN < 0 is false)
static inline void relu_row(const float* xr, float* yr, int64_t cols) {
    #pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] < 0.0f ? 0.0f : xr[c];
}

extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) relu_row(x + r * cols, out + r * cols, cols);
}
