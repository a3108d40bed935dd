// GroupNorm+SiLU with each (sample, group) slice held in shared memory: a cluster of `parts` blocks shares a
// slice, each block loads its part once (summing it on the way), the cluster merges the sums in distributed
// shared memory, and each block writes its part from shared memory. x is read from memory once and never from
// L2 again; several blocks an SM (SMEM_KB of shared memory each at most) overlap one slice's loads with another's
// stores. The loads go through registers (default), as cp.async copies (LOAD_ASYNC, in SPLIT groups) or as one
// bulk copy a block (BULK_LOAD); the stores as streaming stores or one bulk copy a block (BULK_STORE). LOAD_ASYNC
// at SMEM_KB=32 was fastest and became the exemplar's path for tensors larger than L2; then, with REG_F4=1 (4 KB of
// each part in registers, seven blocks an SM instead of six), the path it has now. Also: the sums merged through
// global memory instead of a cluster (FLAGS), timing references with no merge (NO_CLUSTER_SUM, NO_CLUSTER_LAUNCH),
// the blocks an SM set by the shared memory each takes (OCC_SMEM_KB) and the loads' and stores' cache hints. Slices
// too large for PARTS_MAX blocks, or without a float4 layout, are not handled here. Measured:
// benchmarks/group_norm_variants.py.
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cstdint>
#include <cmath>

namespace cg = cooperative_groups;

#ifndef THREADS
#define THREADS 256
#endif
#ifndef SMEM_KB
#define SMEM_KB 64  // the most shared memory a block holds of its slice
#endif
#ifndef PARTS_MAX
#define PARTS_MAX 8  // blocks a slice (16 needs Hopper's non-portable cluster size)
#endif
#ifndef UNROLL
#define UNROLL 8
#endif

__device__ float2 block_sum2(float2 v, float2* red) {
    for (int o = 16; o > 0; o >>= 1) {
        v.x += __shfl_xor_sync(0xffffffff, v.x, o);
        v.y += __shfl_xor_sync(0xffffffff, v.y, o);
    }
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < blockDim.x / 32 ? red[threadIdx.x] : make_float2(0.0f, 0.0f);
        for (int o = 16; o > 0; o >>= 1) {
            v.x += __shfl_xor_sync(0xffffffff, v.x, o);
            v.y += __shfl_xor_sync(0xffffffff, v.y, o);
        }
        if (threadIdx.x == 0) red[32] = v;
    }
    __syncthreads();
    return red[32];
}

__device__ __forceinline__ float silu(float v) { return __fdividef(v, 1.0f + __expf(-v)); }

#ifndef SILU_MODE
#define SILU_MODE 0  // 0: silu(y) = y / (1 + __expf(-y)); 1: exp2 of a second FMA with log2(e) folded into scale
#endif               // and shift (one multiply less a value); 2: no SiLU (the plain norm's cost, for comparison);
                     // 3: silu(y) = h + h tanh(h), h = y / 2 folded into scale and shift: one special-function
                     // operation a value (tanh.approx) instead of two (ex2 and the reciprocal of a divide)

__device__ __forceinline__ float ex2(float v) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
}

