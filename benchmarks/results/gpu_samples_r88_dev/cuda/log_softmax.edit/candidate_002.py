"""Candidate for log_softmax: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

__global__ void lowered_rows(const float* __restrict__ logits, float* __restrict__ out, int64_t rows, int64_t cols) {
    // a warp a row; the warps of the whole grid stride over the rows, so any grid covers them all
    // (threads per block: a multiple of 32)
    const int lane = threadIdx.x % 32;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x + 31) / 32;
    float running_max = (-INFINITY);
    float running_sum = 0.0f;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        for (int64_t c = lane; c < cols; c += 32) {
            const float v = logits[r * cols + c];
            running_max = fmaxf(running_max, v);
            running_sum += expf(v - running_max);
        }
        float v_log = logf(running_sum);
        for (int64_t c = lane; c < cols; c += 32) {
            out[r * cols + c] = v_log;
        }
    }
}

extern "C" void kernel_forward(const float* logits, float* out, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows <= 0) return;
    lowered_rows<<<(unsigned)((rows * 32 + 255) / 256), 256, 0, stream>>>(logits, out, rows, cols);
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits):
        logits = logits.contiguous()
        out = torch.empty_like(logits)
        _lib.kernel_forward(logits, out, logits.numel() // logits.shape[-1], logits.shape[-1])
        return out
