"""torch.compile of a patched model against torch.compile of the original, end to end.

A kernel put back into a model is a custom op (``modelopt.runtime``), so ``torch.compile(patched,
fullgraph=True)`` compiles everything around it. This script patches an example model with the
hand-written kernel of one of its targets (resources/examples/kernels/[cuda/]<model>_<kind>.py),
checks the compiled patched model against the original and times, interleaved round by round:
eager, the patched model eagerly, torch.compile(original) and torch.compile(patched).

    python benchmarks/compile_patched.py [--model llm_block] [--kind rms_norm] [--device cuda]
        [--runs 50] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv=None) -> int:
    import torch

    from kforge_desktop.modelopt.integrate import ChosenKernel, integrate
    from kforge_desktop.modelopt.loader import load_model_file
    from kforge_desktop.modelopt.problems import write_problem
    from kforge_desktop.modelopt.profile import profile_model
    from kforge_desktop.paths import RESOURCES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llm_block")
    ap.add_argument("--kind", default="rms_norm")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    cuda = args.device.startswith("cuda")
    folder = RESOURCES / "examples" / "kernels" / ("cuda" if cuda else "")
    kernel = (folder / f"{args.model}_{args.kind}.py").read_text()

    mf = load_model_file(RESOURCES / "examples" / f"{args.model}.py", args.device)
    p = profile_model(mf.model, list(mf.inputs), args.device, name=mf.name, runs=1)
    t = next(t for t in p.profile.targets if t.kind == args.kind)
    tp = write_problem(t, p.analysis.cuts[t.name], p.analysis.captures[t.name], tempfile.mkdtemp(), mf.name)
    original = copy.deepcopy(mf.model)
    integ = integrate(mf.model, p.analysis, {t.name: ChosenKernel(t.name, kernel, tp.signatures)}, list(mf.inputs),
                      mf.make_inputs, args.device)
    if not integ.kept:
        print(f"the kernel was not kept: {integ.dropped}")
        return 1
    h, x = integ.handle, list(mf.inputs)
    with torch.no_grad():
        explained = torch._dynamo.explain(mf.model)(*x)
        torch._dynamo.reset()
        runners = {"eager": lambda: original(*x), "patched": lambda: mf.model(*x),
                   "compile(original)": torch.compile(original, fullgraph=True),
                   "compile(patched)": torch.compile(mf.model, fullgraph=True)}
        runners["compile(original)"] = (lambda f=runners["compile(original)"]: f(*x))
        runners["compile(patched)"] = (lambda f=runners["compile(patched)"]: f(*x))
        ref = original(*x)
        for fn in runners.values():
            for _ in range(3):
                out = fn()
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
        h.reset_stats()
        runners["compile(patched)"]()
        calls = h.stats()
        names, samples = list(runners), {k: [] for k in runners}
        for r in range(args.runs):
            for name in names[r % len(names):] + names[:r % len(names)]:
                if cuda:
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                runners[name]()
                if cuda:
                    torch.cuda.synchronize()
                samples[name].append(1e3 * (time.perf_counter() - t0))
    result = {"model": args.model, "target": t.name, "device": args.device,
              "device_name": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
              "graph_breaks": explained.graph_break_count, "kernel_calls_compiled": calls,
              "median_ms": {k: statistics.median(v) for k, v in samples.items()},
              "min_ms": {k: min(v) for k, v in samples.items()}, "runs": args.runs}
    for k in names:
        print(f"{k:20} median {result['median_ms'][k]:.4f} ms  fastest {result['min_ms'][k]:.4f} ms")
    print(f"graph breaks in the patched model: {explained.graph_break_count}; kernel calls (compiled): {calls}")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