__device__ __forceinline__ float tanh_approx(float v) {
    float r;
    asm("tanh.approx.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
}

// the output of one value, normalized as v * scale + shift
__device__ __forceinline__ float out1(float v, float scale, float shift, float scale2, float shift2) {
#if SILU_MODE == 1
    return __fdividef(v * scale + shift, 1.0f + ex2(v * scale2 + shift2));  // scale2 = -scale log2(e), ...
#elif SILU_MODE == 2
    return v * scale + shift;
#elif SILU_MODE == 3
    const float h = v * scale2 + shift2;  // scale2 = scale / 2, shift2 = shift / 2
    return fmaf(h, tanh_approx(h), h);
#else
    return silu(v * scale + shift);
#endif
}

__device__ __forceinline__ int channel_of(int c, int spatial, float inv_spatial) {
    int ch = __float2int_rz((float)c * inv_spatial);
    if (ch * spatial > c) --ch;
    else if ((ch + 1) * spatial <= c) ++ch;
    return ch;
}

// the cluster's total of each block's (sum, sum of squares) of its part: each block's in its `sums`, read by
// the others through distributed shared memory. `again`: the slot held the previous slice's, so wait until every
// block has read it. The arrival after reading is waited for before the next slice (or before leaving).
__device__ float2 cluster_sum2(float2 s, float2* sums, int parts, bool again) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cg::cluster_group cluster = cg::this_cluster();
    if (again) cluster.barrier_wait();
    if (threadIdx.x == 0) *sums = s;
    cluster.sync();
    s = threadIdx.x % 32 < parts ? *cluster.map_shared_rank(sums, threadIdx.x % 32) : make_float2(0.0f, 0.0f);
    for (int o = 16; o > 0; o >>= 1) {
        s.x += __shfl_xor_sync(0xffffffff, s.x, o);
        s.y += __shfl_xor_sync(0xffffffff, s.y, o);
    }
    cluster.barrier_arrive();
#endif
    return s;
}

__device__ __forceinline__ void add4(float2& s, float4 v, float K) {
    const float a = v.x - K, b = v.y - K, c = v.z - K, d = v.w - K;
    s.x += (a + b) + (c + d);
    s.y += (a * a + b * b) + (c * c + d * d);
}

#if defined(FLAGS)
// The blocks of a slice without a cluster: each takes a ticket as it starts (the ticket, not blockIdx, says which
// slice and part it does, so a block waits only for blocks that have started or are the next to start), publishes
// its sums in global memory with a flag set to this launch's epoch, and reads its siblings' once their flags show
// it. No cluster is scheduled as a whole, so an SM's free slot takes the next block at once. The last block to
// finish resets the tickets for the next launch (launches on one stream only).
#define FLAG_SLOTS (1 << 16)
__device__ unsigned int gn_ticket = 0, gn_done = 0;
__device__ unsigned int gn_flag[FLAG_SLOTS];
__device__ float2 gn_partial[FLAG_SLOTS];

__device__ float2 flags_sum2(float2 s, int64_t blk, int parts, unsigned epoch, float2* total) {
    if (threadIdx.x == 0) {
        __stcg(&gn_partial[blk % FLAG_SLOTS], s);
        __threadfence();
        atomicExch(&gn_flag[blk % FLAG_SLOTS], epoch);
    }
    if (threadIdx.x < 32) {
        float2 v = make_float2(0.0f, 0.0f);
        if ((int)threadIdx.x < parts) {
            const int64_t j = (blk / parts * parts + threadIdx.x) % FLAG_SLOTS;
            while (*(volatile unsigned*)&gn_flag[j] != epoch) __nanosleep(20);
            __threadfence();
            v = __ldcg(&gn_partial[j]);
        }
        for (int o = 16; o > 0; o >>= 1) {
            v.x += __shfl_xor_sync(0xffffffff, v.x, o);
            v.y += __shfl_xor_sync(0xffffffff, v.y, o);
        }
        if (threadIdx.x == 0) *total = v;
    }
    __syncthreads();
    return *total;
}
#endif

// cluster barriers are used unless the sums go through global memory (FLAGS) or are not merged at all
// (NO_CLUSTER_SUM: each block normalizes by its own part's sums, a timing reference that is not correct)
#if defined(FLAGS) || defined(NO_CLUSTER_SUM)
#define USES_CLUSTER 0
#else
#define USES_CLUSTER 1
#endif

#ifndef REG_F4
#define REG_F4 0  // float4s a thread holds of its block's part in registers (the rest in shared memory): with
#endif            // less shared memory a block, more blocks an SM
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif

