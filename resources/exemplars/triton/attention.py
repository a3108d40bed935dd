# exemplar: attention
# ops: matmul bmm mul truediv div triu tril masked_fill softmax
# about: softmax(scale * A @ B, masked) @ V in one pass (flash attention): the score matrix is never written to memory; fp32 products on the tensor cores as three TF32 products each (fp32 accuracy)
import os

import torch
import triton
import triton.language as tl

MASK_NONE, MASK_GIVEN, MASK_TRIU, MASK_TRIL = 0, 1, 2, 3


@triton.jit
def _masked(y_ptrs, rows, cols, in_bounds, MASK: tl.constexpr, DIAG: tl.constexpr):
    """The positions to keep: those in bounds that the reference does not fill with -inf (MASK says
    how it builds its mask: the given tensor, or its triu/tril at DIAG)."""
    keep = in_bounds
    if MASK != 0:
        flag = tl.load(y_ptrs, mask=in_bounds, other=0) != 0
        if MASK == 2:
            flag = flag & ((cols[None, :] - rows[:, None]) >= DIAG)
        if MASK == 3:
            flag = flag & ((cols[None, :] - rows[:, None]) <= DIAG)
        keep = keep & (flag == 0)
    return keep


@triton.jit
def _step(a, m_i, l_i, acc, b_base, v_base, sb_n, sv_n, cols, keep, qk_scale, N, d_ok, e_ok,
          PRECISION: tl.constexpr):
    """One BLOCK_N-wide step of the online softmax: scores of these columns, the running row max and
    sum rescaled, their share of the output added."""
    col_ok = cols < N
    b = tl.load(b_base + cols[None, :] * sb_n, mask=d_ok[:, None] & col_ok[None, :], other=0.0).to(a.dtype)  # `other` may widen
    s = tl.dot(a, b, input_precision=PRECISION) * qk_scale
    s = tl.where(keep, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    # a row whose every column so far is masked keeps max -inf: guard the exp against -inf - -inf
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.math.exp2(s - m_safe[:, None])
    alpha = tl.math.exp2(m_i - m_safe)
    l_i = l_i * alpha + tl.sum(p, 1)
    v = tl.load(v_base + cols[:, None] * sv_n, mask=col_ok[:, None] & e_ok[None, :], other=0.0).to(v_base.dtype.element_ty)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
    return m_new, l_i, acc


HIDDEN_STEP = 16  # the columns of one entry of ``hidden_values``: every BLOCK_N is a multiple of it


@triton.jit
def _hidden(p_base, start, sp_b, e, e_ok, NB, BLOCK_N: tl.constexpr, BLOCK_E: tl.constexpr):
    """NaN for each output column where the values of the BLOCK_N columns from ``start`` hold a NaN or an
    infinity, else 0: what the reference adds for a block its mask hides entirely (each value times 0)."""
    out = tl.zeros([BLOCK_E], tl.float32)
    for sub in tl.static_range(BLOCK_N // 16):
        blk = start // 16 + sub + e * 0
        out += tl.load(p_base + blk * sp_b + e, mask=e_ok & (blk < NB), other=0.0)
    return out


# tile sizes tried on the first call of each shape (a config that does not fit the card's shared
# memory or registers is skipped): 128 rows x 64 columns, one stage, won on a 16-head causal attention
_CONFIGS = [
    triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=st)
    for bm, bn, w, st in [(128, 64, 8, 1), (128, 32, 8, 2), (128, 32, 8, 1), (64, 64, 4, 2), (64, 32, 4, 1),
                          (64, 32, 8, 1), (64, 16, 4, 2)]
]
if os.environ.get("TRITON_INTERPRET") == "1":  # on a CPU, under Triton's interpreter: nothing to time
    _CONFIGS = _CONFIGS[-1:]


@triton.autotune(configs=_CONFIGS, key=["M", "N", "D", "E", "MASK"])
@triton.jit
def _attention_kernel(
    A, B, V, Y, P, Out, scale,
    sa_z, sa_h, sa_m, sa_d,  # A: the scores' left operand, [Z, H, M, D]
    sb_z, sb_h, sb_d, sb_n,  # B: the right operand, [Z, H, D, N]
    sv_z, sv_h, sv_n, sv_e,  # V: [Z, H, N, E]
    sy_z, sy_h, sy_m, sy_n,  # Y: what the mask is made of, broadcast to [Z, H, M, N] (strides 0)
    so_z, so_h, so_m, so_e,  # Out: the output, [Z, H, M, E]
    sp_z, sp_h, sp_b,  # P: ``hidden_values``, [Z, H, cdiv(N, 16), E] (read only where a block is hidden)
    H, M, N, D, E,
    MASK: tl.constexpr, DIAG: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_E: tl.constexpr,
    PRECISION: tl.constexpr,
):
    # one program: BLOCK_M rows of the scores of one (z, h), all N columns in BLOCK_N steps
    pid_m = tl.program_id(0)
    zh = tl.program_id(1)
    z = zh // H
    h = zh % H
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    d = tl.arange(0, BLOCK_D)
    e = tl.arange(0, BLOCK_E)
    row_ok = rows < M
    d_ok = d < D  # BLOCK_D and BLOCK_E: D and E rounded up to a power of two
    e_ok = e < E
    a = tl.load(A + z * sa_z + h * sa_h + rows[:, None] * sa_m + d[None, :] * sa_d,
                mask=row_ok[:, None] & d_ok[None, :], other=0.0).to(A.dtype.element_ty)
    b_base = B + z * sb_z + h * sb_h + d[:, None] * sb_d
    v_base = V + z * sv_z + h * sv_h + e[None, :] * sv_e
    y_base = Y + z * sy_z + h * sy_h + rows[:, None] * sy_m
    qk_scale = scale * 1.4426950408889634  # exp(x) = exp2(x * log2(e))

    # running max and sum of each row (online softmax) and the unnormalized output
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_E], tl.float32)

    # a triu mask (j - i >= DIAG hidden) cannot hide every row of a block left of column n_all:
    # those blocks are always computed; past it a block the mask hides entirely is skipped
    n_all = N
    if MASK == 2:
        n_all = tl.minimum(N, tl.maximum(0, (pid_m * BLOCK_M + BLOCK_M - 1 + DIAG) // BLOCK_N * BLOCK_N))
    for start in range(0, n_all, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        in_bounds = row_ok[:, None] & (cols[None, :] < N)
        keep = _masked(y_base + cols[None, :] * sy_n, rows, cols, in_bounds, MASK, DIAG)
        m_i, l_i, acc = _step(a, m_i, l_i, acc, b_base, v_base, sb_n, sv_n, cols, keep, qk_scale, N, d_ok, e_ok, PRECISION)
    for start in range(n_all, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        in_bounds = row_ok[:, None] & (cols[None, :] < N)
        keep = _masked(y_base + cols[None, :] * sy_n, rows, cols, in_bounds, MASK, DIAG)
        if tl.max(keep.to(tl.int32)) > 0:
            m_i, l_i, acc = _step(a, m_i, l_i, acc, b_base, v_base, sb_n, sv_n, cols, keep, qk_scale, N, d_ok, e_ok, PRECISION)
        else:  # skipped, but the reference multiplies these values by 0: a NaN or infinity among them is NaN there
            acc += _hidden(P + z * sp_z + h * sp_h, start, sp_b, e, e_ok, tl.cdiv(N, 16), BLOCK_N, BLOCK_E)[None, :]
    # a row that is masked everywhere is NaN in the reference (softmax of all -inf): 0 / 0 here too
    out = acc / l_i[:, None]
    tl.store(Out + z * so_z + h * so_h + rows[:, None] * so_m + e[None, :] * so_e, out,
             mask=row_ok[:, None] & e_ok[None, :])


def _four(t: torch.Tensor) -> torch.Tensor:
    """A view of ``t`` with two leading batch dimensions (size 1 where it has fewer)."""
    while t.dim() < 4:
        t = t.unsqueeze(0)
    return t


def hidden_values(v4: torch.Tensor) -> torch.Tensor:
    """Per 16 columns of the scores (rows of ``v4``, [Z, H, N, E]) and output column: NaN where those values hold
    a NaN or an infinity, else 0; fp32, [Z, H, cdiv(N, 16), E]. A block of columns the mask hides from every row
    of a program is skipped, but the reference multiplies its values by 0 and so passes such a value on."""
    n = v4.shape[-2]
    nb = triton.cdiv(n, HIDDEN_STEP)
    finite = torch.isfinite(v4)
    if n % HIDDEN_STEP:
        finite = torch.cat([finite, finite.new_ones(*finite.shape[:-2], nb * HIDDEN_STEP - n, finite.shape[-1])], -2)
    bad = ~finite.unflatten(-2, (nb, HIDDEN_STEP)).all(-2)
    return torch.zeros(bad.shape, device=v4.device, dtype=torch.float32).masked_fill_(bad, float("nan"))


def attention(a, b, v, scale=1.0, mask=None, mask_kind=MASK_NONE, diag=0):
    """softmax((a @ b) * scale, dim=-1) @ v, with the positions a mask marks filled with -inf before
    the softmax; statistics and sums in fp32 whatever the inputs' dtype, the output in v's. a: [..., M, D], b: [..., D, N], v: [..., N, E]; up to two batch dimensions. ``mask``
    is what the reference's mask is made of (mask_kind: the tensor itself, or its triu/tril at diag)."""
    # the tensor cores read TF32 operands with the reduced dimension innermost (d for a and b, n for
    # v): a strided view laid out otherwise is copied once (a few microseconds against the products)
    if a.stride(-1) != 1:
        a = a.contiguous()
    if b.stride(-2) != 1:
        b = b.transpose(-2, -1).contiguous().transpose(-2, -1)
    if v.stride(-2) != 1:
        v = v.transpose(-2, -1).contiguous().transpose(-2, -1)
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2], v.shape[:-2])
    m, dim = a.shape[-2:]
    n, e = b.shape[-1], v.shape[-1]
    out = torch.empty(*batch, m, e, device=a.device, dtype=v.dtype)
    a4, b4, v4, o4 = (_four(t.expand(*batch, *t.shape[-2:])) for t in (a, b, v, out))
    zz, hh = o4.shape[:2]
    if mask is None:
        y4, p4, mask_kind = o4, o4, MASK_NONE  # not read
    else:
        y4, p4 = _four(mask.expand(*batch, m, n)), hidden_values(v4)
    block_d, block_e = max(16, triton.next_power_of_2(dim)), max(16, triton.next_power_of_2(e))

    def grid(meta):
        return (triton.cdiv(m, meta["BLOCK_M"]), zz * hh)

    _attention_kernel[grid](
        a4, b4, v4, y4, p4, o4, scale,
        *a4.stride(), *b4.stride(), *v4.stride(), *y4.stride(), *o4.stride(), *p4.stride()[:3],
        hh, m, n, dim, e,
        MASK=mask_kind, DIAG=diag, BLOCK_D=block_d, BLOCK_E=block_e,
        # fp32: three TF32 products each (fp32's accuracy); 16-bit inputs multiply as they are
        PRECISION="tf32x3" if a.dtype == torch.float32 else "tf32",
    )
    return out
