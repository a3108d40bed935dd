// exemplar: relu
// keywords: relu elementwise activation max clamp
// ops: relu clamp clamp_min
// about: an elementwise map over every element of x (here ReLU) with a grid-stride loop.
#include <cuda_runtime.h>
#include <cstdint>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = fmaxf(x[i], 0.0f);
}

extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream) {
    const int64_t n = rows * cols;
    const int64_t blocks = (n + 255) / 256;
    relu_kernel<<<(unsigned)(blocks < 65535 ? blocks : 65535), 256, 0, stream>>>(x, out, n);
}