__global__ void __launch_bounds__(THREADS, MIN_BLOCKS) group_norm_silu_smem(
    const float* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
    float* __restrict__ out, int64_t channels, int spatial, int64_t num_groups, float eps, int parts, int64_t slices,
    unsigned epoch) {
    extern __shared__ float4 buf[];
    __shared__ float2 red[33];
    __shared__ float2 sums;
    const int64_t per_group = channels / num_groups;
    const int count = (int)(per_group * spatial);
    const int part4 = count / 4 / parts;  // this block's float4s
    const int n4 = part4 - REG_F4 * THREADS;  // those held in shared memory (the last REG_F4 * THREADS in registers)
#if defined(PERSISTENT)
    // as many clusters as fit at once, each walking over the slices (no cluster launched and retired a slice)
    const int64_t blk = blockIdx.x;
    for (int64_t g = blk / parts, first = 1; g < slices; g += gridDim.x / parts, first = 0) {
#elif defined(FLAGS)
    {
    __shared__ unsigned ticket;
    if (threadIdx.x == 0) ticket = atomicAdd(&gn_ticket, 1u);
    __syncthreads();
    const int64_t blk = ticket, g = blk / parts, first = 1;
#else
    {
    const int64_t blk = blockIdx.x, g = blk / parts, first = 1;
#endif
    const int begin4 = (int)(blk % parts) * part4;
    const float* xg = x + g * count;
    const float4* x4 = reinterpret_cast<const float4*>(xg) + begin4;
    float4* y4 = reinterpret_cast<float4*>(out + g * count) + begin4;
    const float K = __ldg(xg);
    float2 s = make_float2(0.0f, 0.0f);
    int i;
#if defined(BULK_LOAD)
    // one bulk copy (the tensor memory accelerator) brings the block's part into shared memory
    __shared__ alignas(8) unsigned long long bar;
    const unsigned bar_s = (unsigned)__cvta_generic_to_shared(&bar);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared.b64 [%0], 1;\n" ::"r"(bar_s));
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;\n" ::"r"(bar_s), "r"(n4 * 16) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                     ::"r"((unsigned)__cvta_generic_to_shared(buf)), "l"(x4), "r"(n4 * 16), "r"(bar_s) : "memory");
    }
    __syncthreads();  // the barrier is initialized before anyone waits on it
    unsigned done = 0;
    while (!done)
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared.b64 p, [%1], 0;\n selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(bar_s) : "memory");
    for (i = threadIdx.x; i < n4; i += THREADS) add4(s, buf[i], K);
#elif defined(LOAD_ASYNC)
    // every load of the block's part in flight at once, straight into shared memory, then summed from there by the
    // thread that loaded it; in SPLIT groups, each summed as soon as it has arrived
#ifndef SPLIT
#define SPLIT 1
#endif
#if REG_F4 > 0
    // the part's last REG_F4 * THREADS float4s go to registers, loaded first so they are in flight with the copies
    float4 reg[REG_F4];
#pragma unroll
    for (int u = 0; u < REG_F4; ++u) reg[u] = __ldcs(x4 + n4 + u * THREADS + threadIdx.x);
#endif
    const int per = (n4 + SPLIT * THREADS - 1) / (SPLIT * THREADS) * THREADS;  // float4s a group
    for (int gi = 0; gi < SPLIT; ++gi) {
#if defined(LOAD_EVICT_FIRST)
        unsigned long long policy;  // x is read once: its lines are the first L2 gives up
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
#endif
        for (i = gi * per + threadIdx.x; i < min(n4, (gi + 1) * per); i += THREADS) {
            const unsigned dst = (unsigned)__cvta_generic_to_shared(buf + i);
#if defined(LOAD_EVICT_FIRST)
            asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(x4 + i),
                         "l"(policy));
#elif defined(LOAD_PREFETCH)
            asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(dst), "l"(x4 + i));
#else
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(x4 + i));
#endif
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    }
#pragma unroll
    for (int gi = 0; gi < SPLIT; ++gi) {
        if (SPLIT - 1 - gi == 3) asm volatile("cp.async.wait_group 3;\n" ::: "memory");
        if (SPLIT - 1 - gi == 2) asm volatile("cp.async.wait_group 2;\n" ::: "memory");
        if (SPLIT - 1 - gi == 1) asm volatile("cp.async.wait_group 1;\n" ::: "memory");
        if (SPLIT - 1 - gi == 0) asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        for (i = gi * per + threadIdx.x; i < min(n4, (gi + 1) * per); i += THREADS) add4(s, buf[i], K);
    }
