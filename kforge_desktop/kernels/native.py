"""Build a torch-header-free C++/CUDA kernel once, cache it by content, call it through ctypes.

This is the fast path of the evaluator. Plain ``load_inline`` spends almost all of its 25-60 s in
``torch/extension.h``; a kernel source that includes only ``<cmath>``/``<cuda_runtime.h>`` and
exports ``extern "C"`` functions taking raw pointers builds in about a second. The build still goes
through ``torch.utils.cpp_extension.load`` (compiler flags, CUDA_HOME and the device's arch come
from there), and the Python side (``ModelNew``) passes tensors as pointers.

This file imports only the standard library and torch, so an exported kernel package can ship it
as is (see ``modelopt.export``).

    lib = load_native(SOURCE, lang="cpp")
    out = torch.empty_like(x)
    lib.rms_norm(x, out, x.shape[0], x.shape[1], 1e-6)
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import re
import time
from pathlib import Path

import torch

_FUNC_RE = re.compile(
    r'extern\s+"C"\s+(?:__host__\s+)?(?P<ret>[\w:]+)\s+(?P<name>\w+)\s*\((?P<args>[^)]*)\)\s*\{', re.S
)
_CTYPES = {
    "int": ctypes.c_int,
    "int32_t": ctypes.c_int32,
    "unsigned": ctypes.c_uint,
    "int64_t": ctypes.c_int64,
    "long": ctypes.c_long,
    "long long": ctypes.c_longlong,
    "size_t": ctypes.c_size_t,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "bool": ctypes.c_bool,
}
_LOADED: dict[str, NativeLibrary] = {}
# how many times compiled functions were called: the evaluator's proof that a candidate ran its own code
CALLS = [0]


class NativeBuildError(RuntimeError):
    """The kernel did not compile; ``log`` holds the compiler output."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


def cache_root() -> Path:
    root = os.environ.get("KFORGE_BUILD_CACHE")
    if root:
        return Path(root)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kforge-desktop" / "builds"


def _arch_tag(lang: str) -> str:
    if lang != "cuda":
        return "cpu"
    arch = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if not arch and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        arch = f"{major}.{minor}"
        os.environ["TORCH_CUDA_ARCH_LIST"] = arch  # cpp_extension reads it: build for this device only
    return "sm" + (arch or "unknown").replace(".", "").replace(" ", "_").replace(";", "_")


def source_digest(source: str, lang: str) -> str:
    h = hashlib.sha256()
    for part in (lang, _arch_tag(lang), torch.__version__, repr(_flags(lang)), source):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


_DECL_RE = re.compile(r'extern\s+"C"\s+(?:__host__\s+)?[\w:]+\s+(?P<name>\w+)\s*\([^)]*\)\s*;')


def _definitions_of_declared(source: str):
    """Definitions without ``extern "C"`` of functions declared ``extern "C"`` before them: C++ gives
    them C linkage from the declaration (``extern "C" void f(...);`` then ``void f(...) {...}``)."""
    for decl in _DECL_RE.finditer(source):
        name = re.escape(decl.group("name"))
        yield from re.finditer(rf'(?<!")\s(?P<ret>[\w:]+)\s+(?P<name>{name})\s*\((?P<args>[^)]*)\)\s*\{{',
                               source[decl.end():])


def parse_exports(source: str) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """``extern "C"`` function definitions: name -> (return type, [(C type, arg name)])."""
    out: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    for m in [*_FUNC_RE.finditer(source), *_definitions_of_declared(source)]:
        args: list[tuple[str, str]] = []
        raw = m.group("args").strip()
        if raw and raw != "void":
            for piece in raw.split(","):
                piece = " ".join(piece.replace("__restrict__", "").replace("*", " * ").split())
                words = piece.split(" ")
                name = words[-1]
                ctype = " ".join(words[:-1])
                args.append((ctype, name))
        out[m.group("name")] = (m.group("ret"), args)
    return out


def _ctype_for(ctype: str):
    if "*" in ctype or ctype.endswith("cudaStream_t") or ctype == "void *":
        return ctypes.c_void_p
    base = ctype.replace("const ", "").replace("unsigned long", "size_t").strip()
    if base in _CTYPES:
        return _CTYPES[base]
    raise NativeBuildError(f"unsupported argument type {ctype!r} in an extern \"C\" function")


