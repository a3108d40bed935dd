// exemplar: gelu_bias
// keywords: gelu tanh bias add elementwise activation 0.7978845608 0.044715 approximate
// ops: add mul tanh pow gelu
// about: bias add then tanh-approximated GELU, elementwise over [rows, cols]; grid-stride loop.
#include <cuda_runtime.h>
#include <cstdint>

__global__ void bias_gelu(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ out,
                          int64_t n, int64_t cols) {
    const float k0 = 0.7978845608028654f, k1 = 0.044715f;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float y = x[i] + bias[i % cols];
        out[i] = 0.5f * y * (1.0f + tanhf(k0 * (y + k1 * y * y * y)));
    }
}

extern "C" void kernel_forward(const float* x, const float* bias, float* out, int64_t rows, int64_t cols,
                               cudaStream_t stream) {
    const int64_t n = rows * cols;
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    bias_gelu<<<(unsigned)(blocks < 65535 ? blocks : 65535), threads, 0, stream>>>(x, bias, out, n, cols);
}
