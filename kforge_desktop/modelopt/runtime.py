"""Put verified kernels into a model object: guarded call sites inside patched forwards, each also
a custom op that ``torch.compile`` keeps.

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

Under ``torch.compile`` a call site is one custom op, ``kforge::<site>_p<n>`` (``n`` counts the
plans applied in this process, so two patched models never share an op). Dynamo cannot trace a
kernel (it is called through ctypes), so the op is opaque to it: the graph around the op is
compiled, with no graph break (``fullgraph=True`` works). The op's real implementation holds the
same guards and fallback as the eager call; its fake implementation runs the original computation
on fake tensors, so the output's shape, dtype and strides are the reference's, for any input
shape. A kernel whose output has other strides than the reference's has it copied to the
reference's layout (the compiled code around the op reads it with those strides). Eager calls do
not go through the dispatcher (one Python call less per site, and the hit counts stay exact).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import itertools
import math
import os
import sys
import tempfile
import types

import torch
import torch.fx as fx

PLAN_FORMAT = 1
SITE_PREFIX = "kforge_patch_"
OP_NAMESPACE = "kforge"
_PLAN_IDS = itertools.count(1)  # numbers the custom ops of each applied plan apart


class PatchError(RuntimeError):
    """A plan that cannot be applied (one sentence)."""


CAPTURE_GUARD = "kforge: captured for"  # how a captured graph's guards begin (modelopt.export_capture)


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
        self._on_cuda = {"cuda": True, "cpu": False}.get(device_type)  # None: compare the device type
        self.enabled = kernel is not None
        self.hits = 0
        self.misses = 0
        self.__name__ = SITE_PREFIX + site
        self.op = None  # the custom op torch.compile calls (``register_op``)
        self.op_note = ""  # why there is none, where a kernel is
        self._returns_list = False
        self._specs: dict[tuple, list] = {}  # input layout -> the reference's output (shape, stride, dtype)

    def accepts(self, args: tuple) -> bool:
        for pos, value in self.consts:
            if args[pos] != value:
                return False
        return self._signature([args[i] for i in self.tensor_pos]) is not None

    def _signature(self, tensors) -> tuple | None:
        """The tensors' (shape, stride, dtype) when that is a verified signature on the kernel's
        device type, else None."""
        sig = []
        for t in tensors:
            if not isinstance(t, torch.Tensor):
                return None
            if self._on_cuda is None:
                if t.device.type != self.device_type:
                    return None
            elif t.is_cuda != self._on_cuda:
                return None
            sig.append((t.shape, t.stride(), t.dtype))  # torch.Size hashes and compares as a tuple
        sig = tuple(sig)
        return sig if sig in self.signatures else None

    def __call__(self, *args):
        if torch.compiler.is_compiling():
            return self._traced(args)
        if self.enabled and self.accepts(args):
            self.hits += 1
            return self.kernel(*[args[i] for i in self.tensor_pos])
        self.misses += 1
        return self.fallback(None, *args)

    # -- under torch.compile ------------------------------------------------------------------------

    def _traced(self, args: tuple):
        """What Dynamo traces: the custom op where the kernel may run (its guards run inside the op,
        on every call), else the original computation, which torch.compile then compiles."""
        if not self.enabled or self.op is None:
            return self.fallback(None, *args)
        for pos, value in self.consts:
            if args[pos] != value:
                return self.fallback(None, *args)
        tensors = [args[i] for i in self.tensor_pos]
        for t in tensors:
            if not isinstance(t, torch.Tensor):
                return self.fallback(None, *args)
        out = self.op(*tensors)
        return tuple(out) if self._returns_list else out

    def _full_args(self, tensors) -> list:
        args: list = [None] * (len(self.tensor_pos) + len(self.consts))
        for i, t in zip(self.tensor_pos, tensors, strict=True):
            args[i] = t
        for pos, value in self.consts:
            args[pos] = value
        return args

    def _fake_outputs(self, tensors, mode=None) -> list:
        """The reference's output(s) for these inputs, as fake tensors (``mode``: the fake mode that
        holds ``tensors``; None when they are already fake and the mode is active)."""
        args = self._full_args(tensors)
        if mode is None:
            out = self.fallback(None, *args)
        else:
            with mode:
                out = self.fallback(None, *args)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    def _op_real(self, *tensors):
        """The op's implementation: the eager call's guards, kernel and fallback (the baked
        numbers were checked when the call was traced)."""
        sig = self._signature(tensors) if self.enabled else None
        if sig is not None:
            self.hits += 1
            out = self._conform(self.kernel(*tensors), tensors, sig)
        else:
            self.misses += 1
            out = self.fallback(None, *self._full_args(tensors))
        return self._op_result(out, tensors)

    def _op_fake(self, *tensors):
        """The op's fake implementation: the reference, run on the fake inputs."""
        return self._op_result(self.fallback(None, *self._full_args(tensors)), tensors)

    def _op_result(self, out, tensors):
        """An op's outputs may not alias its inputs: a view of an input is copied."""
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        outs = [o.clone() if any(torch._C._is_alias_of(o, t) for t in tensors) else o for o in outs]
        return outs if self._returns_list else outs[0]

    def _conform(self, out, tensors, sig: tuple):
        """The kernel's output in the reference's layout (shape, dtype and strides), which the
        compiled code around the op was generated for."""
        spec = self._specs.get(sig)
        if spec is None:
            from torch._subclasses.fake_tensor import FakeTensorMode

            mode = FakeTensorMode()
            fakes = [mode.from_tensor(t) for t in tensors]
            spec = [(o.shape, o.stride(), o.dtype) for o in self._fake_outputs(fakes, mode)]
            self._specs[sig] = spec
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(outs) != len(spec):
            raise PatchError(f"the kernel of {self.target} returned {len(outs)} output(s), its reference {len(spec)}")
        fixed = []
        for o, (shape, stride, dtype) in zip(outs, spec, strict=True):
            if o.shape != shape or o.dtype != dtype:
                raise PatchError(f"the kernel of {self.target} returned {tuple(o.shape)} {o.dtype}, "
                                 f"its reference {tuple(shape)} {dtype}")
            if o.stride() != stride and o.numel() > 1:
                o = torch.empty_strided(shape, stride, dtype=dtype, device=o.device).copy_(o)
            fixed.append(o)
        return fixed if isinstance(out, (tuple, list)) else fixed[0]

    def register_op(self, lib, name: str) -> None:
        """Define ``<namespace>::<name>`` in ``lib`` (a ``torch.library.Library``) for this site; the
        output kind (one tensor or a list) comes from the reference run on fake inputs of the first
        verified signature."""
        if self.kernel is None or not self.signatures:
            return
        from torch._subclasses.fake_tensor import FakeTensorMode

        sig = sorted(self.signatures, key=repr)[0]
        try:
            with FakeTensorMode():
                fakes = [torch.empty_strided(shape, stride, dtype=dtype, device=self.device_type)
                         for shape, stride, dtype in sig]
                out = self.fallback(None, *self._full_args(fakes))
        except Exception as err:  # the eager call site still works; torch.compile compiles the original
            self.op_note = f"its original code did not run on fake tensors ({type(err).__name__}: {err})"
            return
        if isinstance(out, (tuple, list)) and out and all(isinstance(o, torch.Tensor) for o in out):
            self._returns_list, returns = True, "Tensor[]"
        elif isinstance(out, torch.Tensor):
            returns = "Tensor"
        else:
            self.op_note = f"its original code returns {type(out).__name__}, not tensors"
            return
        params = ", ".join(f"Tensor a{i}" for i in range(len(self.tensor_pos)))
        tags = tuple(getattr(torch.Tag, t) for t in ("needs_exact_strides", "needs_fixed_stride_order")
                     if hasattr(torch.Tag, t))[:1]  # keep the inputs' eager layout: what the guards check
        lib.define(f"{name}({params}) -> {returns}", tags=tags)
        lib.impl(name, self._op_real, "CompositeExplicitAutograd")
        torch.library.register_fake(f"{lib.ns}::{name}", self._op_fake, lib=lib)
        self.op = getattr(getattr(torch.ops, lib.ns), name).default


