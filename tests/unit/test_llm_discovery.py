"""Finding models and choosing the one to run; ``kforge models list`` as a user runs it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from test_llm_gguf import TINY_META, make_gguf

from kforge_desktop.llm.default_model import VARIANTS, is_verified
from kforge_desktop.llm.discovery import ModelNotFound, discover, resolve_model

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def dirs(tmp_path, monkeypatch):
    models, data = tmp_path / "models", tmp_path / "data"
    models.mkdir()
    (data / "models").mkdir(parents=True)
    monkeypatch.setenv("KFORGE_MODELS_DIR", str(models))
    monkeypatch.setenv("KFORGE_DATA_DIR", str(data))
    monkeypatch.delenv("KFORGE_MODEL", raising=False)
    return models, data / "models"


def _gguf(path: Path, name: str = "Tiny Test Model") -> Path:
    path.write_bytes(make_gguf({**TINY_META, "general.name": name}))
    return path


def test_finds_models_in_both_folders_and_env(dirs, tmp_path, monkeypatch):
    models, user = dirs
    _gguf(models / "a.gguf", "Model A")
    _gguf(user / "b.gguf", "Model B")
    elsewhere = _gguf(tmp_path / "c.gguf", "Model C")
    monkeypatch.setenv("KFORGE_MODEL", str(elsewhere))
    entries, problems = discover()
    assert problems == []
    assert {e.name: e.source for e in entries} == {"Model A": "models dir", "Model B": "user data",
                                                   "Model C": "KFORGE_MODEL"}
    assert all(e.ok and e.info.quantization == "Q4_K_M" and e.info.architecture == "llama" for e in entries)


def test_broken_files_are_listed_with_their_problem(dirs):
    models, _ = dirs
    (models / "broken.gguf").write_bytes(b"not a model at all")
    (models / VARIANTS["0.5b"].filename).write_bytes(make_gguf(TINY_META))  # right name, wrong size
    entries, _ = discover()
    by_name = {e.path.name: e for e in entries}
    assert "not a GGUF model file" in by_name["broken.gguf"].problem
    assert "fetch-default" in by_name[VARIANTS["0.5b"].filename].problem


def test_a_default_model_with_the_right_size_but_wrong_bytes_is_corrupt(dirs, monkeypatch):
    models, _ = dirs
    good = make_gguf(TINY_META)
    v = replace(VARIANTS["0.5b"], size=len(good), sha256=hashlib.sha256(good).hexdigest())
    monkeypatch.setitem(VARIANTS, "0.5b", v)
    path = models / v.filename
    path.write_bytes(good[:-1] + b"\x01")  # one byte differs
    entry = next(e for e in discover()[0] if e.path == path)
    assert "corrupt" in entry.problem and "SHA-256" in entry.problem
    with pytest.raises(ModelNotFound, match="corrupt"):
        resolve_model()
    path.write_bytes(good)
    assert next(e for e in discover()[0] if e.path == path).ok
    assert resolve_model() == path
    assert is_verified(path, v)  # checked once, stamped: later checks do not hash again


def test_resolve_prefers_explicit_then_env_then_default(dirs, tmp_path, monkeypatch):
    models, _ = dirs
    other = _gguf(models / "other.gguf")
    assert resolve_model() == other  # the only usable one
    explicit = _gguf(tmp_path / "mine.gguf")
    env = _gguf(tmp_path / "env.gguf")
    monkeypatch.setenv("KFORGE_MODEL", str(env))
    assert resolve_model() == env
    assert resolve_model(explicit) == explicit


def test_resolve_without_models_tells_what_to_do(dirs):
    with pytest.raises(ModelNotFound) as err:
        resolve_model()
    msg = str(err.value)
    assert "kforge models fetch-default" in msg and "--llm" in msg


def test_resolve_a_bad_explicit_path_is_one_sentence(dirs, tmp_path):
    with pytest.raises(ModelNotFound, match="does not exist"):
        resolve_model(tmp_path / "typo.gguf")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"\0" * 100)
    with pytest.raises(ModelNotFound, match="not a GGUF"):
        resolve_model(bad)


def test_a_models_dir_that_is_a_file_is_reported(tmp_path, monkeypatch):
    blocker = tmp_path / "models"
    blocker.write_text("oops")
    monkeypatch.setenv("KFORGE_MODELS_DIR", str(blocker))
    monkeypatch.setenv("KFORGE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("KFORGE_MODEL", raising=False)
    _, problems = discover()
    assert problems and "is not a directory" in problems[0]
    with pytest.raises(ModelNotFound, match="is not a directory"):
        resolve_model()


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads any folder")
def test_an_unreadable_models_dir_is_reported(dirs):
    models, _ = dirs
    models.chmod(0)
    try:
        _, problems = discover()
        assert problems and "cannot be read" in problems[0]
    finally:
        models.chmod(0o755)


def _kforge(*args: str, **env: str) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != "KFORGE_MODEL"}
    full_env.update(env)
    return subprocess.run([sys.executable, "-m", "kforge_desktop.cli.main", *args], capture_output=True,
                          text=True, cwd=REPO, env=full_env, timeout=120)


def test_cli_list_shows_the_real_model(test_model_path, tmp_path):
    r = _kforge("models", "list", "--llm", str(test_model_path), KFORGE_MODELS_DIR=str(tmp_path),
                KFORGE_DATA_DIR=str(tmp_path / "d"))
    assert r.returncode == 0, r.stderr
    assert "Q4_K_M" in r.stdout and "qwen2" in r.stdout and str(test_model_path) in r.stdout


def test_cli_list_json_and_broken_files(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    _gguf(models / "good.gguf", "Good One")
    (models / "trunc.gguf").write_bytes(make_gguf(TINY_META)[:40])
    r = _kforge("models", "list", "--json", KFORGE_MODELS_DIR=str(models), KFORGE_DATA_DIR=str(tmp_path / "d"))
    assert r.returncode == 1, r.stderr  # listed, but a broken file is something to act on
    rows = {Path(m["path"]).name: m for m in json.loads(r.stdout)["models"]}
    assert rows["good.gguf"]["name"] == "Good One" and rows["good.gguf"]["quantization"] == "Q4_K_M"
    assert "truncated" in rows["trunc.gguf"]["problem"]
    text = _kforge("models", "list", KFORGE_MODELS_DIR=str(models), KFORGE_DATA_DIR=str(tmp_path / "d"))
    assert text.returncode == 1 and "[unusable]" in text.stdout and "Good One" in text.stdout
    assert text.stderr.strip().startswith("kforge:") and "truncated" in text.stderr
    assert "Traceback" not in text.stderr


def test_cli_list_with_a_bad_llm_path_fails_with_one_sentence(tmp_path):
    r = _kforge("models", "list", "--llm", str(tmp_path / "missing.gguf"),
                KFORGE_MODELS_DIR=str(tmp_path), KFORGE_DATA_DIR=str(tmp_path / "d"))
    assert r.returncode != 0
    assert r.stderr.strip().startswith("kforge:") and "does not exist" in r.stderr
    assert "Traceback" not in r.stderr


def test_cli_list_with_no_models_says_how_to_get_one(tmp_path):
    r = _kforge("models", "list", KFORGE_MODELS_DIR=str(tmp_path / "empty"), KFORGE_DATA_DIR=str(tmp_path / "d"))
    assert r.returncode == 0
    assert "No GGUF models found" in r.stdout and "fetch-default" in r.stdout
