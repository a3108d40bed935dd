"""Put verified kernels into a model object: guarded call sites inside patched forwards.

This file imports only torch and the standard library: an exported kernel package ships a copy of
it (see ``modelopt.export``), so a patched model needs nothing of Kernel Forge.

A *plan* (plain JSON data, written by ``modelopt.integrate``) lists
- units: a module path, the class name and fingerprint of the module's traced code (so a changed
  model is never patched with code meant for another), and the source of its new ``forward``, in
  which each replaced region is one call ``kforge_patch_<site>(...)``;
- sites: per call site, its target, which arguments are tensors (passed to the kernel), the Python
  numbers that were baked into the kernel's problem (checked on every call), and the source of the
  original computation (the fallback);
- kernels: per target, the input signatures (shape, stride, dtype) the evaluator verified.

Every call checks that it is in the verified envelope — each tensor's shape, stride, dtype and
device, and the baked numbers — and otherwise runs the original computation. A patched forward runs
the kernels only in eval mode with autograd off (``torch.no_grad()``/``inference_mode``): the kernels
have no backward, so training and gradient computations run the original forward.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import math
import sys
import types

import torch
import torch.fx as fx

PLAN_FORMAT = 1
SITE_PREFIX = "kforge_patch_"


class PatchError(RuntimeError):
    """A plan that cannot be applied (one sentence)."""


def decode_const(text: str):
    """The value of a ``repr()`` written into a plan (numbers, tuples, None, torch dtypes)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        pass
    if text in ("inf", "-inf", "nan"):
        return float(text)
    if text.startswith("torch."):
        obj = torch
        for part in text.split(".")[1:]:
            obj = getattr(obj, part)
        return obj
    if text.startswith("device("):
        return eval(text, {"__builtins__": {}}, {"device": torch.device})  # a repr of torch.device only
    raise PatchError(f"cannot read the constant {text!r} of a patch plan")


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name.replace("torch.", ""))


class GuardedKernel:
    """One call site: the kernel where the call is inside what was verified, else the original."""

    def __init__(self, site: str, target: str, kernel, fallback, tensor_pos: list[int],
                 consts: dict[int, object], signatures, device_type: str) -> None:
        self.site = site
        self.target = target
        self.kernel = kernel
        self.fallback = fallback
        self.tensor_pos = tuple(tensor_pos)
        self.consts = tuple(consts.items())
        self.signatures = {
            tuple((tuple(shape), tuple(stride), _dtype(dtype)) for shape, stride, dtype in sig) for sig in signatures
        }
        self.device_type = device_type
        self.enabled = kernel is not None
        self.hits = 0
        self.misses = 0
        self.__name__ = SITE_PREFIX + site

    def accepts(self, args: tuple) -> bool:
        for pos, value in self.consts:
            if args[pos] != value:
                return False
        sig = []
        for i in self.tensor_pos:
            t = args[i]
            if not isinstance(t, torch.Tensor) or t.device.type != self.device_type:
                return False
            sig.append((tuple(t.shape), t.stride(), t.dtype))
        return tuple(sig) in self.signatures

    def __call__(self, *args):
        if self.enabled and self.accepts(args):
            self.hits += 1
            return self.kernel(*[args[i] for i in self.tensor_pos])
        self.misses += 1
        return self.fallback(None, *args)


def load_kernel(source: str, name: str):
    """Execute a candidate module (``class ModelNew``) and return its bound ``forward``: the
    kernel is built (or fetched from the build cache) as the module is imported."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    mod_name = f"kforge_kernel_{name}_{digest}"
    module = types.ModuleType(mod_name)
    module.__file__ = f"<kernel {name}>"
    sys.modules[mod_name] = module
    exec(compile(source, f"<kernel {name}>", "exec"), module.__dict__)
    model_new = module.ModelNew()
    model_new.eval()
    return model_new.forward


def _exec_function(source: str, env: dict, label: str):
    ns = dict(env)
    exec(compile(source, f"<kforge {label}>", "exec"), ns)
    return ns["forward"]


def standard_env() -> dict:
    """The globals torch.fx's generated code refers to."""
    import torch.fx._pytree as fx_pytree
    import torch.utils._pytree as pytree

    return {"torch": torch, "inf": math.inf, "nan": math.nan, "NoneType": type(None), "device": torch.device,
            "fx_pytree": fx_pytree, "pytree": pytree, "getattr": getattr}