def load_kernel(source: str, name: str):
    """Execute a candidate module (``class ModelNew``) and return its bound ``forward``: the
    kernel is built (or fetched from the build cache) as the module is imported."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    mod_name = f"kforge_kernel_{name}_{digest}"
    module = types.ModuleType(mod_name)
    module.__file__ = _kernel_file(source, mod_name)  # a real file: Triton's @jit reads its source back
    sys.modules[mod_name] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    model_new = module.ModelNew()
    model_new.eval()
    return model_new.forward


def _kernel_file(source: str, mod_name: str) -> str:
    """``source`` written once to a per-user folder under the system's temporary directory. (The
    worker's ``kernels.candidate._source_file`` does the same in the build cache; this module ships in
    exported packages and imports only torch and the standard library, so it keeps its own.)"""
    folder = os.path.join(tempfile.gettempdir(), f"kforge-kernels-{os.getuid() if hasattr(os, 'getuid') else 0}")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{mod_name}.py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    return path


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
        self.library = None  # the torch.library.Library that holds this patch's custom ops
        self._off = False

    def ops(self) -> dict[str, str]:
        """Per call site with a kernel: its custom op's name (``kforge::…``), or why it has none."""
        return {name: (str(g.op.name()) if g.op is not None else g.op_note)
                for name, g in self.sites.items() if g.kernel is not None}

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
    if any(g.kernel is not None for g in handle.sites.values()):
        handle.library = torch.library.Library(OP_NAMESPACE, "FRAGMENT")
        plan_id = next(_PLAN_IDS)
        for name, g in handle.sites.items():
            g.register_op(handle.library, f"{name}_p{plan_id}")
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
            try:
                return _fn(self, *args, **kwargs)
            except AssertionError as err:  # outside what a torch.export capture assumed: the original
                if str(err).startswith(CAPTURE_GUARD):
                    return _orig(*args, **kwargs)
                raise

        module.forward = types.MethodType(patched, module)
        handle.modules.append((module, had, old))
    return handle
