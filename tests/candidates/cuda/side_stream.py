# expect: ok -- the honest kernel plus 1 ms of busy work, on a side stream the timer must still see
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
__global__ void rms_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                           int64_t cols, float eps) {
  const int64_t row = blockIdx.x;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;
  float acc = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) { float v = xr[c]; acc += v * v; }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, o);
  __shared__ float sums[32];
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  if (lane == 0) sums[wid] = acc;
  __syncthreads();
  if (wid == 0) {
    acc = lane < (int)(blockDim.x >> 5) ? sums[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, o);
    if (lane == 0) sums[0] = acc;
  }
  __syncthreads();
  const float inv = rsqrtf(sums[0] / cols + eps);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) { yr[c] = xr[c] * inv * w[c]; }
}
__global__ void spin_kernel(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) { }
}
extern "C" int spin(int64_t cycles, cudaStream_t stream) {
  spin_kernel<<<1, 1, 0, stream>>>((long long)cycles);
  return (int)cudaGetLastError();
}
extern "C" int rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t cols, float eps,
                        cudaStream_t stream) {
  rms_kernel<<<(unsigned)rows, 256, 0, stream>>>(x, w, y, cols, eps);
  return (int)cudaGetLastError();
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        if not hasattr(self, "_side"):
            self._side = torch.cuda.Stream()
        self._side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self._side):
            _lib.rms_norm(x, self.weight, out, x.shape[0], x.shape[1], self.eps)
            _lib.spin(2_000_000)  # about 1 ms at 2 GHz, hidden off the timed stream
        return out