#if REG_F4 > 0
#pragma unroll
    for (int u = 0; u < REG_F4; ++u) add4(s, reg[u], K);
#endif
#else
    i = threadIdx.x;
    for (; i + (UNROLL - 1) * THREADS < n4; i += UNROLL * THREADS) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = __ldcs(x4 + i + u * THREADS);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            buf[i + u * THREADS] = v[u];
            add4(s, v[u], K);
        }
    }
    for (; i < n4; i += THREADS) {
        const float4 v = __ldcs(x4 + i);
        buf[i] = v;
        add4(s, v, K);
    }
#endif
    s = block_sum2(s, red);  // its __syncthreads also orders buf's stores before the reads below
#if defined(FLAGS)
    if (parts > 1) s = flags_sum2(s, blk, parts, epoch, &sums);
#elif USES_CLUSTER
    if (parts > 1) s = cluster_sum2(s, &sums, parts, !first);
#endif
    const float mean_k = s.x / (float)count;
    const float mean = K + mean_k, inv_std = rsqrtf(fmaxf(s.y / (float)count - mean_k * mean_k, 0.0f) + eps);
    const float* wg = weight + (g % num_groups) * per_group;
    const float* bg = bias + (g % num_groups) * per_group;
    const float inv_spatial = 1.0f / (float)spatial;
#if defined(WALK)
    // the channel followed as i steps (no division a float4): scale and shift recomputed when it changes
    int c = 4 * (begin4 + (int)threadIdx.x), ch = c / spatial, end = (ch + 1) * spatial;
    float scale = inv_std * __ldg(wg + ch), shift = __ldg(bg + ch) - mean * scale;
#endif
#ifdef WRITE_UNROLL
    constexpr int write_unroll = WRITE_UNROLL;
#pragma unroll write_unroll
#endif
    for (i = threadIdx.x; i < n4; i += THREADS) {
        const float4 v = buf[i];
#if defined(WALK)
        if (c >= end) {
            while (c >= end) ++ch, end += spatial;
            scale = inv_std * __ldg(wg + ch);
            shift = __ldg(bg + ch) - mean * scale;
        }
        c += 4 * THREADS;
#else
        const int ch = channel_of(4 * (begin4 + i), spatial, inv_spatial);  // spatial % 4 == 0 (the launcher checks)
        const float scale = inv_std * __ldg(wg + ch), shift = __ldg(bg + ch) - mean * scale;
#endif
#if SILU_MODE == 3
        const float scale2 = 0.5f * scale, shift2 = 0.5f * shift;
#else
        const float scale2 = -1.4426950409f * scale, shift2 = -1.4426950409f * shift;
#endif
        const float4 y = make_float4(out1(v.x, scale, shift, scale2, shift2), out1(v.y, scale, shift, scale2, shift2),
                                     out1(v.z, scale, shift, scale2, shift2), out1(v.w, scale, shift, scale2, shift2));
#if defined(BULK_STORE)
        buf[i] = y;  // in place; one bulk copy writes the part out
#elif defined(STORE_PLAIN)
        y4[i] = y;  // a write-back store (the others are streaming stores)
#else
        __stcs(y4 + i, y);
#endif
    }