def fingerprint(module: torch.nn.Module) -> str | None:
    try:
        code = fx.symbolic_trace(module).code
    except Exception:
        return None
    return hashlib.sha256((type(module).__qualname__ + "\n" + code).encode()).hexdigest()[:16]


class PatchHandle:
    """What ``apply_plan`` did; ``remove()`` restores the model, ``disabled()`` runs it unpatched."""

    def __init__(self) -> None:
        self.modules: list[tuple[torch.nn.Module, bool, object]] = []
        self.sites: dict[str, GuardedKernel] = {}
        self.skipped: list[str] = []  # one sentence per unit that was not patched
        self._off = False

    @contextlib.contextmanager
    def disabled(self):
        self._off = True
        try:
            yield
        finally:
            self._off = False

    def set_enabled(self, targets: set[str] | None) -> None:
        """Use only the kernels of ``targets`` (None: all)."""
        for g in self.sites.values():
            g.enabled = g.kernel is not None and (targets is None or g.target in targets)

    def stats(self) -> dict[str, tuple[int, int]]:
        """Per target: (calls that ran the kernel, calls that fell back)."""
        out: dict[str, list[int]] = {}
        for g in self.sites.values():
            acc = out.setdefault(g.target, [0, 0])
            acc[0] += g.hits
            acc[1] += g.misses
        return {k: (v[0], v[1]) for k, v in out.items()}

    def reset_stats(self) -> None:
        for g in self.sites.values():
            g.hits = g.misses = 0

    def remove(self) -> None:
        for module, had, old in reversed(self.modules):
            if had:
                module.forward = old
            else:
                module.__dict__.pop("forward", None)
        self.modules.clear()


def apply_plan(model: torch.nn.Module, plan: dict, kernels: dict, check_fingerprints: bool = True) -> PatchHandle:
    """Patch ``model`` in place. ``kernels`` maps a target name to its callable (``load_kernel``);
    a target without one keeps its original computation. Units whose module is missing, of another
    class or traced to different code are left alone and listed in ``handle.skipped``."""
    if plan.get("format") != PLAN_FORMAT:
        raise PatchError(f"this patch plan has format {plan.get('format')}, expected {PLAN_FORMAT}")
    handle = PatchHandle()
    env = standard_env()
    device_type = plan.get("device", "cpu").split(":")[0]
    kinfo = plan.get("kernels", {})
    for site in plan.get("sites", []):
        target = site["target"]
        fallback = _exec_function(site["fallback"], env, f"fallback {site['name']}")
        sigs = kinfo.get(target, {}).get("signatures", [])
        consts = {int(pos): decode_const(text) for pos, text in site.get("consts", [])}
        handle.sites[site["name"]] = GuardedKernel(site["name"], target, kernels.get(target), fallback,
                                                   site["tensor_pos"], consts, sigs, device_type)
    for unit in plan.get("units", []):
        path = unit["path"]
        try:
            module = model.get_submodule(path) if path else model
        except AttributeError:
            handle.skipped.append(f"the model has no module {path!r}")
            continue
        if type(module).__name__ != unit["cls"]:
            handle.skipped.append(f"{path or 'the model'} is a {type(module).__name__}, the plan was made for {unit['cls']}")
            continue
        if check_fingerprints and fingerprint(module) != unit["fingerprint"]:
            handle.skipped.append(f"the code of {path or 'the model'} differs from the profiled one")
            continue
        unit_env = dict(env)
        for name in unit["sites"]:
            unit_env[SITE_PREFIX + name] = handle.sites[name]
        fn = _exec_function(unit["source"], unit_env, f"forward of {path or 'model'}")
        had = "forward" in module.__dict__
        old = module.__dict__.get("forward")
        original = old if had else types.MethodType(type(module).forward, module)

        def patched(self, *args, _fn=fn, _orig=original, **kwargs):
            if handle._off or self.training or torch.is_grad_enabled():
                return _orig(*args, **kwargs)
            return _fn(self, *args, **kwargs)

        module.forward = types.MethodType(patched, module)
        handle.modules.append((module, had, old))
    return handle
