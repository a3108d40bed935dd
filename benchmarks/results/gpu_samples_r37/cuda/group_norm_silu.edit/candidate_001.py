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
#define THREADS 512
#define UNROLL 8  // float4 loads a thread has in flight in a pass
// A tensor larger than L2 (the two passes would read much of it from memory twice): each slice is held on chip
// by a cluster of `parts` blocks, HELD_BYTES at most a block: a thread's first float4 in a register, the rest of
// the block's part in shared memory (cp.async: every load in flight at once, through no registers). Each thread
// sums the float4s it loaded, the cluster merges the sums, and the block writes its part out. Several blocks an
// SM overlap one slice's loads with another's stores: the more, the closer to a plain copy's speed, which is why
// 4 KB of each 32 KB part sit in registers (seven blocks fit an SM's shared memory, six with all of it there).
// vec and count % (4 * parts) == 0 (the launcher checks).
#define HELD_THREADS 256
#define HELD_BYTES (32 * 1024)
#define HELD_BLOCKS 7  // blocks an SM: registers for this many

// (sum, sum of squares) over the block, returned to every thread
__device__ float2 block_sum2(float2 v, float2* smem) {
    for (int o = 16; o > 0; o >>= 1) {
        v.x += __shfl_xor_sync(0xffffffff, v.x, o);
        v.y += __shfl_xor_sync(0xffffffff, v.y, o);
    }
    if (threadIdx.x % 32 == 0) smem[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < blockDim.x / 32 ? smem[threadIdx.x] : make_float2(0.0f, 0.0f);
        for (int o = 16; o > 0; o >>= 1) {
            v.x += __shfl_xor_sync(0xffffffff, v.x, o);
            v.y += __shfl_xor_sync(0xffffffff, v.y, o);
        }
        if (threadIdx.x == 0) smem[32] = v;
    }
    __syncthreads();
    v = smem[32];
    __syncthreads();  // smem is free for the next group
    return v;
}

// the (sum, sum of squares) of the `parts` blocks of a cluster (each block's total in s), to every thread;
// `sums` is this block's slot, read by the others in distributed shared memory: the block calls cluster_read()
// before it writes the slot again or leaves
__device__ float2 cluster_sum2(float2 s, float2* sums, int parts) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cg::cluster_group cluster = cg::this_cluster();
    if (threadIdx.x == 0) *sums = s;
    cluster.sync();  // every block's sums are published
    s = threadIdx.x % 32 < parts ? *cluster.map_shared_rank(sums, threadIdx.x % 32) : make_float2(0.0f, 0.0f);
    for (int o = 16; o > 0; o >>= 1) {  // every warp merges them itself: lane r reads block r's
        s.x += __shfl_xor_sync(0xffffffff, s.x, o);
        s.y += __shfl_xor_sync(0xffffffff, s.y, o);
    }
    cluster.barrier_arrive();  // this block has read the others' slots
#endif
    return s;
}

// waits until every block of the cluster has read this block's slot (their cluster_sum2 returned)
__device__ void cluster_read() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cg::this_cluster().barrier_wait();
#endif
}

__device__ __forceinline__ float silu_of_half(float h) {
    const float t;
    asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(h));
    return fmaf(h, t, h);
}

// c / spatial without an integer division: a float estimate, corrected to the exact quotient
__device__ __forceinline__ int channel_of(int c, int spatial, float inv_spatial) {
    int ch = __float2int_rz((float)c * inv_spatial);
    if (ch * spatial > c) --ch;
    else if ((ch + 1) * spatial <= c) ++ch;
    return ch;
}

// the shifted sums of 4 values: (x - K) and (x - K)^2
__device__ __forceinline__ void add4(float2& s, float4 v, float K) {
    const float a = v.x - K, b = v.y - K, c = v.z - K, d = v.w - K;
    s.x += (a + b) + (c + d);
    s.y += (a * a + b * b) + (c * c + d * d);
}

