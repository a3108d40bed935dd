"""Shared fixtures and markers.

- ``gpu``: needs a CUDA device; skipped with a reason where torch sees none.
- ``llm``: drives a real GGUF through llama.cpp. The test command fetches the small model first
  (scripts/test.sh); on CI a missing model is a failure, not a skip.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# the kernel memory (search/memory.py) of a test run is its own: a developer's remembered kernels
# would change which exemplar retrieval picks
os.environ["KFORGE_MEMORY_DIR"] = tempfile.mkdtemp(prefix="kforge-test-memory-")

REPO = Path(__file__).resolve().parent.parent


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run scripts/gpu_tests.sh on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def test_model_path() -> Path:
    """The GGUF the llm tests run on: $KFORGE_TEST_MODEL, else the small default (0.5B)."""
    from kforge_desktop.llm.default_model import VARIANTS, installed_path

    env = os.environ.get("KFORGE_TEST_MODEL")
    path = Path(env) if env else installed_path(VARIANTS["0.5b"])
    if path is None or not Path(path).exists():
        msg = "the test model is missing: run `kforge models fetch-default --variant 0.5b` (scripts/test.sh does)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return Path(path)


@pytest.fixture(autouse=True)
def own_kernel_memory(tmp_path_factory, monkeypatch) -> Path:
    """Each test's kernel memory is its own: a search in one test that verifies a kernel remembers
    it, and a later test's retrieval would then pick that kernel over our exemplars (seen on CI:
    a softmax kernel remembered at 1.20x became the seed of five later tests). Module-scoped
    fixtures still share the run's memory above."""
    d = tmp_path_factory.mktemp("memory")
    monkeypatch.setenv("KFORGE_MEMORY_DIR", str(d))
    return d


@pytest.fixture()
def build_cache(tmp_path, monkeypatch) -> Path:
    """A private kernel build cache, so a test's builds are its own."""
    d = tmp_path / "builds"
    monkeypatch.setenv("KFORGE_BUILD_CACHE", str(d))
    return d