#if REG_F4 > 0
#pragma unroll
    for (int u = 0; u < REG_F4; ++u) {  // the float4s held in registers
        i = n4 + u * THREADS + threadIdx.x;
        const float4 v = reg[u];
        const int ch = channel_of(4 * (begin4 + i), spatial, inv_spatial);
        const float scale = inv_std * __ldg(wg + ch), shift = __ldg(bg + ch) - mean * scale;
        const float scale2 = 0.5f * scale, shift2 = 0.5f * shift;  // SILU_MODE 3 (the launcher checks)
        __stcs(y4 + i, make_float4(out1(v.x, scale, shift, scale2, shift2), out1(v.y, scale, shift, scale2, shift2),
                                   out1(v.z, scale, shift, scale2, shift2), out1(v.w, scale, shift, scale2, shift2)));
    }
#endif
#if defined(BULK_STORE)
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // the stores above, seen by the bulk copy
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n"
                     ::"l"(y4), "r"((unsigned)__cvta_generic_to_shared(buf)), "r"(n4 * 16) : "memory");
        asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
        asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");  // shared memory read before the block ends
    }
#endif
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && USES_CLUSTER
    if (parts > 1) cg::this_cluster().barrier_wait();
#endif
#if defined(FLAGS)
    if (threadIdx.x == 0 && atomicAdd(&gn_done, 1u) == gridDim.x - 1) {  // every block has its ticket: reset
        gn_ticket = 0;
        gn_done = 0;
        __threadfence();
    }
#endif
}

