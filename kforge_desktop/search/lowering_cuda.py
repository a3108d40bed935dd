"""What the CUDA lowered forms have of their own (``search.lowering``, ``search.lowering_pool``): the
``__global__`` function around a row's (or an output value's) statements and the host function that
launches it. Every one strides over its work with the whole grid, so a launch-shape edit that rewrites
only the launch cannot leave values unwritten (docs/benchmarks.md, Round 27)."""

from __future__ import annotations

from .scaffold import Scaffold


def _wrap(name: str, scaffold: Scaffold, head: str, body: str, host: str, blocks: str, threads: int) -> str:
    """``head``, a kernel ``name`` whose ``body`` holds its loop, and the host function: ``host`` (its guard),
    then the launch of ``blocks`` blocks of ``threads`` threads. The kernel's pointers are ``__restrict__`` (the
    outputs are tensors of their own; inputs are only read): without it each load waits for the store before it,
    and the lowered relu, SiLU-mul, RMSNorm, LayerNorm and bias + GELU ran 1.10-1.24x slower on an H100
    (``benchmarks/lowered_seeds.py --device cuda``, docs/benchmarks.md)."""
    params = ", ".join(a.decl.replace("*", "* __restrict__", 1) for a in scaffold.args)
    call = ", ".join(a.name for a in scaffold.args)
    return (head + f"__global__ void {name}({params}) {{\n" + body + "\n}\n\n" + scaffold.signature() + " {\n"
            + host + f"    {name}<<<(unsigned)({blocks}), {threads}, 0, stream>>>({call});\n}}\n")


def rows_kernel(scaffold: Scaffold, head: str, row_body: str, last: bool) -> str:
    """Along the last dimension a warp a row (its lanes strided over the row); along a middle one a thread a
    row (neighbours read neighbouring values, r = o * linner + i)."""
    if last:
        body = ("    // a warp a row; the warps of the whole grid stride over the rows, so any grid covers them all\n"
                "    // (threads per block: a multiple of 32)\n"
                "    const int lane = threadIdx.x % 32;\n"
                "    const int64_t warps = ((int64_t)gridDim.x * blockDim.x + 31) / 32;\n"
                "    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {\n"
                + row_body + "\n    }")
        return _wrap("lowered_rows", scaffold, head, body, "    if (rows <= 0) return;\n", "(rows * 32 + 255) / 256", 256)
    body = ("    // one thread a row (neighbours read neighbouring values); the threads of the whole grid stride over\n"
            "    // the rows, so any grid covers them all\n"
            "    const int64_t threads = (int64_t)gridDim.x * blockDim.x;\n"
            "    for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < louter * linner; r += threads) {\n"
            "        const int64_t o = r / linner, i = r % linner;\n" + row_body + "\n    }")
    return _wrap("lowered_rows", scaffold, head, body, "    if (louter * linner <= 0) return;\n",
                 "(louter * linner + 127) / 128", 128)


def pool_kernel(scaffold: Scaffold, head: str, n: str, index: list[str], body: list[str]) -> str:
    """A thread an output value of ``n``: ``index`` finds its coordinates from ``t``, ``body`` computes it."""
    text = "\n".join(["    // one thread an output value; the threads of the whole grid stride over them, so any grid "
                      "covers them all",
                      "    const int64_t threads = (int64_t)gridDim.x * blockDim.x;",
                      f"    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < {n}; t += threads) {{"]
                     + ["        " + s for s in index + body] + ["    }"])
    return _wrap("lowered_pool", scaffold, head, text, f"    const int64_t n = {n};\n    if (n <= 0) return;\n",
                 "(n + 127) / 128", 128)