class NativeFunction:
    """Calls one exported function; tensors become pointers, the CUDA stream is passed for you."""

    def __init__(self, fn, name: str, args: list[tuple[str, str]], lang: str, ret: str = "void") -> None:
        self._fn = fn
        # a CUDA launcher that returns its cudaError_t (or int) has it checked after every call
        self._check = lang == "cuda" and ret in ("int", "cudaError_t")
        fn.restype = ctypes.c_int if ret in ("int", "cudaError_t") else None
        self.name = name
        self._kinds = []
        argtypes = []
        for ctype, _ in args:
            argtypes.append(_ctype_for(ctype))
            if ctype.endswith("cudaStream_t"):
                self._kinds.append("stream")
            elif "*" in ctype:
                self._kinds.append("ptr")
            else:
                self._kinds.append("value")
        fn.argtypes = argtypes
        self._n_user = sum(k != "stream" for k in self._kinds)
        self._lang = lang

    def __call__(self, *values):
        CALLS[0] += 1
        if len(values) != self._n_user:
            raise TypeError(f"{self.name}() takes {self._n_user} arguments, got {len(values)}")
        it = iter(values)
        call = []
        for kind in self._kinds:
            if kind == "stream":
                call.append(torch.cuda.current_stream().cuda_stream)
                continue
            v = next(it)
            if kind == "ptr":
                if isinstance(v, torch.Tensor):
                    if not v.is_contiguous():
                        raise ValueError(f"{self.name}(): tensor arguments must be contiguous")
                    want_cuda = self._lang == "cuda"
                    if v.is_cuda != want_cuda:
                        raise ValueError(f"{self.name}(): tensor on {v.device}, kernel built for {self._lang}")
                    v = v.data_ptr()
                call.append(ctypes.c_void_p(v))
            else:
                call.append(v.item() if isinstance(v, torch.Tensor) else v)
        result = self._fn(*call)
        if self._check and result:
            raise RuntimeError(f"CUDA error {result} from {self.name}() (a kernel launch failed)")
        return result


class NativeLibrary:
    def __init__(self, path: Path, exports, lang: str, build_s: float, cached: bool, log: str) -> None:
        self.path = path
        self.build_s = build_s
        self.cached = cached
        self.log = log
        self._cdll = ctypes.CDLL(str(path))
        self.functions = {}
        for name, (ret, args) in exports.items():
            self.functions[name] = NativeFunction(getattr(self._cdll, name), name, args, lang, ret)

    def __getattr__(self, name: str):
        try:
            return self.__dict__["functions"][name]
        except KeyError:
            raise AttributeError(f"kernel library exports no function {name!r}") from None


