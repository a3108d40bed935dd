# exemplar: softmax
# ops: softmax
# about: softmax over the last dimension, one program per row: a row that fits in registers is read once and written once (the bandwidth floor); a wider one in two passes with a running max and sum
import torch
import triton
import triton.language as tl

_MAX_BLOCK = 16384  # widest row held in registers at once


@triton.jit
def _softmax_kernel(X, Y, sx, sy, N, BLOCK: tl.constexpr, ONE_PASS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # int64: rows * stride may pass 2**31 elements
    cols = tl.arange(0, BLOCK)
    x_row = X + row * sx
    y_row = Y + row * sy
    if ONE_PASS:
        x = tl.load(x_row + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, 0))  # a row of only -inf gives NaN, as torch.softmax does
        tl.store(y_row + cols, (e / tl.sum(e, 0)).to(Y.dtype.element_ty), mask=cols < N)
    else:
        m = tl.full([BLOCK], float("-inf"), tl.float32)  # running max and sum per lane
        s = tl.zeros([BLOCK], tl.float32)
        for start in range(0, N, BLOCK):
            x = tl.load(x_row + start + cols, mask=start + cols < N, other=float("-inf")).to(tl.float32)
            m_new = tl.maximum(m, x)
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            s = s * tl.exp(m - m_safe) + tl.exp(x - m_safe)
            m = m_new
        m_row = tl.max(m, 0)
        total = tl.sum(s * tl.exp(m - m_row), 0)
        for start in range(0, N, BLOCK):
            x = tl.load(x_row + start + cols, mask=start + cols < N, other=float("-inf")).to(tl.float32)
            tl.store(y_row + start + cols, (tl.exp(x - m_row) / total).to(Y.dtype.element_ty), mask=start + cols < N)


def softmax(x):
    """The softmax of x over its last dimension, computed in fp32, the output in x's dtype."""
    n = x.shape[-1]
    x2 = x.reshape(-1, n)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    y2 = torch.empty(x2.shape, device=x.device, dtype=x.dtype)
    if y2.numel() == 0:
        return y2.reshape(x.shape)
    block = min(triton.next_power_of_2(n), _MAX_BLOCK)
    warps = 4 if block <= 1024 else 8 if block <= 4096 else 16
    _softmax_kernel[(x2.shape[0],)](x2, y2, x2.stride(0), y2.stride(0), n, BLOCK=block, ONE_PASS=block >= n,
                                    num_warps=warps)
    return y2.reshape(x.shape)
