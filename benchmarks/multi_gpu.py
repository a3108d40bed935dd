"""Every GPU of a host: candidates per hour on one GPU and on two, for the same folder of candidates.

A folder of CUDA candidates for ``resources/problems/rms_norm.py``: ten honest RMSNorm kernels
(block sizes x accumulator types, from ``eval_speed.py``) and the adversarial ones of
``tests/candidates/cuda`` (all but the one that never ends, which would only measure the timeout),
25 in all. Each configuration starts from an empty build cache and its own warm workers, then
evaluates the whole folder at once: one ``Evaluator`` on ``cuda:0``, then a ``MultiDeviceEvaluator``
with one worker pool per GPU (``kernels.devices``; torch only, no Ray). It checks that both give every
candidate the same status (and the status the candidate file expects) and writes
``$OUT/multi_gpu.json`` (or ``--out``).

    python benchmarks/multi_gpu.py                       # on a machine with 2 GPUs
    python benchmarks/multi_gpu.py --devices cuda:0,cuda:1 --workers 4 --repeat 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

ADVERSARIAL = REPO / "tests" / "candidates" / "cuda"
LEFT_OUT = {"infinite_loop.py"}  # its verdict is the run timeout: it would measure only the wait


def folder() -> dict[str, tuple[str, str]]:
    """name -> (source, expected status)."""
    from eval_speed import candidates

    out = {f"honest_{i:02d}.py": (src, "ok") for i, src in enumerate(candidates("cuda", 10))}
    for path in sorted(ADVERSARIAL.glob("*.py")):
        if path.name in LEFT_OUT:
            continue
        text = path.read_text()
        first = text.splitlines()[0]
        status = first.split("expect:", 1)[1].split("--", 1)[0].strip() if "expect:" in first else ""
        out[path.name] = (text, status)
    return out


def run(devices: list[str], workers: int | None, sources: dict[str, tuple[str, str]]) -> dict:
    from kforge_desktop.kernels.devices import MultiDeviceEvaluator
    from kforge_desktop.kernels.evaluator import Evaluator, default_workers
    from kforge_desktop.kernels.options import EvalOptions
    from kforge_desktop.problem.problem import load_problem

    problem = load_problem(REPO / "resources" / "problems" / "rms_norm.py")
    cache = tempfile.mkdtemp(prefix="kforge-multigpu-builds-")
    opts = EvalOptions(compare_compile=False)
    workers = workers or default_workers(devices[0])
    if len(devices) == 1:
        ev = Evaluator(devices[0], workers=workers, options=opts, build_cache=cache)
    else:
        ev = MultiDeviceEvaluator(devices, workers=workers, options=opts, build_cache=cache)
    try:
        warm = next(src for src, status in sources.values() if status == "ok")
        # start every worker (imports torch, creates its CUDA context) before the clock starts
        list(f.result() for f in [ev.submit(problem, warm.replace("rms_norm(", f"rms_norm_warm{i}("))
                                  for i in range(ev.workers)])
        t0 = time.perf_counter()
        futures = {name: ev.submit(problem, src) for name, (src, _) in sources.items()}
        verdicts = {name: f.result() for name, f in futures.items()}
        wall = time.perf_counter() - t0
    finally:
        ev.close()
    return {
        "devices": devices, "workers_per_device": workers, "n": len(sources), "wall_s": wall,
        "candidates_per_hour": len(sources) / wall * 3600,
        "statuses": {n: v.status for n, v in verdicts.items()},
        "measured_on": {n: f"{v.host}/{v.device}" for n, v in verdicts.items()},
        "speedups": {n: v.speedup for n, v in verdicts.items() if v.status == "ok"},
        "build_s_median": statistics.median(v.build_s or 0 for v in verdicts.values()),
        "time_s_median": statistics.median(v.time_s or 0 for v in verdicts.values()),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", default="cuda:0,cuda:1", help="the GPUs of the second run (the first: the first one)")
    ap.add_argument("--workers", type=int, default=None, help="worker processes per GPU (default: the evaluator's)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each configuration (the best is reported)")
    ap.add_argument("--out", default=None, help="default: $OUT/multi_gpu.json, else ./multi_gpu.json")
    args = ap.parse_args()
    import torch

    from kforge_desktop.kernels.devices import DeviceError, parse_devices

    try:
        devices = parse_devices(args.devices)
    except DeviceError as err:
        devices, why = [], str(err)
    else:
        why = ""
    if len(devices) < 2 or not devices[0].startswith("cuda"):
        print(f"this benchmark needs two GPUs ({why or f'torch sees {torch.cuda.device_count()}'})", file=sys.stderr)
        return 2
    sources = folder()
    expected = {n: status for n, (_, status) in sources.items()}
    runs: dict[str, list[dict]] = {"1": [], str(len(devices)): []}
    for _ in range(args.repeat):
        for key, devs in (("1", devices[:1]), (str(len(devices)), devices)):
            r = run(devs, args.workers, sources)
            runs[key].append(r)
            print(f"{len(devs)} GPU(s): {r['n']} candidates in {r['wall_s']:.1f} s -> {r['candidates_per_hour']:.0f}/hour",
                  file=sys.stderr)
    best = {k: max(v, key=lambda r: r["candidates_per_hour"]) for k, v in runs.items()}
    one, many = best["1"], best[str(len(devices))]
    same = one["statuses"] == many["statuses"]
    result = {
        "folder": sorted(sources), "expected": expected,
        "gpus": [torch.cuda.get_device_name(int(d.split(":")[1])) for d in devices],
        "torch": torch.__version__, "cpus": os.cpu_count(),
        "one_gpu": one, "all_gpus": many, "runs": runs,
        "speedup": many["candidates_per_hour"] / one["candidates_per_hour"],
        "same_verdicts": same,
        "differences": {n: [one["statuses"][n], many["statuses"][n]] for n in sources
                        if one["statuses"][n] != many["statuses"][n]},
        "unexpected": {n: s for n, s in many["statuses"].items() if expected[n] and s != expected[n]},
    }
    out = Path(args.out) if args.out else Path(os.environ.get("OUT", ".")) / "multi_gpu.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"1 GPU {one['candidates_per_hour']:.0f}/hour, {len(devices)} GPUs {many['candidates_per_hour']:.0f}/hour "
          f"({result['speedup']:.2f}x); same verdicts: {same}; written to {out}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
