"""Comparing a candidate's outputs with the reference's: shape, dtype, NaN/Inf, values, rel. L2.

Tolerances are by dtype, and the relative-L2 bound is what makes a precision downgrade visible: an
fp32 problem solved in fp16 or bf16 arithmetic stays within a loose elementwise tolerance but its
relative L2 error is 10-100x above what fp32 reordering produces.
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    rel_l2: float


TOLERANCES = {
    torch.float64: Tolerance(1e-7, 1e-6, 1e-9),
    torch.float32: Tolerance(1e-4, 1e-3, 2e-5),
    torch.float16: Tolerance(1e-2, 1e-2, 2e-3),
    torch.bfloat16: Tolerance(2e-2, 2e-2, 1e-2),
}


def tolerance_for(dtype: torch.dtype, override: dict | None = None) -> Tolerance:
    tol = TOLERANCES.get(dtype, Tolerance(0.0, 0.0, 0.0))
    if override:
        tol = Tolerance(override.get("atol", tol.atol), override.get("rtol", tol.rtol),
                        override.get("rel_l2", tol.rel_l2))
    return tol


@dataclass(frozen=True)
class Comparison:
    ok: bool
    reason: str
    max_abs_err: float
    rel_l2_err: float


def flatten_outputs(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        flat = []
        for o in out:
            flat.extend(flatten_outputs(o))
        return flat
    return [out]


def compare(candidate_out, reference_out, override: dict | None = None) -> Comparison:
    cands, refs = flatten_outputs(candidate_out), flatten_outputs(reference_out)
    if len(cands) != len(refs):
        return Comparison(False, f"returns {len(cands)} outputs, the reference {len(refs)}", math.inf, math.inf)
    worst_abs, worst_l2 = 0.0, 0.0
    for i, (c, r) in enumerate(zip(cands, refs)):
        which = "" if len(refs) == 1 else f"output {i}: "
        if not isinstance(r, torch.Tensor):
            if c != r:
                return Comparison(False, f"{which}returns {c!r}, the reference {r!r}", math.inf, math.inf)
            continue
        if not isinstance(c, torch.Tensor):
            return Comparison(False, f"{which}returns {type(c).__name__}, not a tensor", math.inf, math.inf)
        if tuple(c.shape) != tuple(r.shape):
            return Comparison(False, f"{which}shape {tuple(c.shape)} where the reference has {tuple(r.shape)}",
                              math.inf, math.inf)
        if c.dtype != r.dtype:
            return Comparison(False, f"{which}dtype {c.dtype} where the reference has {r.dtype}", math.inf, math.inf)
        if c.device != r.device:
            c = c.to(r.device)
        if not r.is_floating_point():
            bad = (c != r).sum().item()
            if bad:
                return Comparison(False, f"{which}{bad} of {r.numel()} values differ", math.inf, math.inf)
            continue
        tol = tolerance_for(r.dtype, override)
        stats = _compare_values(c.detach().reshape(-1), r.detach().reshape(-1), tol)
        if stats.finite_mismatch:
            return Comparison(False, f"{which}{stats.finite_mismatch} NaN/Inf values where the reference has finite "
                                     f"ones (or the other way round){unwritten_values(c)}", math.inf, math.inf)
        if stats.nonfinite_differ:
            return Comparison(False, f"{which}non-finite values differ from the reference", math.inf, math.inf)
        max_abs = stats.max_abs
        rel_l2 = math.sqrt(stats.diff_sq / stats.ref_sq) if stats.ref_sq > 0 else math.sqrt(stats.diff_sq)
        worst_abs, worst_l2 = max(worst_abs, max_abs), max(worst_l2, rel_l2)
        if stats.over:
            return Comparison(False, f"{which}{stats.over} of {r.numel()} values differ beyond atol={tol.atol:g}, "
                                     f"rtol={tol.rtol:g} (max abs err {max_abs:.3g}){unwritten_values(c)}"
                                     f"{first_values(c, r, stats.first_over)}", worst_abs, worst_l2)
        if rel_l2 > tol.rel_l2:
            return Comparison(False, f"{which}relative L2 error {rel_l2:.2e} exceeds {tol.rel_l2:.0e} for "
                                     f"{str(r.dtype).replace('torch.', '')} (reduced precision?)", worst_abs, worst_l2)
    return Comparison(True, "", worst_abs, worst_l2)


def first_values(c: torch.Tensor, r: torch.Tensor, flat: int, count: int = 4) -> str:
    """Where the first wrong value is and what surrounds it, as a repair prompt and the user read it:
    "; the first at [0, 5]: expected -7.62, got 0.000488; [0, 5..8] expected [-7.62, ...] got [...]"."""
    if flat < 0 or flat >= r.numel():
        return ""
    cf, rf = c.detach().reshape(-1), r.detach().reshape(-1)
    if not r.dim():
        return f"; expected {rf[0].item():.3g}, got {cf[0].item():.3g}"
    index = [int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(r.shape))]
    n = min(count, r.shape[-1] - index[-1])  # the rest of its row, at most ``count`` values

    def show(t: torch.Tensor) -> str:
        return "[" + ", ".join(f"{v:.3g}" for v in t[flat:flat + n].tolist()) + "]"
    text = f"; the first at [{', '.join(map(str, index))}]: expected {rf[flat].item():.3g}, got {cf[flat].item():.3g}"
    span = ", ".join(map(str, index[:-1] + [f"{index[-1]}..{index[-1] + n - 1}"]))
    return text + (f"; [{span}] expected {show(rf)} got {show(cf)}" if n > 1 else "")


CHUNK = 1 << 22  # elements compared at a time: a chunk's float64 temporaries are tens of MB


def unwritten_values(c: torch.Tensor) -> str:
    """How many values of a wrong output the kernel never wrote: while verifying, outputs start as
    fill bytes (``poisoned_cpu_allocations``, ``poison_allocator``), so a value that still holds them
    was never stored. The default model's kernels from scratch often write one value per row of an
    output with one value per input value; told only "got [-13, 3.4e+38, 3.4e+38]", a repair wrote
    one value per row again. A value only added to (``out[i] += v``) keeps the fill too: it was never
    assigned. "" when every value was."""
    bits_type = {8: torch.int64, 4: torch.int32, 2: torch.int16}.get(c.element_size())
    if bits_type is None or not c.is_floating_point() or c.numel() == 0:
        return ""
    fills = [int.from_bytes(bytes([b]) * c.element_size(), "little", signed=True) for b in _FILL_BYTES]
    flat = c.detach().reshape(-1)
    n = c.shape[-1] if c.dim() else 1
    step = n * max(1, CHUNK // n)  # whole rows at a time
    total, per_row = 0, set()
    for lo in range(0, flat.numel(), step):
        bits = flat[lo:lo + step].view(bits_type)
        never = (bits == fills[0]) | (bits == fills[1])
        total += int(never.sum().item())
        if len(per_row) < 2 and n > 1:
            per_row.update((n - never.view(-1, n).sum(1)).unique().tolist())
        del bits, never
    if not total:
        return ""
    if total == c.numel():
        return f"; the kernel assigned none of the {total} output values, and every one must be"
    if c.numel() // n > 1 and n > 1 and len(per_row) == 1:
        return (f"; the kernel wrote {per_row.pop()} of the {n} values of each row (the last dimension): {total} of "
                f"the {c.numel()} output values were never assigned, and every one must be")
    return f"; {total} of the {c.numel()} output values were never assigned, and every one must be"


@dataclass
class _ValueStats:
    finite_mismatch: int = 0
    nonfinite_differ: bool = False
    max_abs: float = 0.0
    diff_sq: float = 0.0
    ref_sq: float = 0.0
    over: int = 0
    first_over: int = -1  # flat index of the first value beyond the tolerance (-1: none)


def _compare_values(c: torch.Tensor, r: torch.Tensor, tol: Tolerance) -> _ValueStats:
    """Elementwise and relative-L2 statistics over flat tensors, a chunk at a time.

    Why chunks: a 6 GB output compared in one go would need two float64 copies (24 GB) and the
    difference besides; chunk by chunk the comparison needs a few hundred MB whatever the size.
    """
    st = _ValueStats()
    for lo in range(0, r.numel(), CHUNK):
        c64, r64 = c[lo:lo + CHUNK].double(), r[lo:lo + CHUNK].double()
        c_fin, r_fin = torch.isfinite(c64), torch.isfinite(r64)
        if not torch.equal(c_fin, r_fin):
            st.finite_mismatch += int((c_fin != r_fin).sum().item())
            continue
        if (~r_fin).any() and not torch.equal(c64[~c_fin].nan_to_num(0.0), r64[~r_fin].nan_to_num(0.0)):
            st.nonfinite_differ = True
        cf, rf = (c64, r64) if bool(r_fin.all()) else (c64[r_fin], r64[r_fin])
        diff = (cf - rf).abs()
        if diff.numel():
            st.max_abs = max(st.max_abs, float(diff.max().item()))
        st.diff_sq += float(diff.square().sum().item())
        st.ref_sq += float(rf.square().sum().item())
        bad = diff > (tol.atol + tol.rtol * rf.abs())
        st.over += int(bad.sum().item())
        if st.first_over < 0 and st.over and bool(r_fin.all()):
            st.first_over = lo + int(bad.nonzero()[0, 0].item())
        del c64, r64, cf, rf, diff
    return st


NAN_HINT = ("; PyTorch passes a NaN on (a maximum, minimum, ReLU or clamp of NaN is NaN): fmaxf, std::max and "
            "`a > b ? a : b` drop it, `(a > b) | (a != a) ? a : b` keeps it")


def with_nans(inputs: list, seed: int, share: int = 2048, most: int = 4096) -> tuple[list, int]:
    """``inputs`` (changed in place) with NaN at a few places of every floating-point tensor (one value in
    ``share``, at least 4, at most ``most`` per tensor; places drawn from ``seed``), and how many were placed.
    A model's activations hold NaN after an overflow; PyTorch hands it on, and a kernel put in its place must
    too, or the patched model hides the fault. Integer and boolean inputs (indices, masks) stay as they are."""
    gen = torch.Generator().manual_seed(seed)
    out, placed = [], 0
    for x in inputs:
        if torch.is_tensor(x) and x.is_floating_point() and x.numel():
            n = min(x.numel(), most, max(4, x.numel() // share))
            where = torch.randint(0, x.numel(), (n,), generator=gen).to(x.device)
            if x.is_contiguous():  # in place: the trial's inputs are fresh, and a second copy of a big one costs
                x.view(-1)[where] = float("nan")
            else:  # a view or an expanded tensor: a new one, NaN where the places fall
                mask = torch.zeros(x.numel(), dtype=torch.bool, device=x.device)
                mask[where] = True
                x = x.masked_fill(mask.view(x.shape), float("nan"))
            placed += int(torch.unique(where).numel())
        out.append(x)
    return out, placed


def same_inputs(before: list, after: list) -> str | None:
    """The candidate must leave its inputs untouched; the first one it changed, or None."""
    for i, (b, a) in enumerate(zip(before, after)):
        if isinstance(b, torch.Tensor) and isinstance(a, torch.Tensor):
            if b.shape != a.shape or not torch.equal(b.nan_to_num(1.2345), a.nan_to_num(1.2345)):
                return f"input {i}"
    return None


_PERTURB = 0x80  # glibc fills each allocation with this byte's complement, 0x7F: 3.4e38 as float32
_FILL_BYTES = (0xFF ^ _PERTURB, 0xFF)  # what an unwritten output holds: on the CPU, on a GPU (NaN)


def poison_allocator(nbytes_list: list[int], device: str) -> None:
    """Hand the next CUDA allocations memory full of NaN bytes, so unwritten outputs cannot pass.

    On a CPU a freed block is not what the next allocation gets (large ones come fresh from the
    kernel, zeroed), so there the poison is ``poisoned_cpu_allocations`` instead.
    """
    if not str(device).startswith("cuda"):
        return
    blocks = []
    for n in nbytes_list:
        if n <= 0:
            continue
        blocks.append(torch.full((n,), 0xFF, dtype=torch.uint8, device=device))
    del blocks


@contextlib.contextmanager
def poisoned_cpu_allocations():
    """While inside, every CPU allocation comes filled with 0x7F bytes (3.4e38 as float32, NaN as
    float16), so an output the kernel never wrote is garbage the comparison catches, not zeros.

    glibc's ``M_PERTURB`` does this for every block, small or large; it is switched off again
    afterwards because filling every allocation would slow the timed runs.
    """
    libc = _libc()
    if libc is None:
        yield
        return
    libc.mallopt(_M_PERTURB, _PERTURB)
    try:
        yield
    finally:
        libc.mallopt(_M_PERTURB, 0)


_M_PERTURB = -6


@functools.lru_cache(maxsize=1)
def _libc():
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name or not sys.platform.startswith("linux"):
        return None
    try:
        lib = ctypes.CDLL(name)
        return lib if hasattr(lib, "mallopt") else None
    except OSError:
        return None
