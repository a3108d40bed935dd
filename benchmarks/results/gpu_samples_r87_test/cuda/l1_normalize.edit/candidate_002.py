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
    // a warp a row; the warps of the whole grid stride over the rows, so any grid covers them all
    // (threads per block: a multiple of 32)
    const int lane = threadIdx.x % 32;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x + 31) / 32;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        // load 4 floats at once if the row length is a multiple of 4
        if (cols % 4 == 0) {
            float4 v_sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            for (int64_t c = lane; c < cols; c += 4) {
                const float4 v_abs = make_float4(fabsf(x[r * cols + c]), fabsf(x[r * cols + c + 1]), fabsf(x[r * cols + c + 2]), fabsf(x[r * cols + c + 3]));
                v_sum += v_abs;
            }
            float4 v_sum_1 = make_float4(v_sum[0], v_sum[1], v_sum[2], v_sum[3]);
            v_sum_1 = __shfl_xor_sync(0xffffffff, v_sum_1, 0x10);
            v_sum_1 = __shfl_xor_sync(0xffffffff, v_sum_1, 0x20);
            v_sum_1 = __shfl_xor_sync(0xffffffff, v_sum_1, 0x40);
            v_sum_1 = __shfl_xor_sync(0xffffffff, v_sum_1, 0x80);
            const float v_clamp = v_sum_1[0] > 1e-06f || v_sum_1[0] != v_sum_1[0] ? v_sum_1[0] : 1e-06f;
            for (int64_t c = lane; c < cols; c += 4) {
                const float4 v_div = make_float4((x[r * cols + c] / v_clamp), (x[r * cols + c + 1] / v_clamp), (x[r * cols + c + 2] / v_clamp), (x[r * cols + c + 3] / v_clamp));
                out[r * cols + c] = v_div;
            }
        } else {
            // load 4 floats at once if the row length is a multiple of 4
            float4 v_sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            for (int64_t c = lane; c < cols - 3; c += 4) {
                const float4 v_abs = make_float4(fabsf(x[r * cols + c]), fabsf(x[r * cols + c + 1]), fabsf(x[r * cols + c + 2]), fabsf(x[r * cols + c + 3]));
                v_sum += v_abs;
            }
            float4 v_sum_1 = make_float4(v_sum[0], v_sum[1], v_sum[2], v_sum[3]);
            v_sum_1 = __shfl_xor_sync(0xffffffff, v_sum_1, 0x10);
            v_sum_1 = __shfl_xor_sync(0xffffffff, v_sum_1, 0x20);
            v_sum_1 = __shfl_xor_sync(0xffffffff, v_sum_1, 0x40);
            v_sum_1 = __shfl_xor_sync(0xffffffff, v_sum_1, 0x80);
            const float v_clamp = v_sum_1[0] > 1e-06f || v_sum_1[0] != v_sum_1[0] ? v_sum_1[0] : 1e-06f;
            for (int64_t c = lane; c < cols - 3; c += 4) {
                const float4 v_div = make_float4((x[r * cols + c] / v_clamp), (x[r * cols + c + 1] / v_clamp), (x[r * cols + c + 2] / v_clamp), (x[r * cols + c + 3] / v_clamp));
                out[r * cols + c] = v_div;
            }
            // load the last 3 floats individually
            const float v_abs_1 = fabsf(x[r * cols + cols - 3]);
            const float v_abs_2 = fabsf(x[r * cols + cols - 2]);
            const float v_abs_3 = fabsf(x[r * cols + cols - 1]);
            float4 v_sum_2 = make_float4(v_abs_1, v_abs_2, v_abs_3, 0.0f);
            v_sum_2 = __shfl_xor_sync(0xffffffff, v_sum_2, 0x10);
            v_sum_2 = __shfl_xor_sync(0xffffffff, v_sum_2, 0x20);
            v_sum_2 = __shfl_xor_sync(0xffffffff, v_sum_2, 0x40);
            v_sum_2 = __shfl_xor_sync(0xffffffff, v_sum_2, 0x80);
            const float v_clamp_2 = v_sum_2[0] > 1e-06f || v_sum_2[0] != v_sum_2[0] ? v_sum_2[0] : 1e-06f;
            const float v_div_1 = (x[r * cols + cols - 3] / v_clamp_2);
            const float v_div_2 = (x[r * cols + cols - 2] / v_clamp_2);
            const float v_div_3 = (x[r * cols + cols - 1] / v_clamp_2);
            out[r * cols + cols - 3] = v_div_1;
            out[r * cols + cols - 2] = v_div_2;
            out[r * cols + cols - 1] = v_div_3;
        }
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
