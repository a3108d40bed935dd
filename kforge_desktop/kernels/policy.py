"""Policy: a candidate must compute with code it compiled, not hand the work back to PyTorch.

Three independent checks, all run in the worker:
- static: the source may not call the reference's heavy operators (``torch.softmax``, ``F.layer_norm``,
  ``torch::softmax``…), even behind a ``try/except`` fallback, nor inherit the reference;
- dynamic: the ATen operators the candidate's forward dispatches (recorded with a TorchDispatchMode,
  which also sees ``at::`` calls made from C++) may not cover the reference's own operators, and some
  compiled code (a native kernel, a ``load_inline`` function, a Triton launch) must actually run;
- tamper: importing and running the candidate must not replace functions of torch (a monkeypatched
  ``torch.softmax`` would fool the reference and the baselines in the same process).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# operators that move or shape data without computing anything; a candidate may always use them
PLUMBING = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "ones", "ones_like", "full", "full_like", "fill", "fill_", "zero_", "view", "_unsafe_view",
    "reshape", "expand", "permute", "transpose", "t", "unsqueeze", "squeeze", "flatten", "select", "slice",
    "as_strided", "detach", "alias", "contiguous", "clone", "copy", "copy_", "_to_copy", "lift_fresh",
    "lift_fresh_copy", "split", "split_with_sizes", "chunk", "unbind", "narrow", "_reshape_alias",
    "view_as", "resize_", "set_", "record_stream", "is_same_size", "_local_scalar_dense", "item",
    "unfold", "movedim", "expand_as", "sym_size", "sym_stride", "sym_numel", "stride", "size", "numel",
    "dim", "is_contiguous", "_has_compatible_shallow_copy_type", "arange", "scalar_tensor",
}

# heavy operators whose name in a candidate's source means it delegates them (static check)
HEAVY = {
    "softmax", "log_softmax", "_softmax", "_log_softmax", "layer_norm", "native_layer_norm", "group_norm",
    "native_group_norm", "batch_norm", "native_batch_norm", "_native_batch_norm_legit_no_training",
    "instance_norm", "rms_norm", "_fused_rms_norm", "gelu", "silu", "mish", "hardswish", "elu", "selu",
    "softplus", "conv1d", "conv2d", "conv3d", "convolution", "conv_transpose2d", "max_pool2d", "avg_pool2d",
    "adaptive_avg_pool2d", "max_pool2d_with_indices", "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention", "embedding",
    "cross_entropy", "nll_loss", "cumsum", "logsumexp", "normalize", "norm", "linalg_vector_norm",
    "sigmoid", "tanh", "relu", "leaky_relu", "mm", "bmm", "matmul", "addmm", "linear", "baddbmm", "einsum",
}


def op_base(name: str) -> str:
    """``aten._softmax.default`` -> ``_softmax``."""
    parts = str(name).split(".")
    if parts and parts[0] == "aten":
        parts = parts[1:]
    return parts[0] if parts else str(name)


class OpRecorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(op_base(str(func.overloadpacket.__name__) if hasattr(func, "overloadpacket") else func))
        return func(*args, **(kwargs or {}))


def record_ops(fn, *args) -> tuple[object, list[str]]:
    rec = OpRecorder()
    with rec:
        out = fn(*args)
    return out, rec.ops


def compute_ops(ops: list[str]) -> set[str]:
    return {o for o in ops if o not in PLUMBING}


COMPUTE_METHODS = HEAVY | {
    "pow", "mean", "sum", "rsqrt", "sqrt", "exp", "log", "mul", "add", "sub", "div", "max", "min", "amax",
    "var", "std", "clamp", "where", "abs", "neg", "reciprocal", "prod", "softmax", "erf",
}


def fallback_calls(source: str) -> list[str]:
    """PyTorch compute calls inside ``except`` branches: a kernel that 'falls back' to PyTorch."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        for handler in node.handlers:
            for sub in ast.walk(handler):
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
                    name = sub.func.attr
                    base = ast.unparse(sub.func.value)
                    torchy = base.split(".")[0] in ("torch", "F", "nn") or "functional" in base
                    if (torchy and name not in PLUMBING) or name in COMPUTE_METHODS:
                        found.append(f"{base}.{name}")
    return found


def static_delegations(source: str, reference_ops: set[str]) -> list[str]:
    """Names of heavy reference operators that the candidate's source calls itself."""
    found = []
    names = {o.lstrip("_") for o in reference_ops if o in HEAVY or o.lstrip("_") in HEAVY}
    for name in sorted(names):
        # tensor methods (x.softmax()) are left to the dynamic check: `_lib.softmax(` is the candidate's own
        py = re.compile(rf"(?:\btorch\.|\bF\.|\bfunctional\.|\bspecial\.)_?{name}\s*\(")
        cpp = re.compile(rf"\b(?:torch|at)::(?:native::)?_?{name}\s*\(")
        if py.search(source) or cpp.search(source):
            found.append(name)
    return found


# -- proof that compiled code ran ------------------------------------------------------------------

_EXT_CALLS = [0]
_TRITON_CALLS = [0]
_lock = threading.Lock()


def compiled_calls() -> int:
    from . import native

    return native.CALLS[0] + _EXT_CALLS[0] + _TRITON_CALLS[0]


