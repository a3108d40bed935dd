"""``kforge export SESSION --out DIR``: a Python package that patches the model with only torch.

What is written:
    DIR/<package>/__init__.py   apply(model) -> handle (handle.remove() undoes it), load_kernels(), record()
    DIR/<package>/native.py     the kernel loader (a copy of kernels/native.py: torch and the stdlib only)
    DIR/<package>/runtime.py    guards, patched forwards and their custom ops for torch.compile (a copy
                                of modelopt/runtime.py)
    DIR/<package>/plan.json     what to patch where, and what each kernel was verified for
    DIR/<package>/record.json   per kernel: the evaluator's verdict (checks, errors, timings), the
                                whole-model checks and the end-to-end benchmark
    DIR/<package>/kernels/*.py  the chosen candidates (class ModelNew), one per target
    DIR/<package>/problems/*.py each target's reference problem, for the record
    DIR/REPORT.md, DIR/report.html

The chosen kernel per target is the pinned node, else the fastest verified one (see
``session.chosen_kernels``). Before writing, the session's model file is loaded again, patched with
exactly these kernels and checked against the original (and, unless asked not to, benchmarked),
so the record describes what the package does on this machine.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from .bench import BenchResult, bench_model, unpatched_copy
from .integrate import build_plan, integrate
from .report import html_report, markdown, now
from .session import ModelSessionError, chosen_kernels, model_meta, reload_model

_INIT = '''"""Kernels for {model} chosen by Kernel Forge Desktop; they patch the model with only torch.

    import {pkg}
    model = ...                      # your model, built as usual
    handle = {pkg}.apply(model)      # patches this model object in place
    with torch.no_grad():
        y = model(x)
    handle.remove()                  # back to the original

