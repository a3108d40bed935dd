"""torch.compile's own generated code for a problem, as a seed node of a GPU search.

Why: on simple fusions torch.compile already sits within a few percent of the bandwidth floor. A
search that starts from its code starts no slower than torch.compile, and every LLM candidate is
measured against a kernel that good. The seed is TorchInductor's output code (its Triton kernels
and the ``call`` that launches them) wrapped in a ``ModelNew``: plain code in the tree, which the
user can read, edit and rerun, and which the model can be asked to improve.

The code is generated in a subprocess (``python -m kforge_desktop.search.inductor_seed``), never in
the app's process: compiling the user's model on the GPU may fail or hold memory, and the desktop
app stays responsive either way.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ..problem.problem import Problem, ProblemError
from ..problem.source import model_new_body, split_source

TIMEOUT_S = 600.0


class SeedError(Exception):
    """torch.compile's code could not be turned into a candidate; ``str(err)`` says why."""


def inductor_module(problem: Problem, device: str = "cuda", timeout: float = TIMEOUT_S) -> str:
    """The candidate module (``ModelNew``) made of torch.compile's generated code for ``problem``,
    generated in a subprocess. Raises SeedError with the reason."""
    with tempfile.TemporaryDirectory(prefix="kforge-inductor-") as tmp:
        src = Path(tmp) / "problem.py"
        src.write_text(problem.source)
        out = Path(tmp) / "seed.json"
        env = dict(os.environ)
        env["TORCHINDUCTOR_CACHE_DIR"] = str(Path(tmp) / "inductor")  # fresh: the code is generated, not loaded
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "kforge_desktop.search.inductor_seed", str(src), "--name", problem.name,
                 "--device", device, "--out", str(out)],
                capture_output=True, text=True, timeout=timeout, env=env,
            )
        except subprocess.TimeoutExpired:
            raise SeedError(f"torch.compile took longer than {timeout:.0f} s") from None
        if not out.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise SeedError(f"torch.compile's code could not be captured: {tail[0][:300]}")
        data = json.loads(out.read_text())
        if data.get("error"):
            raise SeedError(data["error"])
        return data["source"]


# -- the subprocess ----------------------------------------------------------------------------------


def _strip_benchmark(code: str) -> str:
    """Inductor's output code ends with a benchmark harness and a ``__main__`` block; a candidate
    needs neither."""
    for marker in ("\ndef benchmark_compiled_module", "\nif __name__ == \"__main__\":", "\nif __name__ == '__main__':"):
        i = code.find(marker)
        if i >= 0:
            code = code[:i]
    return code.rstrip() + "\n"


def _shapes(xs) -> list:
    return [tuple(x.shape) for x in xs if hasattr(x, "shape")]


def _several_shapes(mod, inputs: list) -> bool:
    """Whether the problem's captured inputs (``get_replay_inputs``) come in shapes other than
    ``get_inputs()``'s: a target the model calls at several sizes."""
    if not hasattr(mod, "get_replay_inputs"):
        return False
    first = _shapes(inputs)
    return any(_shapes(r) != first for r in mod.get_replay_inputs())


def _symbolic(value):
    """A graph input as symbols: a size's name (``"s0"``), a tensor's shape as names, else None."""
    if value is None:
        return None
    if hasattr(value, "shape"):
        return [str(d) for d in value.shape]
    return str(value)


def _size_expr(sym, inputs: list, symbols: list, owners: dict) -> str:
    """The expression giving a symbolic size input of the graph: ``x.shape[2]`` of the first tensor
    input whose dimension is that symbol."""
    import torch

    for t, shape in zip(inputs, symbols, strict=False):
        if isinstance(t, torch.Tensor) and isinstance(shape, list) and sym in shape:
            name = owners.get((t.data_ptr(), tuple(t.shape)))
            if name is not None:
                return f"{name}.shape[{shape.index(sym)}]"
    raise SeedError(f"torch.compile's graph takes a size ({sym}) that no input's shape gives")