#if defined(PIPELINE)
// As many clusters as fit at once, each walking over the slices with two buffers a block: the next slice's part
// is copied in (cp.async) while this one's is summed and written out, so a block's loads never wait for its
// stores. Twice SMEM_KB of shared memory a block.
__global__ void __launch_bounds__(THREADS) group_norm_silu_pipe(
    const float* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
    float* __restrict__ out, int64_t channels, int spatial, int64_t num_groups, float eps, int parts, int64_t slices,
    unsigned epoch) {
    extern __shared__ float4 buf[];  // [2][n4]
    __shared__ float2 red[33];
    __shared__ float2 sums;
    const int64_t per_group = channels / num_groups;
    const int count = (int)(per_group * spatial);
    const int n4 = count / 4 / parts;
    const int begin4 = (int)(blockIdx.x % parts) * n4;
    const int64_t stride = gridDim.x / parts;
    const float inv_spatial = 1.0f / (float)spatial;
    auto copy_in = [&](int64_t g, float4* dst) {  // this thread's float4s of slice g's part
        const float4* x4 = reinterpret_cast<const float4*>(x + g * count) + begin4;
        for (int i = threadIdx.x; i < n4; i += THREADS)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
                         ::"r"((unsigned)__cvta_generic_to_shared(dst + i)), "l"(x4 + i));
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    int64_t g = blockIdx.x / parts;
    if (g < slices) copy_in(g, buf);
    for (int it = 0; g < slices; g += stride, ++it) {
        float4* cur = buf + (it & 1) * n4;
        if (g + stride < slices) {
            copy_in(g + stride, buf + ((it + 1) & 1) * n4);  // this thread read that buffer last iteration
            asm volatile("cp.async.wait_group 1;\n" ::: "memory");  // slice g's part has landed
        } else {
            asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        }
        const float K = __ldg(x + g * count);
        float2 s = make_float2(0.0f, 0.0f);
        for (int i = threadIdx.x; i < n4; i += THREADS) add4(s, cur[i], K);
        s = block_sum2(s, red);
        if (parts > 1) s = cluster_sum2(s, &sums, parts, it > 0);
        const float mean_k = s.x / (float)count;
        const float mean = K + mean_k, inv_std = rsqrtf(fmaxf(s.y / (float)count - mean_k * mean_k, 0.0f) + eps);
        const float* wg = weight + (g % num_groups) * per_group;
        const float* bg = bias + (g % num_groups) * per_group;
        float4* y4 = reinterpret_cast<float4*>(out + g * count) + begin4;
        for (int i = threadIdx.x; i < n4; i += THREADS) {
            const float4 v = cur[i];
            const int ch = channel_of(4 * (begin4 + i), spatial, inv_spatial);
            const float scale = inv_std * __ldg(wg + ch), shift = __ldg(bg + ch) - mean * scale;
#if SILU_MODE == 3
            const float scale2 = 0.5f * scale, shift2 = 0.5f * shift;
#else
            const float scale2 = -1.4426950409f * scale, shift2 = -1.4426950409f * shift;
#endif
            __stcs(y4 + i, make_float4(out1(v.x, scale, shift, scale2, shift2), out1(v.y, scale, shift, scale2, shift2),
                                       out1(v.z, scale, shift, scale2, shift2), out1(v.w, scale, shift, scale2, shift2)));
        }
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (parts > 1) cg::this_cluster().barrier_wait();
#endif
}
#endif

extern "C" void kernel_forward(const float* x, const float* weight, const float* bias, float* out,
                               int64_t batch, int64_t channels, int64_t spatial, float eps, int64_t num_groups,
                               cudaStream_t stream) {
    const int64_t count = channels / num_groups * spatial, slices = batch * num_groups;
    if (slices <= 0 || count <= 0 || spatial % 4 || (uintptr_t)x % 16 || (uintptr_t)out % 16) return;
    int parts = 1;
    while (parts < PARTS_MAX && (count * 4 / parts > SMEM_KB * 1024 || count % (4 * parts * 2) == 0 && slices * parts < 264))
        parts *= 2;  // small enough for a block; with few slices, more blocks a slice
    if (count * 4 / parts > SMEM_KB * 1024 || count % (4 * parts)) return;  // not handled here
#if defined(PIPELINE)
    const int bytes = (int)(count * 4 / parts) * 2;
    auto kernel = group_norm_silu_pipe;
#else
    const int bytes = (int)(count * 4 / parts) - REG_F4 * THREADS * 16;  // REG_F4: part of it in registers
    auto kernel = group_norm_silu_smem;
#if REG_F4 > 0 && (SILU_MODE != 3 || !defined(LOAD_ASYNC) || defined(WALK) || defined(BULK_STORE))
#error "REG_F4 is written for LOAD_ASYNC with SILU_MODE=3"
#endif
    if (bytes <= 0) return;
#endif
#if defined(OCC_SMEM_KB)
    // a block takes OCC_SMEM_KB of shared memory whatever its part needs: fewer blocks an SM (228 KB an SM)
    const int alloc = bytes > OCC_SMEM_KB * 1024 ? bytes : OCC_SMEM_KB * 1024;
#else
    const int alloc = bytes;
#endif
#if !defined(NO_CARVEOUT)
    // as much of the SM's on-chip memory as shared memory as the blocks take (else the driver's choice)
    cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
#endif
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, alloc);
#if PARTS_MAX > 8
    cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
#endif
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3((unsigned)(slices * parts));
    config.blockDim = dim3(THREADS);
    config.dynamicSmemBytes = alloc;
    config.stream = stream;
    cudaLaunchAttribute cluster;
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = (unsigned)parts;
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    config.attrs = &cluster;
#if defined(FLAGS) || defined(NO_CLUSTER_LAUNCH)
    config.numAttrs = 0;  // the blocks of a slice are not launched as a cluster
#else
    config.numAttrs = parts > 1 ? 1 : 0;
#endif
#if defined(PERSISTENT) || defined(PIPELINE)
    int fit = 0;
    if (parts > 1 && cudaOccupancyMaxActiveClusters(&fit, (void*)kernel, &config) == cudaSuccess && fit > 0 &&
        fit < slices)
        config.gridDim = dim3((unsigned)(fit * parts));
#endif
    static unsigned epoch = 0;  // FLAGS: a flag set in an earlier launch is not this one's
    cudaLaunchKernelEx(&config, kernel, x, weight, bias, out, channels, (int)spatial, num_groups, eps,
                       parts, slices, ++epoch);
}
