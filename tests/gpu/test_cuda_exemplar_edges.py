"""The CUDA exemplars at the shapes a seed meets outside the benchmark: sizes that are not a multiple of 4,
single rows, rows longer than the registers hold (the tiled path), unaligned tensors (the scalar path),
groups that straddle channels, more rows than a grid's y dimension. Each exemplar is built once, with its
own signature, and called directly."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.gpu

ATOL, RTOL = 1e-4, 1e-3  # the evaluator's fp32 tolerance


def _lib(name: str):
    from kforge_desktop.kernels.native import load_native
    from kforge_desktop.search.exemplars import exemplar_named
    from kforge_desktop.search.scaffold import PRELUDE

    ex = exemplar_named(name, "cuda")
    assert ex is not None, name
    return load_native(PRELUDE["cuda"] + "\n" + ex.code, lang="cuda")


def _unaligned(t: torch.Tensor) -> torch.Tensor:
    """The same values in a contiguous tensor whose data starts 4 bytes past a 16-byte boundary."""
    flat = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    out = flat[1:].view(t.shape)
    out.copy_(t)
    assert out.data_ptr() % 16 != 0
    return out


def _check(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    torch.cuda.synchronize()
    assert torch.isfinite(got).all(), f"{what}: non-finite output"
    err = (got - want).abs().max().item() if got.numel() else 0.0
    assert torch.allclose(got, want, atol=ATOL, rtol=RTOL), f"{what}: max abs err {err:.3g}"


ROW_SHAPES = [(1, 1), (3, 3), (7, 5), (33, 1000), (5, 4096), (4, 4099), (3, 20000), (2, 40000)]


@pytest.mark.parametrize("unaligned", [False, True])
@pytest.mark.parametrize("shape", ROW_SHAPES, ids=[f"{r}x{c}" for r, c in ROW_SHAPES])
def test_row_exemplars(shape, unaligned):
    rows, cols = shape
    x = 3.0 * torch.randn(rows, cols, device="cuda") + 0.5
    r = torch.randn(rows, cols, device="cuda") + 20.0  # a common offset: the variance must not cancel
    w = 1.0 + 0.1 * torch.randn(cols, device="cuda")
    b = 0.1 * torch.randn(cols, device="cuda")
    if unaligned:
        x, r, w, b = map(_unaligned, (x, r, w, b))
    out = torch.full_like(x, float("nan"))
    if unaligned:
        out = _unaligned(out)

    _lib("row_softmax").kernel_forward(x, out, rows, cols, 1.0)
    _check(out, torch.softmax(x, -1), f"row_softmax {shape}")

    _lib("row_softmax").kernel_forward(x, out, rows, cols, -1.0 / 0.7)  # a temperature, and a negative one
    _check(out, torch.softmax(x / -0.7, -1), f"row_softmax scale {shape}")

    _lib("rms_norm").kernel_forward(x, w, out, rows, cols, 1e-6)
    _check(out, x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w, f"rms_norm {shape}")

    _lib("rms_norm_residual").kernel_forward(x, r, w, out, rows, cols, 1e-5)
    h = x + r
    _check(out, h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5) * w, f"rms_norm_residual {shape}")

    _lib("layer_norm").kernel_forward(r, w, b, out, rows, cols, 1e-5)
    _check(out, F.layer_norm(r, (cols,), w, b, 1e-5), f"layer_norm {shape}")

    _lib("layer_norm_residual").kernel_forward(x, r, w, b, out, rows, cols, 1e-5)
    _check(out, F.layer_norm(x + r, (cols,), w, b, 1e-5), f"layer_norm_residual {shape}")

    sums = torch.full((rows,), float("nan"), device="cuda")
    _lib("row_sum").kernel_forward(x, sums, rows, cols)
    torch.cuda.synchronize()
    want = x.double().sum(-1).float()
    assert torch.allclose(sums, want, atol=1e-4 * math.sqrt(cols), rtol=1e-4), f"row_sum {shape}"


MASK_SHAPES = [(1, 1), (2, 3), (3, 17), (2, 1024), (1, 16400)]


@pytest.mark.parametrize("unaligned", [False, True])
@pytest.mark.parametrize("shape", MASK_SHAPES, ids=[f"{b}x{t}x{t}" for b, t in MASK_SHAPES])
def test_masked_softmax(shape, unaligned):
    batch, t = shape
    if unaligned and t > 2000:
        pytest.skip("the scalar path at this size is covered by the aligned run's tail")
    scores = 4.0 * torch.randn(batch, t, t, device="cuda")
    if unaligned:
        scores = _unaligned(scores)
    out = torch.full_like(scores, float("nan"))
    scale = 0.125
    _lib("masked_softmax").kernel_forward(scores, out, batch * t, t, scale)
    mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device="cuda"), diagonal=1)
    _check(out, torch.softmax((scores * scale).masked_fill(mask, float("-inf")), dim=-1), f"masked_softmax {shape}")


GROUP_SHAPES = [  # (batch, channels, spatial dims, groups)
    (2, 6, (5, 5), 3),  # 50 values a group: no float4 layout, the scalar path
    (2, 8, (5, 5), 2),  # 100 values a group, 25 a channel: float4s straddle channels
    (3, 64, (1,), 8),  # one value a channel
    (2, 32, (7, 9), 4),  # fewer float4s than a block has threads
    (16, 512, (16, 16), 32),  # 512 groups: more than the grid's blocks, each block takes several
    (2, 64, (64, 64), 32),
    (1, 512, (64, 64), 32),  # 65536 values a group: whole unrolled steps only
    (1, 4, (300, 300), 1),  # 360000: unrolled steps and a remainder
    (1, 3, (301, 299), 3),  # odd sizes
    # larger than L2: each slice held in shared memory by a cluster of blocks
    (16, 512, (64, 64), 32),  # the benchmark problem: 8 blocks a slice
    (24, 512, (35, 35), 16),  # 39200 values a slice, float4s that straddle channels
    (64, 64, (32, 32), 32),  # 2048 values a slice: one block, no cluster
]


@pytest.mark.parametrize("unaligned", [False, True])
@pytest.mark.parametrize("shape", GROUP_SHAPES, ids=[f"{b}x{c}x{'x'.join(map(str, s))}g{g}" for b, c, s, g in GROUP_SHAPES])
def test_group_norm(shape, unaligned):
    batch, channels, dims, groups = shape
    x = 2.0 * torch.randn(batch, channels, *dims, device="cuda") + 3.0
    w = 1.0 + 0.1 * torch.randn(channels, device="cuda")
    b = 0.1 * torch.randn(channels, device="cuda")
    if unaligned:
        x = _unaligned(x)
    spatial = math.prod(dims)
    want = F.group_norm(x, groups, w, b, 1e-5)
    for name, expect in (("group_norm", want), ("group_norm_silu", F.silu(want))):
        out = torch.full_like(x, float("nan"))
        _lib(name).kernel_forward(x, w, b, out, batch, channels, spatial, 1e-5, groups)
        _check(out, expect, f"{name} {shape}")


FLAT_SHAPES = [(1, 1), (1, 3), (7, 5), (3, 4097), (300000, 3), (64, 4096)]


@pytest.mark.parametrize("unaligned", [False, True])
@pytest.mark.parametrize("shape", FLAT_SHAPES, ids=[f"{r}x{c}" for r, c in FLAT_SHAPES])
def test_elementwise_exemplars(shape, unaligned):
    rows, cols = shape
    x = 3.0 * torch.randn(rows, cols, device="cuda")
    y = torch.randn(rows, cols, device="cuda")
    bias = 0.1 * torch.randn(cols, device="cuda")
    if unaligned:
        x, y, bias = map(_unaligned, (x, y, bias))
    out = torch.full_like(x, float("nan"))

    _lib("relu").kernel_forward(x, out, rows, cols)
    _check(out, torch.relu(x), f"relu {shape}")

    _lib("silu_mul").kernel_forward(x, y, out, rows, cols)
    _check(out, F.silu(x) * y, f"silu_mul {shape}")

    _lib("gelu_bias").kernel_forward(x, bias, out, rows, cols)
    _check(out, F.gelu(x + bias, approximate="tanh"), f"gelu_bias {shape}")

    _lib("bias_gelu_erf").kernel_forward(x, bias, out, rows, cols)
    _check(out, F.gelu(x + bias), f"bias_gelu_erf {shape}")
