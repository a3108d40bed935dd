"""Candidate for l1_normalize: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

__global__ void lowered_rows(const float* __restrict__ x, float* __restrict__ out, int64_t rows, int64_t cols) {
    const int lane = threadIdx.x % 32;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x + 31) / 32;
    __shared__ float shared_tile[32 * 32]; // shared memory for the current tile

    // Read the tile from global memory
    for (int64_t c = lane; c < cols; c += 32) {
        shared_tile[c] = x[(blockIdx.x * blockDim.x + threadIdx.x) / 32 * cols + c];
    }
    __syncthreads();

    // Perform the reduction
    float v_sum_1 = 0.0f;
    for (int64_t k = 16; k > 0; k >>= 1) v_sum_1 += __shfl_xor_sync(0xffffffff, v_sum_1, k);
    const float v_clamp = ((v_sum_1 > 1e-06f || v_sum_1 != v_sum_1) ? v_sum_1 : 1e-06f);
    __syncthreads();

    // Write the tile back to global memory
    for (int64_t c = lane; c < cols; c += 32) {
        out[(blockIdx.x * blockDim.x + threadIdx.x) / 32 * cols + c] = shared_tile[c] / v_clamp;
    }
}

extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows <= 0) return;
    lowered_rows<<<(unsigned)((rows * 32 + 255) / 256), 256, 0, stream>>>(x, out, rows, cols);
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _lib.kernel_forward(x, out, x.numel() // x.shape[-1], x.shape[-1])
        return out
