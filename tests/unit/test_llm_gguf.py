"""GGUF header reading: the real small model, hand-built files, and every kind of bad file."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import pytest

from kforge_desktop.llm.default_model import VARIANTS
from kforge_desktop.llm.gguf import GGUFError, read_header, sha256_file, verify_file


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def make_gguf(metadata: dict[str, object], tensors: int = 1, version: int = 3, tail: bytes = b"\0" * 64) -> bytes:
    """A minimal GGUF: header, metadata and a fake tensor table (enough for the header reader)."""
    out = b"GGUF" + struct.pack("<IQQ", version, tensors, len(metadata))
    for key, value in metadata.items():
        out += _s(key)
        if isinstance(value, bool):
            out += struct.pack("<I?", 7, value)
        elif isinstance(value, int):
            out += struct.pack("<II", 4, value)
        elif isinstance(value, float):
            out += struct.pack("<If", 6, value)
        elif isinstance(value, str):
            out += struct.pack("<I", 8) + _s(value)
        elif isinstance(value, list):  # list of strings
            out += struct.pack("<IIQ", 9, 8, len(value)) + b"".join(_s(v) for v in value)
        else:
            raise TypeError(value)
    for i in range(tensors):
        out += _s(f"t{i}") + struct.pack("<I", 1) + struct.pack("<Q", 4) + struct.pack("<IQ", 0, 0)
    return out + tail


TINY_META = {
    "general.architecture": "llama",
    "general.name": "Tiny Test Model",
    "general.file_type": 15,
    "llama.context_length": 4096,
    "tokenizer.ggml.tokens": ["a", "b", "c"],
    "tokenizer.chat_template": "{{ messages }}",
}


def test_reads_a_handmade_header(tmp_path):
    p = tmp_path / "tiny.gguf"
    p.write_bytes(make_gguf(TINY_META, tensors=2))
    info = read_header(p)
    assert (info.name, info.architecture, info.quantization) == ("Tiny Test Model", "llama", "Q4_K_M")
    assert info.context_length == 4096
    assert info.has_chat_template
    assert info.tensor_count == 2
    assert info.metadata["tokenizer.ggml.tokens"].length == 3


def test_name_and_quantization_fall_back_to_the_file_name(tmp_path):
    p = tmp_path / "mystery-Q8_0.gguf"
    p.write_bytes(make_gguf({"general.architecture": "qwen2"}))
    info = read_header(p)
    assert info.name == "mystery-Q8_0"
    assert info.quantization == "Q8_0"
    assert info.chat_template is None


def test_reads_the_real_small_model(test_model_path):
    info = read_header(test_model_path)
    assert info.architecture == "qwen2"
    assert info.quantization == "Q4_K_M"
    assert info.has_chat_template and "<|im_start|>" in info.chat_template
    assert info.context_length == 32768
    assert info.tensor_count > 100
    assert info.header_bytes < info.size / 10
    assert info.data_end <= info.size


def test_the_header_is_read_without_the_tensor_data(tmp_path, test_model_path):
    """The real model's header followed by garbage and then a hole where the tensors were: the
    reader gives the same answer, so it never reads a byte of tensor data."""
    real = read_header(test_model_path)
    hollow = tmp_path / test_model_path.name
    with open(test_model_path, "rb") as src, open(hollow, "wb") as out:
        out.write(src.read(real.header_bytes))
        out.write(b"\xff" * 1_000_000)  # garbage where the tensor data begins
        out.truncate(real.size)  # the rest is a sparse hole: zeros, no model bytes on disk
    info = read_header(hollow)
    assert info.metadata == real.metadata
    assert (info.tensor_count, info.header_bytes, info.data_end, info.size) == (
        real.tensor_count, real.header_bytes, real.data_end, real.size)


def test_the_real_model_names_itself_as_pinned(test_model_path):
    v = next(v for v in VARIANTS.values() if v.filename == test_model_path.name)
    assert read_header(test_model_path).name == v.header_name


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "empty"),
        (b"GG", "too short"),
        (b"PK\x03\x04" + b"\0" * 100, "not a GGUF model file"),
        (b"GGUF" + struct.pack("<I", 99) + b"\0" * 40, "version 99"),
    ],
    ids=["empty", "tiny", "zip-not-gguf", "future-version"],
)
def test_bad_files_give_one_sentence(tmp_path, content, expected):
    p = tmp_path / "bad.gguf"
    p.write_bytes(content)
    with pytest.raises(GGUFError) as err:
        read_header(p)
    msg = str(err.value)
    assert expected in msg and str(p) in msg
    assert "\n" not in msg


def test_truncated_header_is_named_as_truncated(tmp_path):
    whole = make_gguf(TINY_META)
    for cut in (10, 30, len(whole) // 2):
        p = tmp_path / f"cut{cut}.gguf"
        p.write_bytes(whole[:cut])
        with pytest.raises(GGUFError, match="truncated"):
            read_header(p)


def test_truncated_real_model_is_named_as_truncated(tmp_path, test_model_path):
    p = tmp_path / test_model_path.name
    with open(test_model_path, "rb") as src:
        p.write_bytes(src.read(1_000_000))  # the header alone is ~6 MB: cut inside the vocabulary
    with pytest.raises(GGUFError, match="truncated"):
        read_header(p)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(GGUFError, match="does not exist"):
        read_header(tmp_path / "nope.gguf")
    with pytest.raises(GGUFError, match="is a directory"):
        read_header(tmp_path)


def test_garbage_counts_fail_fast(tmp_path):
    p = tmp_path / "garbage.gguf"
    p.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 2**40, 2**40) + b"\xff" * 64)
    # refused on the counts before any entry is walked (walking would end in "truncated" instead)
    with pytest.raises(GGUFError, match="implausible counts"):
        read_header(p)


def test_verify_file_checks_size_then_hash(tmp_path):
    p = tmp_path / "m.gguf"
    p.write_bytes(b"x" * 1000)
    good = hashlib.sha256(b"x" * 1000).hexdigest()
    verify_file(p, 1000, good)
    assert sha256_file(p) == good
    with pytest.raises(GGUFError, match="wrong size"):
        verify_file(p, 999, good)
    with pytest.raises(GGUFError, match="SHA-256"):
        verify_file(p, 1000, "0" * 64)


def test_files_written_here_are_paths(tmp_path):
    # str and Path both work
    p = tmp_path / "tiny.gguf"
    p.write_bytes(make_gguf(TINY_META))
    assert read_header(str(p)).path == Path(p)