def _generate(problem: Problem, device: str) -> str:
    import torch
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.utils import run_and_get_code

    mod = problem.load_module()
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).to(device).eval()
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
    params = [p.name for p in inspect.signature(mod.Model.forward).parameters.values() if p.name != "self"]
    if len(params) != len(inputs):
        raise SeedError("get_inputs() does not match the forward signature")
    seen: dict = {}

    def backend(gm, example_inputs):
        seen["inputs"] = list(example_inputs)
        # what each graph input is symbolically: "s0" for a size, ["s0", "64", ...] for a tensor
        seen["symbols"] = [_symbolic(n.meta.get("example_value")) for n in gm.graph.nodes if n.op == "placeholder"]
        return compile_fx(gm, example_inputs)

    # a target called at several shapes (its captured inputs) needs code for all of them: sizes stay
    # symbolic, and call() takes them from the inputs
    dynamic = _several_shapes(mod, inputs)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=backend, fullgraph=True, dynamic=dynamic or None)
    with torch.no_grad():
        out, codes = run_and_get_code(compiled, *inputs)
    if not codes or "inputs" not in seen:
        raise SeedError("torch.compile produced no code for this model")
    code = _strip_benchmark(codes[-1])
    if "def call(" not in code:
        raise SeedError("torch.compile's code has no call() entry point")

    # the order of call()'s arguments: the graph's inputs, each a forward input or a parameter/buffer
    owners = {}
    for dotted, t in list(model.named_parameters()) + list(model.named_buffers()):
        owners.setdefault((t.data_ptr(), tuple(t.shape)), "self." + dotted)
    for name, x in zip(params, inputs, strict=True):
        if isinstance(x, torch.Tensor):
            owners[(x.data_ptr(), tuple(x.shape))] = name
    exprs = []
    symbols = seen.get("symbols") or [None] * len(seen["inputs"])
    for t, sym in zip(seen["inputs"], symbols, strict=False):
        if not isinstance(t, torch.Tensor):
            exprs.append(_size_expr(sym, seen["inputs"], symbols, owners))
            continue
        key = (t.data_ptr(), tuple(t.shape))
        if key not in owners:
            raise SeedError("an input of torch.compile's graph is neither a forward input nor a parameter")
        exprs.append(owners[key])
    n_out = len(out) if isinstance(out, (tuple, list)) else 1
    try:
        header, model_node = split_source(problem.source)
    except ProblemError as err:
        raise SeedError(str(err)) from None
    class_body = model_new_body(problem.source, model_node)
    prepare = "".join(f"        {p} = {p}.contiguous()\n" for p, x in zip(params, inputs, strict=True)
                      if isinstance(x, torch.Tensor))
    ret = "outs[0]" if n_out == 1 else f"tuple(outs[:{n_out}])"
    return (
        f'"""Seed for {problem.name}: torch.compile\'s own generated code (TorchInductor, torch '
        f'{torch.__version__}) in a ModelNew."""\n'
        f"{header}\n"
        "# ---- TorchInductor's output code, as it generated it (benchmark harness removed) ----\n"
        f"{code}\n"
        "# ---- the model around it ----\n\n\n"
        "class ModelNew(nn.Module):\n"
        f"{class_body}\n\n"
        f"    def forward(self, {', '.join(params)}):\n"
        f"{prepare}"
        f"        outs = call([{', '.join(exprs)}])\n"
        f"        return {ret}\n"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="torch.compile's generated code for a problem, as a candidate")
    ap.add_argument("problem")
    ap.add_argument("--name", default=None)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    path = Path(args.problem)
    problem = Problem(name=args.name or path.stem, source=path.read_text(), path=str(path))
    try:
        result = {"source": _generate(problem, args.device)}
    except SeedError as err:
        result = {"error": str(err)}
    except Exception as err:  # the user's model under torch.compile: any failure is a reason, not a crash
        result = {"error": f"torch.compile failed: {type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}"}
    Path(args.out).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