// silu((v - mean) * inv_std * weight[ch] + bias[ch]) for the value at group offset c (in channel ch);
// weight and bias start at the group's first channel
__device__ __forceinline__ float norm1(float v, int c, int spatial, float inv_spatial, float mean, float inv_std,
                                       const float* weight, const float* bias) {
    const int ch = channel_of(c, spatial, inv_spatial);
    return silu_of_half(0.5f * ((v - mean) * inv_std * __ldg(weight + ch) + __ldg(bias + ch)));
}

// the same for the 4 values at group offsets c..c+3: one channel's when spatial % 4 == 0
__device__ __forceinline__ float4 norm4(float4 v, int c, int spatial, float inv_spatial, float mean, float inv_std,
                                        const float* weight, const float* bias) {
    if (spatial % 4 == 0) {
        const int ch = channel_of(c, spatial, inv_spatial);
        // half of the normalized value, v * scale + shift, goes into silu_of_half
        const float scale = 0.5f * inv_std * __ldg(weight + ch), shift = 0.5f * __ldg(bias + ch) - mean * scale;
        return make_float4(silu_of_half(v.x * scale + shift), silu_of_half(v.y * scale + shift),
                           silu_of_half(v.z * scale + shift), silu_of_half(v.w * scale + shift));
    }
    return make_float4(norm1(v.x, c, spatial, inv_spatial, mean, inv_std, weight, bias),
                       norm1(v.y, c + 1, spatial, inv_spatial, mean, inv_std, weight, bias),
                       norm1(v.z, c + 2, spatial, inv_spatial, mean, inv_std, weight, bias),
                       norm1(v.w, c + 3, spatial, inv_spatial, mean, inv_std, weight, bias));
}

// One block per (sample, group) slice at a time, or `parts` blocks of a cluster (each its part of the slice);
// the grid walks over the slices. A slice's values are contiguous: count = channels / num_groups * spatial of
// them. vec: count % 4 == 0 and x, out 16-byte aligned.
// Statistics: sums of (x - K) and (x - K)^2 with K the slice's first value, so the one-pass variance
// E[(x-K)^2] - E[x-K]^2 keeps its precision when the values sit far from zero.
__global__ void __launch_bounds__(THREADS, 2) group_norm_silu_groups(  // 2: two blocks fit an SM
    const float* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
    float* __restrict__ out, int64_t slices, int64_t channels, int spatial, int64_t num_groups, float eps, int parts,
    bool vec) {
    __shared__ float2 smem[33];
    __shared__ float2 sums;
    const int64_t per_group = channels / num_groups;
    const int count = (int)(per_group * spatial);
    const float inv_spatial = 1.0f / (float)spatial;
    // this block's part of a slice: values [begin, end), begin a multiple of 4
    const int part = parts == 1 ? count : ((count + parts - 1) / parts + 3) / 4 * 4;
    const int begin = min((int)(blockIdx.x % parts) * part, count), end = min(begin + part, count);
    const int first4 = vec ? begin / 4 : 0, end4 = vec ? end / 4 : 0;  // its float4s (none without vec)
    const int first = vec ? end : begin;  // its values taken one by one
    for (int64_t g = blockIdx.x / parts; g < slices; g += gridDim.x / parts) {
        const float* xg = x + g * count;
        float* yg = out + g * count;
        const float K = __ldg(xg);
        // pass 1: the sums; __ldcg keeps the slice in L2 for pass 2
        float2 s = make_float2(0.0f, 0.0f);
        const float4* x4 = reinterpret_cast<const float4*>(xg);
        int i = first4 + threadIdx.x;
        for (; i + (UNROLL - 1) * THREADS < end4; i += UNROLL * THREADS) {
            float4 v[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) v[u] = __ldcg(x4 + i + u * THREADS);  // all loads first: in flight together
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) add4(s, v[u], K);
        }
        for (; i < end4; i += THREADS) add4(s, __ldcg(x4 + i), K);
        for (int c = first + threadIdx.x; c < end; c += THREADS) {  // scalar path (no float4 layout)
            const float a = xg[c] - K;
            s.x += a;
            s.y += a * a;
        }
        s = block_sum2(s, smem);
        if (parts > 1) s = cluster_sum2(s, &sums, parts);
        const float mean_k = s.x / (float)count;
        const float mean = K + mean_k, inv_std = rsqrtf(fmaxf(s.y / (float)count - mean_k * mean_k, 0.0f) + eps);
        const float* wg = weight + (g % num_groups) * per_group;
        const float* bg = bias + (g % num_groups) * per_group;
        // pass 2: read back (last use: __ldcs), normalize, write once (streaming stores)
        float4* y4 = reinterpret_cast<float4*>(yg);
        for (i = first4 + threadIdx.x; i + (UNROLL - 1) * THREADS < end4; i += UNROLL * THREADS) {
            float4 v[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) v[u] = __ldcs(x4 + i + u * THREADS);
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                __stcs(y4 + i + u * THREADS, norm4(v[u], 4 * (i + u * THREADS), spatial, inv_spatial, mean, inv_std, wg, bg));
        }
        for (; i < end4; i += THREADS)
            __stcs(y4 + i, norm4(__ldcs(x4 + i), 4 * i, spatial, inv_spatial, mean, inv_std, wg, bg));
        for (int c = first + threadIdx.x; c < end; c += THREADS)
            yg[c] = norm1(xg[c], c, spatial, inv_spatial, mean, inv_std, wg, bg);
        if (parts > 1) cluster_read();
    }
}

