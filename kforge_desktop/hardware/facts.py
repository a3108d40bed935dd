"""Facts about the device a search targets (CUDA properties or the CPU), plain and cacheable."""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import asdict, dataclass

import torch


@dataclass(frozen=True)
class DeviceFacts:
    device: str  # "cuda" | "cpu"
    name: str
    arch: str  # "sm_90" | "x86_64" | "aarch64"
    cores: int  # SMs on a GPU, logical cores on a CPU
    memory_gb: float
    l2_bytes: int = 0
    smem_per_block: int = 0
    smem_per_sm: int = 0
    warp_size: int = 0
    max_threads_per_block: int = 0
    simd: str = ""  # CPU vector extensions (avx2, avx512f, neon, …)

    def to_dict(self) -> dict:
        return asdict(self)

    def prompt_lines(self) -> str:
        """The facts an LLM needs to write a kernel for this device, as a short block of text."""
        if self.device == "cuda":
            return (
                f"GPU: {self.name} ({self.arch}), {self.cores} SMs, warp size {self.warp_size}, "
                f"max {self.max_threads_per_block} threads/block, {self.smem_per_block // 1024} KiB shared "
                f"memory per block ({self.smem_per_sm // 1024} KiB per SM), L2 {self.l2_bytes / 2**20:.0f} MiB, "
                f"{self.memory_gb:.0f} GB memory."
            )
        return (
            f"CPU: {self.name} ({self.arch}), {self.cores} logical cores, SIMD: {self.simd or 'unknown'}, "
            f"{self.memory_gb:.0f} GB memory. Use OpenMP (#pragma omp parallel for) across independent rows."
        )


def _cpu_name_and_flags() -> tuple[str, str]:
    name, flags = platform.processor() or platform.machine(), ""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name") and name in ("", platform.machine(), platform.processor()):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith(("flags", "Features")) and not flags:
                    have = set(line.split(":", 1)[1].split())
                    wanted = ["avx512f", "avx512bw", "avx2", "fma", "avx", "sse4_2", "neon", "asimd", "sve"]
                    flags = " ".join(w for w in wanted if w in have)
    except OSError:
        pass
    return name, flags


@functools.cache
def device_facts(device: str = "cpu") -> DeviceFacts:
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device is available to this process")
        idx = torch.cuda.current_device()
        p = torch.cuda.get_device_properties(idx)
        return DeviceFacts(
            device="cuda",
            name=p.name,
            arch=f"sm_{p.major}{p.minor}",
            cores=p.multi_processor_count,
            memory_gb=p.total_memory / 1e9,
            l2_bytes=int(getattr(p, "L2_cache_size", 0)),
            smem_per_block=int(getattr(p, "shared_memory_per_block", 48 * 1024)),
            smem_per_sm=int(getattr(p, "shared_memory_per_multiprocessor", 0)),
            warp_size=int(getattr(p, "warp_size", 32)),
            max_threads_per_block=int(getattr(p, "max_threads_per_block", 1024)),
        )
    name, flags = _cpu_name_and_flags()
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    except (ValueError, OSError):
        mem = 0.0
    return DeviceFacts(
        device="cpu", name=name, arch=platform.machine(), cores=os.cpu_count() or 1, memory_gb=mem, simd=flags
    )


def software_record(device: str = "cpu") -> dict:
    """What verdicts were measured on: stored with a session so another machine can tell."""
    rec = {
        "host": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "",
        "device": device,
    }
    facts = device_facts(device)
    rec["device_name"] = facts.name
    rec["arch"] = facts.arch
    if device.startswith("cuda"):
        try:
            import subprocess

            rec["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=10,
            ).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            rec["driver"] = ""
    return rec
