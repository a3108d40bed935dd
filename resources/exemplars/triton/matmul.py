# exemplar: matmul
# ops: linear matmul mm bmm addmm
# about: a @ b (+ bias), batched and strided, fp32 products on the tensor cores as three TF32 products each (fp32 accuracy); output tiles grouped so neighbouring programs reuse operands from L2
import os

import torch
import triton
import triton.language as tl

# tile sizes tried on the first call of each shape (a config that does not fit the card's shared
# memory or registers is skipped)
_CONFIGS = [
    triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_warps=w, num_stages=st)
    for bm, bn, bk, w, st in [(128, 128, 32, 8, 3), (128, 256, 32, 8, 3), (256, 128, 32, 8, 3), (128, 128, 16, 8, 4),
                              (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (64, 64, 32, 4, 4), (32, 32, 16, 4, 2)]
]
if os.environ.get("TRITON_INTERPRET") == "1":  # on a CPU, under Triton's interpreter: nothing to time
    _CONFIGS = _CONFIGS[-1:]


@triton.autotune(configs=_CONFIGS, key=["M", "N", "K", "HAS_BIAS"])
@triton.jit
def _matmul_kernel(
    A, B, Bias, C, alpha,
    sa_z, sa_m, sa_k,  # A: [Z, M, K]
    sb_z, sb_k, sb_n,  # B: [Z, K, N]
    sc_z, sc_m, sc_n,  # C: [Z, M, N]
    M, N, K,
    HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    PRECISION: tl.constexpr,
):
    # one program: a BLOCK_M x BLOCK_N tile of C; programs of a group of GROUP_M tile rows run
    # one after another down a column of tiles, so the B tiles they share stay in L2
    pid = tl.program_id(0)
    z = tl.program_id(1)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_m = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_m
    pid_n = (pid % per_group) // group_m

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    # rows and columns past the edge read row/column 0 again (in bounds, never stored): the loads
    # of the loop then need a mask only for the last K step
    a_ptrs = A + z * sa_z + (rows % M)[:, None] * sa_m + ks[None, :] * sa_k
    b_ptrs = B + z * sb_z + ks[:, None] * sb_k + (cols % N)[None, :] * sb_n
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=ks[None, :] < K - k0, other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < K - k0, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * sa_k
        b_ptrs += BLOCK_K * sb_k
    acc = acc * alpha
    if HAS_BIAS:
        acc += tl.load(Bias + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
    c_ptrs = C + z * sc_z + rows[:, None] * sc_m + cols[None, :] * sc_n
    tl.store(c_ptrs, acc.to(C.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


def matmul(a, b, bias=None, alpha=1.0):
    """alpha * (a @ b) + bias, as torch.matmul for operands of at least two dimensions (leading
    dimensions broadcast); bias: [N] or None. Accumulates in fp32; the output in a's dtype."""
    if a.dim() < 2 or b.dim() < 2:
        raise ValueError("matmul: both operands need at least two dimensions")
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if b.shape[-2] != k:
        raise ValueError(f"matmul: {tuple(a.shape)} @ {tuple(b.shape)} do not match")
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if b.dim() == 2:  # every row of a against one matrix: one big product
        a3 = a.reshape(1, -1, k)
        b3 = b.unsqueeze(0)
    else:
        a3 = a.expand(*batch, m, k).reshape(-1, m, k)
        b3 = b.expand(*batch, k, n).reshape(-1, k, n)
    # the tensor cores read TF32 operands with the reduced dimension innermost (k): an operand laid
    # out otherwise is copied once into that layout (cheap against the product)
    if a3.stride(-1) != 1:
        a3 = a3.contiguous()
    if b3.stride(-2) != 1:
        b3 = b3.transpose(-2, -1).contiguous().transpose(-2, -1)
    zz, mm = a3.shape[0], a3.shape[1]
    c3 = torch.empty(zz, mm, n, device=a.device, dtype=a.dtype)
    if bias is not None:
        bias = bias.contiguous()
    shape = (*a.shape[:-1], n) if b.dim() == 2 else (*batch, m, n)
    if c3.numel() == 0:
        return c3.reshape(shape)

    def grid(meta):
        return (triton.cdiv(mm, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]), zz)

    _matmul_kernel[grid](
        a3, b3, bias if bias is not None else c3, c3, alpha,
        *a3.stride(), *b3.stride(), *c3.stride(),
        mm, n, k,
        HAS_BIAS=bias is not None,
        # fp32: three TF32 products each (fp32's accuracy); 16-bit inputs multiply as they are
        PRECISION="tf32x3" if a.dtype == torch.float32 else "tf32",
    )
    return c3.reshape(shape)


def linear(x, weight, bias=None):
    """torch.nn.functional.linear: x @ weight.T + bias (weight [N, K] is already K-major as weight.T)."""
    return matmul(x, weight.t(), bias)
