"""`kforge profile` as a user runs it."""

from __future__ import annotations

import json

from kforge_desktop.cli.main import main as kforge
from kforge_desktop.paths import RESOURCES

EX = RESOURCES / "examples"


def test_profile_table_and_json(capsys, tmp_path):
    assert kforge(["profile", str(EX / "diffusion_block.py"), "--runs", "2"]) == 0
    out = capsys.readouterr().out
    assert "group_norm_silu" in out and "attention (bmm, mul, softmax, bmm)" in out and "vs floor" in out
    assert kforge(["profile", str(EX / "vision_net.py"), "--runs", "2", "--json", "--problems", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    names = [t["name"] for t in data["targets"]]
    assert any(n.endswith("batch_norm_relu") for n in names)
    for t in data["targets"]:
        assert t["problem_file"] and (tmp_path / f"{t['name']}.py").exists()
        assert t["headroom_floor"] > 0 and 0 < t["share"] <= 1
    assert data["rates"]["bandwidth"] and data["device"] == "cpu"


def test_profile_errors_are_one_sentence(capsys, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\ndef get_model():\n    return torch.nn.ReLU()\n")
    assert kforge(["profile", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "get_inputs()" in err and "Traceback" not in err and err.count("\n") == 1
    assert kforge(["profile", str(EX / "llm_block.py"), "--device", "tpu"]) == 2
    assert "Unknown device" in capsys.readouterr().err
