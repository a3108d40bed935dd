"""Candidate for log_softmax: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cmath>
#include <cstdint>
#include <cstddef>
#include <algorithm>
#include <limits>

// The reference lowered to plain loops: rows in parallel; per row, one pass per reduction, then the outputs.
// Correct by construction, not fast: each reduction reads the row again.
extern "C" void kernel_forward(const float* logits, float* out, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        float v_amax = (-INFINITY);
        for (int64_t c = 0; c < cols; ++c) {
            v_amax = fmaxf(v_amax, logits[r * cols + c]);
        }
        float v_sum_1 = 0.0f;
        for (int64_t c = 0; c < cols; ++c) {
            const float v_sub = (logits[r * cols + c] - v_amax);
            const float v_exp = expf(v_sub);
            v_sum_1 += v_exp;
        }
        const float v_log = logf(v_sum_1);
        for (int64_t c = 0; c < cols; ++c) {
            const float v_sub = (logits[r * cols + c] - v_amax);
            const float v_sub_1 = (v_sub - v_log);
            out[r * cols + c] = v_sub_1;
        }
    }
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cpp")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits):
        logits = logits.contiguous()
        out = torch.empty_like(logits)
        _lib.kernel_forward(logits, out, logits.numel() // logits.shape[-1], logits.shape[-1])
        return out
