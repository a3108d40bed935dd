"""Candidate for padding_masked_softmax: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

__global__ void lowered_rows(const float* __restrict__ scores, const bool* __restrict__ keep, float* __restrict__ out, int64_t rows, int64_t cols, int64_t keep_size0, int64_t keep_size1) {
    // a warp a row; the warps of the whole grid stride over the rows, so any grid covers them all
    // (threads per block: a multiple of 32)
    const int lane = threadIdx.x % 32;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x + 31) / 32;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        const float v_scalar_tensor = (-INFINITY);
        float v_amax = (-INFINITY);
        float v_sum_1 = 0.0f;
        for (int64_t c = lane; c < cols; c += 32) {
            const bool v_bitwise_not = (!keep[r / 128 * 128 + c]);
            const float v_where = (v_bitwise_not ? v_scalar_tensor : scores[r * cols + c]);
            v_amax = fmaxf(v_amax, v_where);
            v_sum_1 += expf(v_where - v_amax);
        }
        if (v_amax != v_max) {
            v_amax = v_max;
            v_sum_1 = 0.0f;
        }
        v_sum_1 += v_sum_1;
        for (int64_t c = lane; c < cols; c += 32) {
            const bool v_bitwise_not = (!keep[r / 128 * 128 + c]);
            const float v_where = (v_bitwise_not ? v_scalar_tensor : scores[r * cols + c]);
            const float v_sub = (v_where - v_amax);
            const float v_exp = expf(v_sub);
            const float v_div = (v_exp / v_sum_1);
            out[r * cols + c] = v_div;
        }
    }
}

extern "C" void kernel_forward(const float* scores, const bool* keep, float* out, int64_t rows, int64_t cols, int64_t keep_size0, int64_t keep_size1, cudaStream_t stream) {
    if (rows <= 0) return;
    lowered_rows<<<(unsigned)((rows * 32 + 255) / 256), 256, 0, stream>>>(scores, keep, out, rows, cols, keep_size0, keep_size1);
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, scores, keep):
        scores = scores.contiguous()
        keep = keep.contiguous()
        out = torch.empty_like(scores)
        _lib.kernel_forward(scores, keep, out, scores.numel() // scores.shape[-1], scores.shape[-1], keep.shape[0], keep.shape[1])
        return out
