// exemplar: row_sum
// keywords: sum reduce reduction row mean dim keepdim total
// ops: sum
// output: per-row
// about: sum over the last dimension (out has `rows` elements): one warp per row, shuffles to reduce.
#include <cuda_runtime.h>
#include <cstdint>

__global__ void row_sum_warps(const float* __restrict__ x, float* __restrict__ out, int64_t rows, int64_t cols) {
    const int64_t row = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float* xr = x + row * cols;
    float s = 0.0f;
    for (int64_t c = lane; c < cols; c += 32) s += xr[c];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    if (lane == 0) out[row] = s;
}

extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream) {
    const int warps = 8;
    row_sum_warps<<<(unsigned)((rows + warps - 1) / warps), warps * 32, 0, stream>>>(x, out, rows, cols);
}
