"""Candidate for silu_mul: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
import torch.nn.functional as F
rows, dim = 16384, 4096
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

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

__device__ __forceinline__ float silu(float v) { return v / (1.0f + __expf(-v)); }

__global__ void silu_mul_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out,
                                int64_t n, bool vec) {
    // this block covers blockDim.x * VEC float4; thread t takes float4 number k * blockDim.x + t: coalesced
    const int64_t base = (int64_t)blockIdx.x * blockDim.x * VEC * 4 + threadIdx.x * 4;
    float4 va[VEC], vb[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        va[k] = load4(a, base + k * blockDim.x * 4, n, vec, 0.0f);
        vb[k] = load4(b, base + k * blockDim.x * 4, n, vec, 0.0f);
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k)
        store4(out, base + k * blockDim.x * 4, n, vec,
               make_float4(silu(va[k].x) * vb[k].x, silu(va[k].y) * vb[k].y, silu(va[k].z) * vb[k].z,
                           silu(va[k].w) * vb[k].w));
}

extern "C" void kernel_forward(const float* a, const float* b, float* out, int64_t rows, int64_t cols, cudaStream_t stream) {
    const int64_t n = rows * cols;
    if (n <= 0) return;
    const int threads = 256;
    const int64_t blocks = (n + threads * VEC * 4 - 1) / (threads * VEC * 4);
    const bool vec = (uintptr_t)a % 16 == 0 && (uintptr_t)b % 16 == 0 && (uintptr_t)out % 16 == 0;
    silu_mul_kernel<<<(unsigned)blocks, threads, 0, stream>>>(a, b, out, n, vec);
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a = a.contiguous()
        b = b.contiguous()
        out = torch.empty_like(a)
        _lib.kernel_forward(a, b, out, a.numel() // a.shape[-1], a.shape[-1])
        return out