__global__ void __launch_bounds__(HELD_THREADS, HELD_BLOCKS) group_norm_silu_held(
    const float* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
    float* __restrict__ out, int64_t channels, int spatial, int64_t num_groups, float eps, int parts) {
    extern __shared__ float4 held[];  // the part's float4s from HELD_THREADS on
    __shared__ float2 smem[33];
    __shared__ float2 sums;
    const int64_t per_group = channels / num_groups;
    const int count = (int)(per_group * spatial);
    const int n4 = count / 4 / parts;  // this block's float4s
    const int64_t g = blockIdx.x / parts;
    const int first4 = (int)(blockIdx.x % parts) * n4;
    const float* xg = x + g * count;
    const float4* x4 = reinterpret_cast<const float4*>(xg) + first4;
    float4* y4 = reinterpret_cast<float4*>(out + g * count) + first4;
    const bool mine = threadIdx.x < n4;
    float4 first = make_float4(0.0f, 0.0f, 0.0f, 0.0f);  // the part's float4 threadIdx.x
    if (mine) first = __ldcs(x4 + threadIdx.x);
    for (int i = HELD_THREADS + threadIdx.x; i < n4; i += HELD_THREADS) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
                     ::"r"((unsigned)__cvta_generic_to_shared(held + i - HELD_THREADS)), "l"(x4 + i));
#else
        held[i - HELD_THREADS] = x4[i];
#endif
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");  // this thread's copies landed
#endif
    const float K = __ldg(xg);
    float2 s = make_float2(0.0f, 0.0f);
    if (mine) add4(s, first, K);
    for (int i = HELD_THREADS + threadIdx.x; i < n4; i += HELD_THREADS) add4(s, held[i - HELD_THREADS], K);  // its own
    s = block_sum2(s, smem);
    if (parts > 1) s = cluster_sum2(s, &sums, parts);
    const float mean_k = s.x / (float)count;
    const float mean = K + mean_k, inv_std = rsqrtf(fmaxf(s.y / (float)count - mean_k * mean_k, 0.0f) + eps);
    const float* wg = weight + (g % num_groups) * per_group;
    const float* bg = bias + (g % num_groups) * per_group;
    const float inv_spatial = 1.0f / (float)spatial;
    if (mine) __stcs(y4 + threadIdx.x, norm4(first, 4 * (first4 + threadIdx.x), spatial, inv_spatial, mean, inv_std, wg, bg));
    for (int i = HELD_THREADS + threadIdx.x; i < n4; i += HELD_THREADS)
        __stcs(y4 + i, norm4(held[i - HELD_THREADS], 4 * (first4 + i), spatial, inv_spatial, mean, inv_std, wg, bg));
    if (parts > 1) cluster_read();
}

