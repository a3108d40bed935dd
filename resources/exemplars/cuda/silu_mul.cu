// exemplar: silu_mul
// keywords: silu swish swiglu sigmoid gate mul multiply elementwise activation mlp
// ops: silu mul sigmoid
// about: silu(a) * b elementwise; float4 loads when the size allows, grid-stride loop.
#include <cuda_runtime.h>
#include <cstdint>

__device__ __forceinline__ float silu(float v) { return v / (1.0f + __expf(-v)); }

__global__ void silu_mul_vec4(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ out,
                              int64_t n4) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        float4 x = a[i], y = b[i];
        out[i] = make_float4(silu(x.x) * y.x, silu(x.y) * y.y, silu(x.z) * y.z, silu(x.w) * y.w);
    }
}
__global__ void silu_mul_scalar(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out,
                                int64_t start, int64_t n) {
    for (int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = silu(a[i]) * b[i];
}

extern "C" void kernel_forward(const float* a, const float* b, float* out, int64_t rows, int64_t cols,
                               cudaStream_t stream) {
    const int64_t n = rows * cols, n4 = n / 4;
    const int threads = 256;
    if (n4 > 0) {
        int64_t blocks = (n4 + threads - 1) / threads;
        silu_mul_vec4<<<(unsigned)(blocks < 65535 ? blocks : 65535), threads, 0, stream>>>(
            (const float4*)a, (const float4*)b, (float4*)out, n4);
    }
    if (n4 * 4 < n) silu_mul_scalar<<<1, threads, 0, stream>>>(a, b, out, n4 * 4, n);
}
