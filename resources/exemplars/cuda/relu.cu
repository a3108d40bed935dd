// exemplar: relu
// keywords: relu elementwise activation max clamp
// ops: relu clamp clamp_min
// about: an elementwise map over every element of x (here ReLU): float4 loads, VEC float4 per thread, scalar tail.
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>

// Each thread maps VEC float4 (16 values): its loads are issued together, so enough bytes are in flight
// to keep memory busy. Sizes not a multiple of 4, or unaligned pointers, take the scalar path of load4/store4.
constexpr int VEC = 4;

// the 4 values at offsets c..c+3 of p (c a multiple of 4); offsets >= n read as `fill` (and are not read).
// vec: p is 16-byte aligned, so 4 values below n are one float4 load.
__device__ __forceinline__ float4 load4(const float* p, int64_t c, int64_t n, bool vec, float fill) {
    if (vec && c + 4 <= n) return *reinterpret_cast<const float4*>(p + c);
    return make_float4(c < n ? p[c] : fill, c + 1 < n ? p[c + 1] : fill,
                       c + 2 < n ? p[c + 2] : fill, c + 3 < n ? p[c + 3] : fill);
}
__device__ __forceinline__ void store4(float* p, int64_t c, int64_t n, bool vec, float4 v) {
    if (vec && c + 4 <= n) {
        *reinterpret_cast<float4*>(p + c) = v;
        return;
    }
    if (c < n) p[c] = v.x;
    if (c + 1 < n) p[c + 1] = v.y;
    if (c + 2 < n) p[c + 2] = v.z;
    if (c + 3 < n) p[c + 3] = v.w;
}

__device__ __forceinline__ float relu(float v) { return v < 0.0f ? 0.0f : v; }  // NaN stays NaN, as in PyTorch

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t n, bool vec) {
    // this block covers blockDim.x * VEC float4; thread t takes float4 number k * blockDim.x + t: coalesced
    const int64_t base = (int64_t)blockIdx.x * blockDim.x * VEC * 4 + threadIdx.x * 4;
    float4 a[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) a[k] = load4(x, base + k * blockDim.x * 4, n, vec, 0.0f);
#pragma unroll
    for (int k = 0; k < VEC; ++k)
        store4(out, base + k * blockDim.x * 4, n, vec,
               make_float4(relu(a[k].x), relu(a[k].y), relu(a[k].z), relu(a[k].w)));
}

extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream) {
    const int64_t n = rows * cols;
    if (n <= 0) return;
    const int threads = 256;
    const int64_t blocks = (n + threads * VEC * 4 - 1) / (threads * VEC * 4);
    const bool vec = (uintptr_t)x % 16 == 0 && (uintptr_t)out % 16 == 0;
    relu_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, out, n, vec);
}
