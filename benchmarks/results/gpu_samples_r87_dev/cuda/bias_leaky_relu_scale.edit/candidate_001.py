"""Candidate for bias_leaky_relu_scale: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

__global__ void lowered_rows(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ out, int64_t rows, int64_t cols, float scale) {
    const int lane = threadIdx.x % 32;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x + 31) / 32;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        if ((r * cols) % 4 == 0) { // if the row length is a multiple of 4
            __shared__ float4 sharedBias[4];
            sharedBias[0] = bias[0];
            sharedBias[1] = bias[1];
            sharedBias[2] = bias[2];
            sharedBias[3] = bias[3];
            const float4 v_add = __ldg(sharedBias, lane);
            const bool v_gt = (v_add.x > 0.0f) || (v_add.y > 0.0f) || (v_add.z > 0.0f) || (v_add.w > 0.0f);
            const float v_mul = (v_add.x * 0.2f) + (v_add.y * 0.2f) + (v_add.z * 0.2f) + (v_add.w * 0.2f);
            const float v_where = (v_gt ? v_add.x : v_mul);
            const float v_mul_1 = (v_where * scale);
            out[r * cols] = v_mul_1;
            out[r * cols + 1] = v_mul_1;
            out[r * cols + 2] = v_mul_1;
            out[r * cols + 3] = v_mul_1;
        } else { // if the row length is not a multiple of 4
            const float v_add = (x[r * cols + lane] + bias[lane]);
            const bool v_gt = (v_add > 0.0f);
            const float v_mul = (v_add * 0.2f);
            const float v_where = (v_gt ? v_add : v_mul);
            const float v_mul_1 = (v_where * scale);
            out[r * cols + lane] = v_mul_1;
        }
    }
}

extern "C" void kernel_forward(const float* x, const float* bias, float* out, int64_t rows, int64_t cols, float scale, cudaStream_t stream) {
    if (rows <= 0) return;
    lowered_rows<<<(unsigned)((rows * 32 + 255) / 256), 256, 0, stream>>>(x, bias, out, rows, cols, scale);
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self, dim: int, scale: float = 1.41421356):
        super().__init__()
        self.bias = nn.Parameter(0.1 * torch.randn(dim))
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _lib.kernel_forward(x, self.bias.contiguous(), out, x.numel() // x.shape[-1], x.shape[-1], float(self.scale))
        return out