class _DirLock:
    """An flock on the build folder: released by the OS when a killed build's process dies, so a
    stale lock can never wedge later builds (torch's own ``lock`` file is removed under it)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __enter__(self):
        self.folder.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.folder / ".kforge.lock", os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        stale = self.folder / "lock"
        if stale.exists():
            stale.unlink()
        return self

    def __exit__(self, *exc):
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)


# a function that falls off its end without the value it promised crashes the worker at run time
# (seen: a model edit turned `void scale_row` into `float scale_row` and kept no return); as an error
# the compiler names the function and the line, which a repair can act on
STRICT_CFLAGS = ["-Werror=return-type"]

# A float compare may raise the IEEE "invalid" flag, so without this GCC keeps every `x < a ? a : x` of a
# loop a branch and vectorizes none of it: the exemplars' fast_exp (two clamps) ran scalar, and a lowered
# log_softmax seed took 0.74 ms against 0.20 ms eager (GCC 12, Zen 3). Nothing reads the FP flags and no
# value changes (a NaN compares as before; unlike -ffast-math this assumes nothing about NaN or infinity).
VECTOR_CFLAGS = ["-fno-trapping-math"]


def _flags(lang: str) -> dict:
    cflags = ["-O3", "-std=c++17", "-fopenmp", *STRICT_CFLAGS, *VECTOR_CFLAGS]
    if os.uname().machine in ("x86_64", "aarch64"):
        cflags.append("-march=native" if os.uname().machine == "x86_64" else "-mcpu=native")
    return {
        "extra_cflags": cflags,
        "extra_ldflags": ["-fopenmp"],
        "extra_cuda_cflags": ["-O3", "--expt-relaxed-constexpr", "-lineinfo"],
    }


def build_native(source: str, lang: str = "cpp", verbose: bool = False) -> NativeLibrary:
    """Build (or fetch from the cache) the shared library for ``source``; ``lang`` is cpp or cuda."""
    if lang not in ("cpp", "cuda"):
        raise ValueError("lang must be 'cpp' or 'cuda'")
    exports = parse_exports(source)
    if not exports:
        raise NativeBuildError('the kernel source defines no extern "C" function to call')
    digest = source_digest(source, lang)
    if digest in _LOADED:
        return _LOADED[digest]
    folder = cache_root() / digest
    name = f"kf_{digest}"
    so = folder / f"{name}.so"
    ok = folder / "BUILD_OK"
    t0 = time.perf_counter()
    cached = True
    log = ""
    with _DirLock(folder):
        if not (ok.exists() and so.exists()):
            cached = False
            src = folder / ("kernel.cu" if lang == "cuda" else "kernel.cpp")
            src.write_text(source)
            log = _run_build(name, src, folder, lang, verbose)
            ok.write_text(log)
        else:
            log = ok.read_text()
    lib = NativeLibrary(so, exports, lang, time.perf_counter() - t0, cached, log)
    _LOADED[digest] = lib
    return lib


def _run_build(name: str, src: Path, folder: Path, lang: str, verbose: bool) -> str:
    import io
    import subprocess

    from torch.utils import cpp_extension

    if lang == "cuda" and not os.environ.get("CUDA_HOME") and cpp_extension.CUDA_HOME is None:
        for guess in ("/usr/local/cuda", "/opt/cuda"):
            if os.path.exists(os.path.join(guess, "bin", "nvcc")):
                os.environ["CUDA_HOME"] = guess
                cpp_extension.CUDA_HOME = guess
                break
    buf = io.StringIO()
    try:
        cpp_extension.load(
            name=name,
            sources=[str(src)],
            build_directory=str(folder),
            is_python_module=False,
            verbose=verbose,
            with_cuda=(lang == "cuda"),
            **_flags(lang),
        )
    except (RuntimeError, subprocess.CalledProcessError, OSError) as err:
        text = str(err)
        out = getattr(err, "output", None)
        if out:
            text += "\n" + (out.decode(errors="replace") if isinstance(out, bytes) else str(out))
        raise NativeBuildError("the kernel did not compile", _trim_log(text)) from None
    return buf.getvalue()


def _trim_log(text: str, limit: int = 12000) -> str:
    lines = [ln for ln in text.splitlines() if "ninja: build stopped" not in ln]
    text = "\n".join(lines)
    return text if len(text) <= limit else text[:limit // 2] + "\n...\n" + text[-limit // 2:]


def load_native(source: str, lang: str = "cpp") -> NativeLibrary:
    """What a candidate calls at import time."""
    return build_native(source, lang)


def syntax_check(source: str, lang: str = "cpp", timeout: float = 30.0) -> str | None:
    """Compile ``source`` with ``-fsyntax-only`` (no torch headers: ~0.2 s); the errors, or None.

    Lets a repair loop catch most compile errors before a real build. For CUDA it needs nvcc.
    """
    import subprocess
    import tempfile

    if not parse_exports(source):
        return 'the kernel source defines no extern "C" function to call'
    suffix = ".cu" if lang == "cuda" else ".cpp"
    with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False) as fh:
        fh.write(source)
        path = fh.name
    try:
        if lang == "cuda":
            nvcc = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
            if not os.path.exists(nvcc):
                return None  # cannot check here; the real build will tell
            cmd = [nvcc, "-std=c++17", "--expt-relaxed-constexpr", "-c", "-o", os.devnull, path]
        else:
            cmd = [os.environ.get("CXX", "g++"), "-std=c++17", "-fopenmp", *STRICT_CFLAGS, "-fsyntax-only", path]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"syntax check could not run: {err}"
        if proc.returncode == 0:
            return None
        return _trim_log(proc.stderr.replace(path, "kernel" + suffix), 4000)
    finally:
        os.unlink(path)
