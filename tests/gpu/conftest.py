"""Shared by the GPU tests: one CUDA evaluator (two workers) per test module."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def evaluator():
    from kforge_desktop.kernels.evaluator import Evaluator

    with Evaluator(device="cuda", workers=2) as ev:
        yield ev