// `blocks` blocks of `threads` with `smem` bytes of dynamic shared memory each, in clusters of `parts` (the blocks
// of a cluster run at the same time and read each other's shared memory; no clusters when parts == 1)
template <typename... Params, typename... Args>
static void launch(void (*kernel)(Params...), int64_t blocks, int threads, int64_t smem, int parts, cudaStream_t stream,
                   Args... args) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3((unsigned)blocks);
    config.blockDim = dim3((unsigned)threads);
    config.dynamicSmemBytes = (size_t)smem;
    config.stream = stream;
    cudaLaunchAttribute cluster;
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = (unsigned)parts;
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    config.attrs = &cluster;
    config.numAttrs = parts > 1 ? 1 : 0;
    cudaLaunchKernelEx(&config, kernel, args...);
}

extern "C" void kernel_forward(const float* x, const float* norm_weight, const float* norm_bias, float* out, int64_t batch, int64_t channels, int64_t spatial, float norm_eps, int64_t norm_num_groups, cudaStream_t stream) {
    const int64_t count = channels / norm_num_groups * spatial, slices = batch * norm_num_groups;
    if (slices <= 0 || count <= 0 || count > INT32_MAX) return;  // a slice of 2^31 values is 8 GB
    static int sms = 0, l2 = 0, clusters = 0;
    if (!sms) {
        int device = 0;
        cudaGetDevice(&device);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
        cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device);
        cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, device);  // Hopper (sm_90) and later
        // as much of each SM's on-chip memory as shared memory as it takes: as many held parts an SM as fit
        cudaFuncSetAttribute(group_norm_silu_held, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
    }
    const bool vec = count % 4 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)out % 16 == 0;
    // larger than L2: held on chip, when a slice fits in a cluster's
    int held_parts = 1;
    while (held_parts < 8 && count * 4 > held_parts * HELD_BYTES) held_parts *= 2;
    if (vec && clusters && slices * count * 4 > (int64_t)l2 * 3 / 4 && count * 4 <= held_parts * HELD_BYTES &&
        count % (4 * held_parts) == 0) {
        const int64_t part = count * 4 / held_parts, in_registers = HELD_THREADS * 16;
        launch(group_norm_silu_held, slices * held_parts, HELD_THREADS, part > in_registers ? part - in_registers : 0, (int)held_parts, stream,
               x, norm_weight, norm_bias, out, channels, (int)spatial, norm_num_groups, norm_eps, (int)held_parts);
        return;
    }
    // fewer slices than SMs (a batch of one): a cluster of up to 8 blocks a slice, each with a float4 a thread at least
    int64_t parts = clusters && 2 * slices <= sms ? sms / slices : 1;
    parts = parts > 8 ? 8 : parts;  // the largest portable cluster
    while (parts > 1 && count < parts * THREADS * 4) --parts;
    // slices in flight: two blocks an SM when their values fit in three quarters of L2, else one (a slice read
    // back after others pushed it out of L2 comes from memory again)
    const int per_sm = 2 * (int64_t)sms * count * 4 <= (int64_t)l2 * 3 / 4 ? 2 : 1;
    launch(group_norm_silu_groups, parts > 1 ? slices * parts : (slices < sms * per_sm ? slices : sms * per_sm), THREADS,
           0, (int)parts, stream, x, norm_weight, norm_bias, out, slices, channels, (int)spatial, norm_num_groups, norm_eps, (int)parts, vec);
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
