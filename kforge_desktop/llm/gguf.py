"""Read a GGUF file's header with the standard library alone.

Why: llama.cpp may abort the whole process when handed a corrupt file, and listing models should
not load gigabytes of weights. The header (magic, version, metadata) sits at the start of the file;
we memory-map the file and walk only the metadata, so a 1 GB model is described in milliseconds and
the tensor data is never touched.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = b"GGUF"

# llama.cpp's `llama_ftype` (general.file_type) -> the quantization name users know
FILE_TYPES: dict[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
    23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M",
    30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE",
}

# GGUF metadata value types: id -> (struct format, size) for the fixed-size ones
_SCALARS: dict[int, tuple[str, int]] = {
    0: ("<B", 1), 1: ("<b", 1), 2: ("<H", 2), 3: ("<h", 2), 4: ("<I", 4), 5: ("<i", 4),
    6: ("<f", 4), 7: ("<?", 1), 10: ("<Q", 8), 11: ("<q", 8), 12: ("<d", 8),
}
_STRING, _ARRAY = 8, 9

# ggml tensor types: id -> (elements per block, bytes per block), for the file-size check
_GGML_TYPES: dict[int, tuple[int, int]] = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 36),
    10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
    16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110),
    22: (256, 82), 23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8),
    29: (256, 56), 30: (1, 2), 34: (256, 54), 35: (256, 66), 39: (32, 17),
}
_MAX_KV = 1_000_000  # sanity bounds so garbage counts fail fast instead of looping for hours
_MAX_STR = 1 << 30


class GGUFError(Exception):
    """A model file we cannot use; the message is one sentence a user can act on."""


@dataclass(frozen=True)
class ArrayInfo:
    """A metadata array we skipped over (token lists are ~150k entries): its element type and length."""

    type_id: int
    length: int


@dataclass(frozen=True)
class GGUFInfo:
    """What the header says about a model; ``metadata`` holds every scalar and string key."""

    path: Path
    size: int
    version: int
    tensor_count: int
    metadata: dict[str, object] = field(repr=False)
    header_bytes: int = 0  # metadata and tensor table: everything before the tensor data
    data_end: int = 0  # where the last tensor's data ends; a complete file is at least this long

    @property
    def name(self) -> str:
        value = self.metadata.get("general.name")
        return str(value) if value else self.path.stem

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture") or "unknown")

    @property
    def file_type(self) -> int | None:
        value = self.metadata.get("general.file_type")
        return int(value) if isinstance(value, int) else None

    @property
    def quantization(self) -> str:
        ft = self.file_type
        if ft is not None:
            return FILE_TYPES.get(ft, f"type {ft}")
        return _quant_from_filename(self.path.name) or "unknown"

    @property
    def context_length(self) -> int | None:
        value = self.metadata.get(f"{self.architecture}.context_length")
        return int(value) if isinstance(value, int) else None

    @property
    def chat_template(self) -> str | None:
        value = self.metadata.get("tokenizer.chat_template")
        return value if isinstance(value, str) and value.strip() else None

    @property
    def has_chat_template(self) -> bool:
        return self.chat_template is not None


def _quant_from_filename(name: str) -> str | None:
    upper = name.upper()
    for quant in sorted(FILE_TYPES.values(), key=len, reverse=True):
        if quant in upper:
            return quant
    return None


class _Cursor:
    """Bounds-checked little-endian reads over a memory map; running off the end means truncation."""

    def __init__(self, buf: mmap.mmap | bytes, path: Path) -> None:
        self.buf = buf
        self.pos = 0
        self.end = len(buf)
        self.path = path

    def _need(self, n: int) -> None:
        if n < 0 or self.pos + n > self.end:
            raise GGUFError(f"{self.path} is truncated: its GGUF header ends early (the download may be incomplete).")

    def scalar(self, fmt: str, size: int):
        self._need(size)
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return value

    def u32(self) -> int:
        return self.scalar("<I", 4)

    def u64(self) -> int:
        return self.scalar("<Q", 8)

    def skip(self, n: int) -> None:
        self._need(n)
        self.pos += n

    def string(self, len_size: int) -> str:
        n = self.u64() if len_size == 8 else self.u32()
        if n > _MAX_STR:
            raise GGUFError(f"{self.path} has a corrupt GGUF header (a string of {n} bytes).")
        self._need(n)
        raw = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return raw.decode("utf-8", errors="replace")

    def skip_string(self, len_size: int) -> None:
        n = self.u64() if len_size == 8 else self.u32()
        self.skip(n)


def _value(cur: _Cursor, type_id: int, len_size: int) -> object:
    if type_id in _SCALARS:
        return cur.scalar(*_SCALARS[type_id])
    if type_id == _STRING:
        return cur.string(len_size)
    if type_id == _ARRAY:
        item_type = cur.u32()
        count = cur.u64() if len_size == 8 else cur.u32()
        if item_type in _SCALARS:
            cur.skip(count * _SCALARS[item_type][1])
        elif item_type == _STRING:
            for _ in range(count):
                cur.skip_string(len_size)
        else:
            raise GGUFError(f"{cur.path} has a corrupt GGUF header (array of unknown type {item_type}).")
        return ArrayInfo(item_type, count)
    raise GGUFError(f"{cur.path} has a corrupt GGUF header (unknown value type {type_id}).")


def read_header(path: str | os.PathLike[str]) -> GGUFInfo:
    """Parse the GGUF header of ``path``; raise ``GGUFError`` (one sentence) if it is unusable."""
    p = Path(path)
    if p.is_dir():
        raise GGUFError(f"{p} is a directory, not a GGUF model file.")
    try:
        size = p.stat().st_size
        fh = open(p, "rb")  # noqa: SIM115 - closed below, after the map
    except FileNotFoundError:
        raise GGUFError(f"the model file {p} does not exist.") from None
    except PermissionError:
        raise GGUFError(f"the model file {p} cannot be read (permission denied).") from None
    except OSError as err:
        raise GGUFError(f"the model file {p} cannot be read ({err.strerror or err}).") from None
    with fh:
        if size < 4:
            raise GGUFError(f"{p} is not a GGUF model: the file is {'empty' if size == 0 else 'too short'}.")
        try:
            buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as err:
            raise GGUFError(f"the model file {p} cannot be read ({err}).") from None
        try:
            return _parse(buf, p, size)
        finally:
            buf.close()


def _parse(buf: mmap.mmap, p: Path, size: int) -> GGUFInfo:
    if buf[:4] != MAGIC:
        raise GGUFError(f"{p} is not a GGUF model file (it does not start with the GGUF signature).")
    cur = _Cursor(buf, p)
    cur.skip(4)
    version = cur.u32()
    if version not in (1, 2, 3):
        raise GGUFError(f"{p} has GGUF version {version}, which this app does not read (1-3 are supported).")
    len_size = 4 if version == 1 else 8
    tensor_count = cur.u32() if version == 1 else cur.u64()
    kv_count = cur.u32() if version == 1 else cur.u64()
    if kv_count > _MAX_KV or tensor_count > 10_000_000:
        raise GGUFError(f"{p} has a corrupt GGUF header (implausible counts).")
    metadata: dict[str, object] = {}
    for _ in range(kv_count):
        key = cur.string(len_size)
        type_id = cur.u32()
        metadata[key] = _value(cur, type_id, len_size)
    # the tensor table: names, shapes, types and offsets (a few hundred entries, no data read)
    max_end = 0
    for _ in range(tensor_count):
        cur.skip_string(len_size)
        n_dims = cur.u32()
        if n_dims > 8:
            raise GGUFError(f"{p} has a corrupt GGUF header (a tensor with {n_dims} dimensions).")
        n_elements = 1
        for _ in range(n_dims):
            n_elements *= cur.u64() if len_size == 8 else cur.u32()
        ggml_type = cur.u32()
        offset = cur.u64()
        block, block_bytes = _GGML_TYPES.get(ggml_type, (1, 0))
        max_end = max(max_end, offset + (n_elements // block) * block_bytes)
    alignment = metadata.get("general.alignment", 32)
    alignment = alignment if isinstance(alignment, int) and alignment > 0 else 32
    data_start = -(-cur.pos // alignment) * alignment
    data_end = data_start + max_end
    if data_end > size:
        raise GGUFError(f"{p} is truncated: its tensors need {data_end:,} bytes but the file has {size:,} "
                        "(the download may be incomplete).")
    return GGUFInfo(path=p, size=size, version=version, tensor_count=tensor_count, metadata=metadata,
                    header_bytes=cur.pos, data_end=data_end)


def sha256_file(path: str | os.PathLike[str], on_bytes: Callable[[int], None] | None = None,
                chunk: int = 8 << 20) -> str:
    """SHA-256 of a file in chunks (1 GB in a few seconds; memory stays flat)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
            if on_bytes:
                on_bytes(len(block))
    return h.hexdigest()


def verify_file(path: str | os.PathLike[str], size: int, sha256: str) -> None:
    """Raise ``GGUFError`` when ``path`` is not exactly the file we expect (size first: it is free)."""
    p = Path(path)
    actual = p.stat().st_size
    if actual != size:
        raise GGUFError(f"{p} has the wrong size ({actual:,} bytes, expected {size:,}): it is incomplete or "
                        "a different file; run `kforge models fetch-default` again.")
    digest = sha256_file(p)
    if digest != sha256:
        raise GGUFError(f"{p} is corrupt (its SHA-256 does not match the pinned one); "
                        "run `kforge models fetch-default` again.")
