// exemplar: mem-cumsum_rows-c02ba4
// keywords: cumsum inclusive prefix sum along last dimension
// ops: cumsum
// output: like-input
// problem: cumsum_rows
// device: cpu
// speedup: 0.925
// about: a kernel verified in one of your sessions, on cumsum_rows (cumsum): 0.93x over eager on cpu.
#include <cmath>
#include <cstdint>
#include <cstring>

static inline void compute_cumsum(const float* x, float* out, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = out + r * cols;
        float sum = 0.0f;
        // no simd reduction here: each step stores the running value, which a SIMD reduction splits into lanes
        for (int64_t c = 0; c < cols; ++c) {
            sum += xr[c];
            yr[c] = sum;
        }
    }
}

extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols) {
    compute_cumsum(x, out, rows, cols);
}
