"""Candidate for group_norm_silu: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
import torch.nn.functional as F
batch, channels, groups, size = 16, 512, 32, 64
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cstdint>
#include <cmath>
namespace cg = cooperative_groups;
// Each thread keeps VEC float4 of its block's part of a group in registers; a block has up to THREADS threads.
// A group (channels / num_groups channels times spatial values, contiguous in memory) is split over up to
// MAX_PARTS blocks of one cluster: groups of up to MAX_PARTS * THREADS * VEC * 4 values are read once,
// larger ones in tiles (read twice).
#ifndef VEC
#define VEC 8
#endif
#ifndef THREADS
#define THREADS 256
#endif
#ifndef MAX_PARTS
#define MAX_PARTS 8  // the largest portable cluster (16 on Hopper with the non-portable attribute)
#endif

extern "C" void kernel_forward(const float* x, const float* norm_weight, const float* norm_bias, float* out, int64_t batch, int64_t channels, int64_t spatial, float norm_eps, int64_t norm_num_groups, cudaStream_t stream) {
    const int64_t count = channels / norm_num_groups * spatial;
    if (batch <= 0 || count <= 0 || count > INT32_MAX) return;  // a group of 2^31 values is 8 GB
    static int clusters = -1;  // Hopper (sm_90) and later launch clusters
    if (clusters < 0) {
        int device = 0;
        cudaGetDevice(&device);
        cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, device);
        if (clusters && MAX_PARTS > 8)
            cudaFuncSetAttribute(group_norm_silu_parts, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    }
    // blocks per group: enough that each part fits in the registers of THREADS threads, at most MAX_PARTS
    int parts = (int)((count + THREADS * VEC * 4 - 1) / (THREADS * VEC * 4));
    parts = !clusters ? 1 : (parts > MAX_PARTS ? MAX_PARTS : parts);
    const int64_t part = ((count + parts - 1) / parts + 3) / 4 * 4;
    // threads: enough that each holds at most VEC float4 of the part, a multiple of 32, from 32 to THREADS
    int64_t threads = (part / 4 + VEC - 1) / VEC;
    threads = (threads + 31) / 32 * 32;
    threads = threads < 32 ? 32 : (threads > THREADS ? THREADS : threads);
    const bool vec = count % 4 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)out % 16 == 0;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3((unsigned)(batch * norm_num_groups * parts));
    config.blockDim = dim3((unsigned)threads);
    config.stream = stream;
    cudaLaunchAttribute cluster;  // the `parts` blocks of a group run at the same time and share memory
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = (unsigned)parts;
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    config.attrs = &cluster;
    config.numAttrs = clusters ? 1 : 0;
    cudaLaunchKernelEx(&config, group_norm_silu_parts, x, norm_weight, norm_bias, out, channels, spatial, norm_num_groups, norm_eps, parts,
                       vec);
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)
        with torch.no_grad():
            self.norm.weight.add_(0.1 * torch.randn(channels))
            self.norm.bias.add_(0.1 * torch.randn(channels))

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _lib.kernel_forward(x, self.norm.weight.contiguous(), self.norm.bias.contiguous(), out, x.shape[0], x.shape[1], x.numel() // (x.shape[0] * x.shape[1]), float(self.norm.eps), int(self.norm.num_groups))
        return out