class _CountingModule:
    """Wraps a module returned by ``load_inline``/``load`` so calls into it are counted."""

    def __init__(self, module) -> None:
        object.__setattr__(self, "_module", module)

    def __getattr__(self, name):
        attr = getattr(self._module, name)
        if callable(attr) and not isinstance(attr, type):
            def counted(*a, **k):
                _EXT_CALLS[0] += 1
                return attr(*a, **k)

            counted.__name__ = getattr(attr, "__name__", name)
            return counted
        return attr


def instrument_extensions(cache_dir: str) -> None:
    """Patch cpp_extension in this worker: content-named, cached, lock-safe, counted builds.

    ``load_inline(name=...)`` keeps working as KernelBench candidates call it; the name gets the
    source's hash so a candidate evaluated twice is built once (also across restarts), and a stale
    ``lock`` file left by a killed build is removed under an flock that dies with its holder.
    """
    import hashlib
    import inspect
    import os
    from pathlib import Path

    from torch.utils import cpp_extension

    from .native import _DirLock

    if getattr(cpp_extension, "_kforge_patched", False):
        return
    orig_inline = cpp_extension.load_inline
    orig_load = cpp_extension.load
    os.makedirs(cache_dir, exist_ok=True)

    def load_inline(name, cpp_sources, cuda_sources=None, *args, **kwargs):
        text = repr((cpp_sources, cuda_sources, kwargs.get("functions"), kwargs.get("extra_cuda_cflags"),
                     kwargs.get("extra_cflags")))
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        new_name = f"{name}_{digest}"
        build_dir = os.path.join(cache_dir, new_name)
        kwargs["build_directory"] = build_dir
        kwargs.pop("verbose", None)
        pch_ok = "use_pch" in inspect.signature(orig_inline).parameters
        if (not cuda_sources and pch_ok and not kwargs.get("extra_cflags")
                and not kwargs.get("extra_include_paths")):
            # C++ with the default flags: precompile torch/extension.h once (torch keeps it beside
            # the header, one file for every build). Only making it takes the machine-wide lock; the
            # builds that read it then run side by side.
            with _DirLock(Path(cache_dir) / "_pch"):
                try:
                    cpp_extension._check_and_build_extension_h_precompiler_headers(None, None)
                    kwargs.setdefault("use_pch", True)
                except RuntimeError:
                    kwargs["use_pch"] = False
        with _DirLock(Path(build_dir)):
            try:
                mod = orig_inline(new_name, cpp_sources, cuda_sources, *args, verbose=False, **kwargs)
            except RuntimeError as err:
                if "PreCompile Header" not in str(err):
                    raise
                kwargs["use_pch"] = False
                mod = orig_inline(new_name, cpp_sources, cuda_sources, *args, verbose=False, **kwargs)
        return _CountingModule(mod)

    def load(name, sources, *args, **kwargs):
        mod = orig_load(name, sources, *args, **kwargs)
        return _CountingModule(mod) if mod is not None and not isinstance(mod, str) else mod

    cpp_extension.load_inline = load_inline
    cpp_extension.load = load
    # torch deletes the shared precompiled header at every build that does not use it (CUDA builds,
    # builds with their own flags), which would pull it from under a C++ build running beside them.
    # A header precompiled with other flags is ignored by the compiler, so leaving it is safe.
    cpp_extension.remove_extension_h_precompiler_headers = lambda: None
    cpp_extension._kforge_patched = True
    _instrument_triton()


def _count_calls(cls, method: str) -> None:
    orig = getattr(cls, method)

    def counted(self, *a, **k):
        _TRITON_CALLS[0] += 1
        return orig(self, *a, **k)

    setattr(cls, method, counted)


def _instrument_triton() -> None:
    """Count Triton launches: compiled (JITFunction), interpreted (TRITON_INTERPRET=1 on a CPU
    machine) and TorchInductor-style (CachingAutotuner)."""
    try:
        import triton.runtime.jit as tjit
    except Exception:
        return
    _count_calls(tjit.JITFunction, "run")
    try:
        from triton.runtime.interpreter import InterpretedFunction

        _count_calls(InterpretedFunction, "run")
    except Exception:
        pass
    try:
        from torch._inductor.runtime import triton_heuristics as th

        _count_calls(th.CachingAutotuner, "run")
    except Exception:
        pass


# -- tamper detection ------------------------------------------------------------------------------


@dataclass
class TorchSnapshot:
    ids: dict = field(default_factory=dict)

    @classmethod
    def take(cls, extra: dict | None = None) -> TorchSnapshot:
        import time

        import torch.nn.functional as F

        snap = {}
        for label, obj in (("torch", torch), ("F", F), ("Tensor", torch.Tensor), ("Module", torch.nn.Module),
                           ("cuda", torch.cuda), ("time", time)):
            for key in dir(obj):
                if key.startswith("__") and key not in ("__call__", "__add__", "__mul__", "__matmul__"):
                    continue
                try:
                    value = getattr(obj, key)
                except Exception:
                    continue
                # functions and classes only: torch.cuda's state (``_initialized``, ``default_generators``,
                # ``_cached_device_count``) changes when anything first asks for a device, which on a GPU host
                # flagged CPU candidates as patching torch (3 of the dev replays on the H200 box)
                if callable(value):
                    snap[f"{label}.{key}"] = id(value)
        for label, obj in (extra or {}).items():
            snap[label] = id(obj)
        return cls(snap)

    def changed(self, other: TorchSnapshot) -> list[str]:
        return sorted(k for k, v in self.ids.items() if k in other.ids and other.ids[k] != v)

