"""How the lowering indexes a tensor against its rows (``lowering.py``): the primary input's layout, what kind of
value (one per element, per row, per column, or one) a tensor of some shape is there, and the flat index of its
element (r, c), a broadcast input's included."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .lowering_trace import Unsupported


@dataclass
class Rows:
    """The primary input as rows reduced along one dimension ``dim`` (the last by default): ``rows``
    positions, each combining ``cols`` values. Along the last dimension those are the scaffold's ``rows``
    and ``cols``; along a middle one (a mean over dim 1 of [8, 32, 64]) row r is (o, i) with o the index
    before the dimension and i the index after it (r = o * linner + i), and the constants ``louter``,
    ``lcols`` and ``linner`` are written into the kernel: the loops run over o and i."""

    shape: tuple[int, ...]
    dim: int = -1
    rows: int = field(init=False)
    cols: int = field(init=False)
    inner: int = field(init=False)

    def __post_init__(self) -> None:
        k = self.dim % len(self.shape) if self.shape else 0
        self.dim = k
        self.cols = self.shape[k] if self.shape else 1
        self.inner = math.prod(self.shape[k + 1:]) if self.shape else 1
        self.rows = math.prod(self.shape) // max(self.cols, 1) if self.shape else 1

    @property
    def last(self) -> bool:
        return self.inner == 1 and (not self.shape or self.dim == len(self.shape) - 1)

    @property
    def cols_name(self) -> str:
        return "cols" if self.last else "lcols"

    def constants(self) -> str:
        return "" if self.last else (f"constexpr int64_t louter = {self.rows // max(self.inner, 1)}, lcols = "
                                     f"{self.cols}, linner = {self.inner};  // the values before dim {self.dim}, "
                                     "along it, after it\n")

    def index(self, kind: str) -> str:
        if kind == "full":
            return "r * cols + c" if self.last else "(o * lcols + c) * linner + i"
        return {"row": "r", "col": "c", "scalar": "0"}[kind]

    def broadcast_index(self, shape: tuple[int, ...]) -> tuple[str, str] | None:
        """(kind, index) of a contiguous tensor of ``shape`` that broadcasts against the rows along the last
        dimension with sizes of 1 between others (a key-padding mask ``keep[:, None, :]``, [8, 1, 128], against
        scores [8, 128, 128]): the flat index of element (r, c), r's coordinates taken apart with the sizes of
        the primary input. "full" when it has the columns, "row" when its last size is 1; None otherwise."""
        p = self.shape
        if not self.last or not p or len(shape) > len(p):
            return None
        v = (1,) * (len(p) - len(shape)) + tuple(shape)
        if any(a not in (1, b) for a, b in zip(v, p)) or v[-1] not in (1, p[-1]):
            return None
        terms, stride = [], 1
        for d in range(len(p) - 1, -1, -1):
            if v[d] != 1:
                if d == len(p) - 1:
                    terms.append("c")
                else:
                    after = math.prod(p[d + 1:-1])
                    coord = "r" if after == 1 else f"r / {after}"
                    coord = coord if d == 0 else f"({coord}) % {p[d]}"
                    terms.append(coord if stride == 1 else f"{coord} * {stride}")
            stride *= v[d]
        return ("full" if v[-1] != 1 else "row"), " + ".join(reversed(terms)) or "0"

    def kinds(self, shape: tuple[int, ...], broadcast: bool = False) -> set[str]:
        """What a tensor of this shape can be: full (one value per element), row (one per row: the last
        dimension kept as 1, or dropped), col (one per column, the same in every row: right-aligned as
        broadcasting aligns it) or scalar. A shape that is none of these cannot be indexed by (r, c), except,
        with ``broadcast``, as what an elementwise result of a broadcast input is (``broadcast_index``)."""
        shape, p, k = tuple(shape), self.shape, self.dim
        found = set()
        if math.prod(shape) == 1:
            found.add("scalar")
        if shape == p:
            found.add("full")
        if self.last and shape and len(shape) <= len(p) and shape[-1] == self.cols and all(d == 1 for d in shape[:-1]):
            found.add("col")
        if shape == p[:k] + (1,) + p[k + 1:] or shape == p[:k] + p[k + 1:]:
            found.add("row")
        if not found and broadcast and (bi := self.broadcast_index(shape)):
            found.add(bi[0])
        if not found:
            raise Unsupported(f"a tensor of shape {list(shape)} against rows of {list(p)}")
        return found

    def kind(self, shape: tuple[int, ...], prefer: str | None = None) -> str:
        """The one kind of this shape; where it could be two (a square layout), ``prefer``, else what
        broadcasting makes of it (a vector of the last dimension's length is a column)."""
        found = self.kinds(shape)
        if len(found) == 1:
            return found.pop()
        for k in (prefer, "scalar", "full", "col", "row"):
            if k in found:
                return k
        raise Unsupported("an ambiguous shape")
