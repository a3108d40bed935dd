"""Candidate for smoothed_cross_entropy: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

__global__ void lowered_rows(const float* __restrict__ logits, const int64_t* __restrict__ labels, float* __restrict__ out, int64_t rows, int64_t cols, int64_t labels_size0) {
    const int lane = threadIdx.x % 32;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x + 31) / 32;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        float v_amax = (-INFINITY);
        float v_sum_1 = 0.0f;
        for (int64_t c = lane; c < cols; c += 32) {
            v_amax = fmaxf(v_amax, logits[r * cols + c]);
            v_sum_1 += expf(logits[r * cols + c] - v_amax);
        }
        float v_log = logf(v_sum_1);
        const bool v_ne = (labels[r] != -100.0f);
        const int64_t v_scalar_tensor = 0.0f;
        const int64_t v_where = (v_ne ? labels[r] : v_scalar_tensor);
        const int64_t v_unsqueeze = v_where;
        float v_gather;
        {  // the value at the row's index
            const int64_t c = (int64_t)(v_unsqueeze);
            const float v_sub = (logits[r * cols + c] - v_amax);
            const float v_sub_1 = (v_sub - v_log);
            v_gather = v_sub_1;
        }
        const float v_squeeze = v_gather;
        const float v_neg = (-v_squeeze);
        const bool v_ne_1 = (labels[r] != -100.0f);
        const float v_scalar_tensor_1 = 0.0f;
        const float v_where_1 = (v_ne_1 ? v_neg : v_scalar_tensor_1);
        const float v_full = 0.0f;
        float v_sum_2 = 0.0f;
        for (int64_t c = lane; c < cols; c += 32) {
            const float v_sub = (logits[r * cols + c] - v_amax);
            const float v_sub_1 = (v_sub - v_log);
            v_sum_2 += expf(logits[r * cols + c] - v_amax);
        }
        float v_log_1 = logf(v_sum_2);
        const bool v_eq = (labels[r] == -100.0f);
        const float v_scalar_tensor_2 = 0.0f;
        const float v_where_2 = (v_eq ? v_scalar_tensor_2 : v_log_1);
        const float v_copy_ = v_where_2;
        const float v_mul = (v_copy_ * 0.00015625f);
        const float v_mul_1 = (v_where_1 * 0.9f);
        const float v_add = (v_mul_1 + v_mul);
        if (lane == 0) out[r] = v_add;
    }
}

extern "C" void kernel_forward(const float* logits, const int64_t* labels, float* out, int64_t rows, int64_t cols, int64_t labels_size0, cudaStream_t stream) {
    if (rows <= 0) return;
    lowered_rows<<<(unsigned)((rows * 32 + 255) / 256), 256, 0, stream>>>(logits, labels, out, rows, cols, labels_size0);
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits, labels):
        logits = logits.contiguous()
        labels = labels.contiguous()
        out = torch.empty(logits.shape[:-1], dtype=torch.float32, device=logits.device)
        _lib.kernel_forward(logits, labels, out, logits.numel() // logits.shape[-1], logits.shape[-1], labels.shape[0])
        return out
