# expect: ok -- KernelBench's own format: load_inline with torch headers (the slow build path)
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void softmax_rows(const float* x, float* y, int cols) {
  int row = blockIdx.x;
  const float* xr = x + (long)row * cols;
  float* yr = y + (long)row * cols;
  __shared__ float red[1024];
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
  red[threadIdx.x] = m; __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) { if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]); __syncthreads(); }
  m = red[0]; __syncthreads();
  float sum = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(xr[c] - m);
  red[threadIdx.x] = sum; __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) { if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s]; __syncthreads(); }
  sum = red[0];
  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) / sum;
}
torch::Tensor softmax_cuda(torch::Tensor x) {
  auto y = torch::empty_like(x);
  softmax_rows<<<x.size(0), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.size(1));
  return y;
}
"""
cpp_source = "torch::Tensor softmax_cuda(torch::Tensor x);"
softmax_ext = load_inline(name="softmax_ext", cpp_sources=cpp_source, cuda_sources=cuda_source,
                          functions=["softmax_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return softmax_ext.softmax_cuda(x.contiguous())
