"""A hand-written CUDA kernel for the batch norm + ReLU target of vision_net.py: eval-mode batch
norm folded into a per-channel scale and shift, ReLU in the same pass; native format."""
import torch
import torch.nn as nn

from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>

__global__ void bn_relu_kernel(const float* __restrict__ x, const float* __restrict__ mean,
                               const float* __restrict__ var, const float* __restrict__ w,
                               const float* __restrict__ b, float* __restrict__ out, int64_t total, int64_t c,
                               int64_t hw, float eps) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t ch = (i / hw) % c;
        const float s = w[ch] * rsqrtf(var[ch] + eps);
        const float v = (x[i] - mean[ch]) * s + b[ch];
        out[i] = v > 0.f ? v : 0.f;
    }
}

extern "C" void bn_relu(const float* x, const float* mean, const float* var, const float* w, const float* b,
                        float* out, int64_t total, int64_t c, int64_t hw, float eps, cudaStream_t stream) {
    int64_t blocks = (total + 255) / 256;
    if (blocks > 65535) blocks = 65535;
    bn_relu_kernel<<<(unsigned)blocks, 256, 0, stream>>>(x, mean, var, w, b, out, total, c, hw, eps);
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cuda")


class ModelNew(nn.Module):
    def forward(self, x, running_mean, running_var, weight, bias):
        x = x.contiguous()
        out = torch.empty_like(x)
        c = x.shape[1]
        _lib.bn_relu(x, running_mean.contiguous(), running_var.contiguous(), weight.contiguous(), bias.contiguous(),
                     out, x.numel(), c, x.numel() // (x.shape[0] * c), 1e-5)
        return out
