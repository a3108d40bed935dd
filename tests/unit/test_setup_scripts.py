"""The set-up script a new user (and CI) runs first: it says what is wrong before pip fails half-way."""
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bootstrap_on_a_full_disk_says_so_and_installs_nothing(tmp_path):
    # a checkout whose venv exists but has nothing of ours installed yet (no stamp)
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "bootstrap.sh", tmp_path / "scripts" / "bootstrap.sh")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    # its python notes every call in a file and has no torch, so the script would install torch first
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    python = tmp_path / ".venv" / "bin" / "python"
    python.write_text(f'#!/bin/sh\necho "$@" >> "{tmp_path}/calls"\nexit 1\n')
    python.chmod(0o755)
    # more free space than any disk has: the check must stop the install before pip runs
    env = {**os.environ, "KFORGE_MIN_FREE_MB": str(10**12)}
    run = subprocess.run(["bash", str(tmp_path / "scripts" / "bootstrap.sh")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "not enough disk space to install" in run.stderr
    assert "MB free" in run.stderr and "Nothing was installed" in run.stderr
    assert "-m pip" not in (tmp_path / "calls").read_text()  # pip never started
    assert not (tmp_path / ".venv" / ".kforge-installed").exists()