Every replaced call is guarded: on a shape, stride, dtype or device its kernel was not verified for,
the original computation runs. Kernels run in eval mode with autograd off (no_grad/inference_mode);
training and gradients use the original forward. Each kernel is also a custom op (kforge::...), so
torch.compile(model, fullgraph=True) compiles the code around the kernels and keeps them. Kernels are compiled on first use (a C++/CUDA
compiler is needed, as for torch.utils.cpp_extension) and cached. record.json holds the
verification and timing of each kernel; REPORT.md beside this package summarises them.
"""

import json
import os
import warnings

from . import runtime

_HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = {kernels}  # target -> kernel file in kernels/


def plan() -> dict:
    with open(os.path.join(_HERE, "plan.json")) as fh:
        return json.load(fh)


def record() -> dict:
    with open(os.path.join(_HERE, "record.json")) as fh:
        return json.load(fh)


def kernel_source(target: str) -> str:
    with open(os.path.join(_HERE, "kernels", KERNELS[target])) as fh:
        src = fh.read()
    # the candidates were written against Kernel Forge's loader; this package ships its own copy
    src = src.replace("from kforge_desktop.kernels import native", "from " + __name__ + " import native")
    return src.replace("kforge_desktop.kernels.native", __name__ + ".native")


def load_kernels(targets=None) -> dict:
    """Build (or load from the cache) the kernels of ``targets`` (default: all)."""
    return {{t: runtime.load_kernel(kernel_source(t), t) for t in (targets or KERNELS)}}


def apply(model, targets=None, strict: bool = False) -> runtime.PatchHandle:
    """Patch ``model`` in place with the kernels of ``targets`` (default: all); returns the handle.
    Parts of the model whose code differs from the profiled model are left alone (a warning, or an
    error with ``strict=True``)."""
    handle = runtime.apply_plan(model, plan(), load_kernels(targets))
    for msg in handle.skipped:
        if strict:
            handle.remove()
            raise runtime.PatchError("not patched: " + msg)
        warnings.warn("not patched: " + msg, stacklevel=2)
    return handle
'''


@dataclass(frozen=True)
class ExportResult:
    out: Path
    package: str
    kernels: tuple[str, ...]
    not_used: dict
    report: Path
    bench: BenchResult | None


def package_name(model_name: str) -> str:
    name = re.sub(r"\W", "_", model_name).strip("_").lower() or "model"
    if name[0].isdigit():
        name = "m_" + name
    return f"kforge_{name}_kernels"


def export_session(session_path: str | Path, out_dir: str | Path, *, device: str | None = None, bench: bool = True,
                   bench_runs: int = 20, bench_compile: bool = True, progress=None) -> ExportResult:
    from ..store import SessionStore

    say = progress or (lambda msg: None)
    store = SessionStore.open(session_path)
    meta = model_meta(store)
    say("loading the model again")
    mf, profiled = reload_model(store, device)
    dev = device or meta.get("device", "cpu")
    chosen, reasons = chosen_kernels(store, profiled)
    if not chosen:
        detail = "; ".join(f"{t}: {r}" for t, r in sorted(reasons.items())[:3])
        raise ModelSessionError(f"The session has no kernel to export ({detail or 'no verified kernel'}).")
    original = unpatched_copy(mf.model) if bench and bench_compile else None
    say(f"patching the model with {len(chosen)} kernel(s) and checking it against the original")
    integ = integrate(mf.model, profiled.analysis, chosen, list(mf.inputs), mf.make_inputs, dev)
    reasons.update(integ.dropped)
    if not integ.kept or not integ.ok:
        raise ModelSessionError("No kernel of the session keeps the model's outputs right here: "
                                + "; ".join(f"{t}: {r}" for t, r in integ.dropped.items()) + ".")
    result = None
    if bench:
        say("benchmarking the model end to end")
        result = bench_model(mf.model, list(mf.inputs), integ.handle, original=original, device=dev,
                             runs=bench_runs, compile=bench_compile, progress=say)
    kept = {t: chosen[t] for t in integ.kept}
    plan = build_plan(profiled.analysis, kept, dev)
    integ.handle.remove()

    out = Path(out_dir)
    pkg = package_name(meta.get("model_name", mf.name))
    pdir = out / pkg
    if pdir.exists():
        shutil.rmtree(pdir)
    (pdir / "kernels").mkdir(parents=True)
    (pdir / "problems").mkdir()
    here = Path(__file__).resolve().parent
    shutil.copyfile(here.parent / "kernels" / "native.py", pdir / "native.py")
    shutil.copyfile(here / "runtime.py", pdir / "runtime.py")
    files = {}
    problems = {p.info.get("modelopt", {}).get("key"): p for p in store.problems()}
    for t, ck in kept.items():
        files[t] = f"{t}.py"
        (pdir / "kernels" / files[t]).write_text(ck.source)
        target = profiled.profile.target(t)
        prob = problems.get(target.key)
        if prob is not None:
            (pdir / "problems" / files[t]).write_text(prob.source)
    (pdir / "__init__.py").write_text(_INIT.format(model=meta.get("model_name", mf.name), pkg=pkg,
                                                   kernels=json.dumps(files, indent=4)))
    (pdir / "plan.json").write_text(json.dumps(plan, indent=1))

    data = report_data(store, meta, profiled.profile, kept, reasons, integ, result, dev)
    (pdir / "record.json").write_text(json.dumps(data, indent=1, default=str))
    (out / "REPORT.md").write_text(markdown(data))
    (out / "report.html").write_text(html_report(data))
    return ExportResult(out=out, package=pkg, kernels=tuple(kept), not_used=reasons, report=out / "REPORT.md",
                        bench=result)


def report_data(store, meta, profile, kept, reasons, integ, bench: BenchResult | None, device: str) -> dict:
    """Everything the report and record.json say, as plain data."""
    allocs = {a["target"]: a for a in meta.get("allocations", [])}
    by_key = {p.info.get("modelopt", {}).get("key"): p for p in store.problems()}
    saved = {t["key"]: t for t in meta.get("profile", {}).get("targets", [])}
    targets = []
    for t in profile.targets:
        d = t.to_dict()
        old = saved.get(t.key, {})
        prob = by_key.get(t.key)
        best = store.best_node(prob.id) if prob else None
        d["budget"] = allocs.get(old.get("name"), {}).get("budget", 0)
        d["budget_reason"] = allocs.get(old.get("name"), {}).get("reason", "")
        d["share"] = old.get("share", t.share)  # the profile the budget was spread on
        d["best_speedup"] = best.speedup if best else None
        d["used"] = t.name in kept
        why = reasons.get(t.name, "no verified kernel")
        if why == "no verified kernel" and d["budget"] == 0 and d["budget_reason"]:
            why = d["budget_reason"]  # never searched: say why
        d["why_not"] = "" if t.name in kept else why
        d.pop("code", None)
        targets.append(d)
    kernels = {t: {"node_id": ck.node_id, "pinned": ck.pinned, "speedup": ck.speedup, "verdict": ck.verdict,
                   "signatures": [[list(map(list, s[:2])) + [s[2]] for s in sig] for sig in ck.signatures],
                   "op": profile.target(t).op, "module_paths": list(profile.target(t).module_paths)}
               for t, ck in kept.items()}
    for k in kernels.values():
        k["verdict"] = {key: v for key, v in (k["verdict"] or {}).items() if key != "log"}
    env = store.environment()
    return {"model": meta.get("model_name"), "model_path": meta.get("model_path"), "device": device,
            "device_name": env.get("device_name", ""), "environment": env, "when": now(),
            "targets": targets, "kernels": kernels, "not_used": reasons,
            "checks": [asdict(c) for c in integ.checks], "bench": bench.to_dict() if bench else None}
