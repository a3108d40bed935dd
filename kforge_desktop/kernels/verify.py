"""Comparing a candidate's outputs with the reference's: shape, dtype, NaN/Inf, values, rel. L2.

Tolerances are by dtype, and the relative-L2 bound is what makes a precision downgrade visible: an
fp32 problem solved in fp16 or bf16 arithmetic stays within a loose elementwise tolerance but its
relative L2 error is 10-100x above what fp32 reordering produces.
"""

from __future__ import annotations

import math
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
        c64, r64 = c.detach().double(), r.detach().double()
        c_fin, r_fin = torch.isfinite(c64), torch.isfinite(r64)
        if not torch.equal(c_fin, r_fin):
            n = int((c_fin != r_fin).sum().item())
            return Comparison(False, f"{which}{n} NaN/Inf values where the reference has finite ones "
                                     "(or the other way round)", math.inf, math.inf)
        if not torch.equal(c64[~c_fin].nan_to_num(0.0), r64[~r_fin].nan_to_num(0.0)) and (~r_fin).any():
            return Comparison(False, f"{which}non-finite values differ from the reference", math.inf, math.inf)
        cf, rf = c64[r_fin], r64[r_fin]
        diff = (cf - rf).abs()
        max_abs = float(diff.max().item()) if diff.numel() else 0.0
        denom = float(rf.norm().item())
        rel_l2 = float((cf - rf).norm().item() / denom) if denom > 0 else float(diff.norm().item())
        worst_abs, worst_l2 = max(worst_abs, max_abs), max(worst_l2, rel_l2)
        tol = tolerance_for(r.dtype, override)
        over = diff > (tol.atol + tol.rtol * rf.abs())
        if over.any():
            n = int(over.sum().item())
            return Comparison(False, f"{which}{n} of {r.numel()} values differ beyond atol={tol.atol:g}, "
                                     f"rtol={tol.rtol:g} (max abs err {max_abs:.3g})", worst_abs, worst_l2)
        if rel_l2 > tol.rel_l2:
            return Comparison(False, f"{which}relative L2 error {rel_l2:.2e} exceeds {tol.rel_l2:.0e} for "
                                     f"{str(r.dtype).replace('torch.', '')} (reduced precision?)", worst_abs, worst_l2)
    return Comparison(True, "", worst_abs, worst_l2)


def same_inputs(before: list, after: list) -> str | None:
    """The candidate must leave its inputs untouched; the first one it changed, or None."""
    for i, (b, a) in enumerate(zip(before, after)):
        if isinstance(b, torch.Tensor) and isinstance(a, torch.Tensor):
            if b.shape != a.shape or not torch.equal(b.nan_to_num(1.2345), a.nan_to_num(1.2345)):
                return f"input {i}"
    return None


def poison_allocator(nbytes_list: list[int], device: str) -> None:
    """Hand the next allocations memory full of NaN bytes, so unwritten outputs cannot pass."""
    blocks = []
    for n in nbytes_list:
        if n <= 0:
            continue
        blocks.append(torch.full((n,), 0xFF, dtype=torch.uint8, device=device))
    del blocks
