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

__global__ void silu_mul_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out, int64_t n, bool vec) {
    const int64_t threads = 256;
    const int64_t blocks = (int64_t)n / threads + 1; // Increase block size to utilize more SMs
    const bool vec = (uintptr_t)a % 16 == 0 && (uintptr_t)b % 16 == 0 && (uintptr_t)out % 16 == 0;
    silu_mul_kernel<<<(unsigned)blocks, threads, 0, stream>>>(a, b, out, n, vec);
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
