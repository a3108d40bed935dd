# expect: ok -- TorchInductor style: extern_kernels.mm for the GEMM, a Triton kernel for bias + ReLU, call(args)
import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch._inductor.select_algorithm import extern_kernels


@triton.jit
def triton_poi_fused_addmm_relu_0(in_out_ptr0, in_ptr0, xnumel, N: tl.constexpr, XBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    x0 = xindex % N
    tmp0 = tl.load(in_out_ptr0 + xindex, xmask)
    tmp1 = tl.load(in_ptr0 + x0, xmask)
    tmp2 = tmp0 + tmp1
    tmp3 = tl.where((tmp2 > 0.0) | (tmp2 != tmp2), tmp2, 0.0)  # ReLU keeping NaN, as Inductor's maximum does
    tl.store(in_out_ptr0 + xindex, tmp3, xmask)


def call(args):
    primals_1, primals_2, primals_3 = args
    buf0 = torch.empty((primals_3.shape[0], primals_1.shape[0]), device=primals_3.device, dtype=torch.float32)
    extern_kernels.mm(primals_3, primals_1.t(), out=buf0)
    n = buf0.numel()
    triton_poi_fused_addmm_relu_0[(triton.cdiv(n, 256),)](buf0, primals_2, n, primals_1.shape[0], XBLOCK=256)
    return (buf0,)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, input_0):
        return call([self.linear.weight, self.linear.bias, input_0.contiguous()])[0]
