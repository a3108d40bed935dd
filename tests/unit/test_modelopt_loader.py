"""Model files: both styles load; every way a file can be unusable gets one clear sentence."""

from __future__ import annotations

import textwrap

import pytest
import torch

from kforge_desktop.modelopt.loader import ModelFileError, is_model_file, load_model_file
from kforge_desktop.paths import RESOURCES


def _write(tmp_path, text: str, name: str = "m.py"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_example_models_load_in_eval_mode():
    for name in ("vision_net", "diffusion_block", "llm_block"):
        mf = load_model_file(RESOURCES / "examples" / f"{name}.py")
        assert isinstance(mf.model, torch.nn.Module) and not mf.model.training
        assert all(isinstance(x, torch.Tensor) for x in mf.inputs)
        fresh = mf.make_inputs()
        assert [x.shape for x in fresh] == [x.shape for x in mf.inputs]


def test_kernelbench_trio_is_a_model_file_too(tmp_path):
    p = RESOURCES / "problems" / "rms_norm.py"
    mf = load_model_file(p)
    assert mf.style == "kernelbench"
    assert not is_model_file(p)  # `kforge optimize` treats it as a single problem
    assert is_model_file(RESOURCES / "examples" / "llm_block.py")


@pytest.mark.parametrize("text, words", [
    ("import torch\ndef get_inputs():\n    return [torch.ones(2)]\n", ["no get_model()"]),
    ("import torch.nn as nn\ndef get_model():\n    return nn.ReLU()\n", ["get_inputs()"]),
    ("def get_model(:\n", ["syntax error", "line 1"]),
    ("import torch\ndef get_model():\n    raise ValueError('no weights here')\n"
     "def get_inputs():\n    return [torch.ones(2)]\n", ["get_model()", "ValueError", "no weights here"]),
    ("import torch\ndef get_model():\n    return 3\ndef get_inputs():\n    return [torch.ones(2)]\n",
     ["get_model()", "int", "not an nn.Module"]),
    ("import torch.nn as nn\ndef get_model():\n    return nn.ReLU()\ndef get_inputs():\n    return 'x'\n",
     ["get_inputs()", "list"]),
    ("import torch, torch.nn as nn\ndef get_model():\n    return nn.Linear(3, 4)\n"
     "def get_inputs():\n    return [torch.ones(2, 5)]\n", ["raised RuntimeError on the inputs of get_inputs()"]),
    ("import nonexistent_module_xyz\ndef get_model():\n    pass\ndef get_inputs():\n    pass\n",
     ["raised ModuleNotFoundError when imported"]),
])
def test_bad_model_files_say_what_is_wrong(tmp_path, text, words):
    p = _write(tmp_path, text)
    with pytest.raises(ModelFileError) as info:
        load_model_file(p)
    msg = str(info.value)
    assert "\n" not in msg and str(p) in msg
    for w in words:
        assert w in msg


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(ModelFileError, match="does not exist"):
        load_model_file(tmp_path / "nope.py")
    with pytest.raises(ModelFileError, match="is a folder"):
        load_model_file(tmp_path)
