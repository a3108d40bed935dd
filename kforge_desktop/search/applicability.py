"""Which directives can change a kernel (``applicable``), read from the kernel's own code: its loops, its sums
and maxima, the divisions a loop repeats. Asked for a change a kernel cannot take (rows parallelized again, an
epilogue fused into one pass), the default model answers with the same code or breaks it; each rule below cites
the record that made it one. ``directives.py`` chooses among the directives that apply and words them.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ..csource.autofix import DOUBLE_LITERAL
from ..csource.comments import strip_cpp_comments
from ..csource.items import ENTRY, split_items
from ..csource.mends import holds_no_loop, innermost_loops, loop_body
from .indexing import POOL_OPS

_STEPPED_LOOP = re.compile(r"for\s*\([^;]*;[^;]*;\s*\w+\s*\+=\s*(?:[2-9]|\d\d+)\s*\)")
_STORE = re.compile(r"\b\w+\s*\[[^\]]*\]\s*(?:[-+*/]?=)(?!=)")


def unrollable(function: str) -> bool:
    """Whether a function has a sum loop to unroll: it adds (``+=`` or an OpenMP ``+`` reduction), it
    stores nothing (asked to unroll a loop that also writes the output, softmax's ``exp_row``, the
    default model gave 0 correct kernels in 26 answers: ``benchmarks/directive_record.py``), and no
    loop of it steps by more than one already (asked to unroll an unrolled loop, the model rewrote it
    into another unrolled loop: a correct candidate that changes nothing).

    A sum that is an OpenMP SIMD reduction already is unrolled too. Such edits ran a median 0.69x the kernel
    they edited (``directive_record.py --speed``), but they were correct 16 of 23 times on the dev half, and a
    slower correct kernel costs the search's best nothing. Without the request (2a224a5) a search of kernels
    whose sums are all SIMD reductions had little else to ask: on the dev half at 4692612 log_softmax and
    smoothed_cross_entropy fell from 21 of 24 correct to 9 of 18 (docs/benchmarks.md, twenty-fifth measurement)."""
    code = strip_cpp_comments(function)
    return (bool(re.search(r"reduction\s*\(\s*\+|\+=", code)) and not _STEPPED_LOOP.search(code)
            and not _STORE.search(code))


_SUM_INTO = re.compile(r"(?<![\w\].])(\w+)\s*\+=")
_MAX_INTO = re.compile(r"\b(\w+)\s*=\s*(?:std::)?(?:max|fmaxf?)\s*\(\s*\1\b|\b(\w+)\s*=\s*[^;?]*\?[^;:]*:\s*\2\s*;")


def accumulators(function: str) -> tuple[list[str], list[str]]:
    """The scalars a function's loops sum into (``s += ...``) and take a maximum into (``m = std::max(m,
    ...)``, ``m = e > m ? e : m``), each list in order of first use; a store into an array, or a loop's own
    step (``c += 4``), is neither."""
    code = re.sub(r"\bfor\s*\([^;]*;[^;]*;[^)]*\)", "for ()", strip_cpp_comments(function))
    sums = list(dict.fromkeys(_SUM_INTO.findall(code)))
    maxes = list(dict.fromkeys(a or b for a, b in _MAX_INTO.findall(code)))
    return sums, [m for m in maxes if m not in sums]


_EXP_CALL = re.compile(r"\b(?:fast_exp(?:_neg)?|(?:std::)?expf?)\s*\(")
_PLAIN_LOOP = re.compile(r"\bfor\s*\(\s*(?:int64_t|int|long|size_t)\s+(\w+)\s*=\s*0\s*;\s*\1\s*<\s*(\w+)\s*;"
                         r"\s*(?:\+\+\s*\1|\1\s*\+\+|\1\s*\+=\s*1)\s*\)")


def _one_loop(function: str, stores: bool = False) -> tuple[str, list[str]] | None:
    """(bound, body statements) of a function's one loop from 0 (``for (int64_t c = 0; c < cols; ++c)``), its
    variable renamed ``c`` in the statements; None for a function of no loop or several, a loop of nested blocks,
    or, unless ``stores``, one that stores into an array (a row written as it is read is not a statistic alone)."""
    code = strip_cpp_comments(function)
    heads = list(_PLAIN_LOOP.finditer(code))
    if len(heads) != 1 or len(re.findall(r"\bfor\s*\(", code)) != 1:
        return None
    head = heads[0]
    var, bound = head.group(1), head.group(2)
    body = loop_body(code, head.start())[head.end() - head.start():].strip()  # braced, or one statement
    body = body[1:-1] if body.startswith("{") else body
    if "{" in body or (_STORE.search(body) and not stores) or (var != "c" and re.search(r"\bc\b", body)):
        return None
    return bound, [re.sub(rf"\b{var}\b", "c", st.strip()) + ";" for st in body.split(";") if st.strip()]


def _split_args(text: str) -> list[str]:
    """A call's or a signature's comma-separated parts (commas inside parentheses or brackets kept)."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "([" and 1 or ch in ")]" and -1 or 0
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return parts + [cur.strip()] if cur.strip() else parts


def _renamed(statement: str, names: dict[str, str]) -> str:
    """``statement`` with each whole word of ``names`` replaced at once (a parameter by its call's argument)."""
    if not names:
        return statement
    return re.sub(r"\b(" + "|".join(map(re.escape, names)) + r")\b", lambda m: names[m.group(1)], statement)


class ReferenceParts(NamedTuple):
    """A kernel's row maximum and sum of exponentials, each one helper's one loop, called one after the other
    by the entry point (``reference_parts``), in the entry point's names."""

    m: str  # the entry point's maximum (``const float m = row_max(...)``)
    s: str  # its sum (``const float s = exp_row(..., m, ...)``)
    bound: str  # the row length the two loops run to, as the entry point passes it
    max_body: list[str]  # the maximum's loop body, its accumulator ``bm``
    sum_body: list[str]  # the sum's loop body, ``s += ...`` (the stores of a row of exps included)
    calls: str  # the entry point's lines that call the helpers (and a guard's between them)
    at: str = ""  # the value the sum is taken at where a guard of the maximum lies between the calls, else ""
    guard: str = ""  # that value as an expression of ``m`` (every line of the guard inlined)


_CALL_LINE = r"^[ \t]*(?:const\s+)?(?:float|auto)\s+(\w+)\s*=\s*{name}\s*\(([^;]*)\)\s*;[ \t]*\n"
# at most three lines between the two calls that compute a value from the maximum alone: a logsumexp's
# decomposition takes the exps at ``where(|max| == inf, 0, max)``, so that a row of infinities gives what eager gives
_GUARD_LINES = r"((?:[ \t]*const\s+(?:float|bool|auto)\s+\w+\s*=\s*[^;]*;[ \t]*\n){0,3})"
_GUARD_WORDS = {"fabsf", "fabs", "std", "isinf", "isnan", "isfinite", "INFINITY", "true", "false"}
_SELECT = re.compile(r"\(?\s*(\w+)\s*\?\s*([^:]+?)\s*:\s*([^)]+?)\s*\)?")
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d*)?(?:e[-+]?\d+)?f?")


def reference_parts(kernel: str) -> ReferenceParts | None:
    """The row maximum and the sum of exponentials at it of a kernel that computes each in one helper's one loop,
    the entry point calling the two one after the other (``const float m = row_max(...);`` then ``const float s
    = row_sum(..., m, ...);``): the lowered softmax-family seeds (log-softmax, cross-entropy, softmax), and the
    row-softmax exemplars, whose sum loop also stores the exps into the output row. The loop bodies come in the
    entry point's names (each helper parameter replaced by what the call passes). None for any other kernel."""
    items = [it for it in split_items(kernel) if it.kind == "function"]
    entry = next((strip_cpp_comments(it.text) for it in items if it.name == ENTRY), "")
    helpers = {it.name: strip_cpp_comments(it.text) for it in items if it.name != ENTRY}
    for s_name, s_fn in helpers.items():
        sums, _ = accumulators(s_fn)
        s_loop = _one_loop(s_fn, stores=True) if len(sums) == 1 else None
        if not s_loop or not _EXP_CALL.search(" ".join(s_loop[1])):
            continue
        if len([st for st in s_loop[1] if re.match(rf"{sums[0]}\s*\+=", st)]) != 1:
            continue
        for m_name, m_fn in helpers.items():
            _, maxes = accumulators(m_fn)
            m_loop = _one_loop(m_fn) if len(maxes) == 1 and m_name != s_name else None
            if not m_loop or len([st for st in m_loop[1] if re.match(rf"{maxes[0]}\s*=", st)]) != 1:
                continue
            pair = re.search(_CALL_LINE.format(name=m_name) + _GUARD_LINES + _CALL_LINE.format(name=s_name), entry,
                             re.M)
            if not pair:
                continue
            m, m_args, guard_lines, s, s_args = pair.groups()
            at, guard = _guard(m, guard_lines, entry[pair.end():]) if guard_lines else ("", "")
            m_names, s_names = _arguments(m_fn, m_args), _arguments(s_fn, s_args)
            if m_names is None or s_names is None or (at or m) not in _split_args(s_args) or (guard_lines and not at):
                continue  # the sum is taken at the maximum, or at the guard's value of it
            m_bound, s_bound = m_names.get(m_loop[0], m_loop[0]), s_names.get(s_loop[0], s_loop[0])
            if m_bound != s_bound:
                continue
            max_body = [_renamed(st, {**m_names, maxes[0]: "bm"}) for st in m_loop[1]]
            sum_body = [re.sub(rf"^{sums[0]}\s*\+=", f"{s} +=", _renamed(st, s_names)) for st in s_loop[1]]
            return ReferenceParts(m, s, m_bound, max_body, sum_body, pair.group(0), at, guard)
    return None


def _guard(m: str, lines: str, after: str) -> tuple[str, str]:
    """The value a guard computes from the maximum ``m`` alone (its last line's name) and its expression of ``m``,
    each earlier line inlined; ("", "") unless the guard is a select between ``m`` and a constant (a logsumexp's
    ``v_where = (v_eq ? 0.0f : v_amax)``), so that the sum is taken at the maximum wherever it is finite, and unless
    nothing after the sum's call (``after``) reads ``m`` or the guard's other lines."""
    parsed = [re.match(r"\s*const\s+\w+\s+(\w+)\s*=\s*([^;]*);", ln) for ln in lines.strip().splitlines()]
    named, known = {}, {m}
    for found in parsed:
        name, expr = found.groups()
        if set(re.findall(r"\b[A-Za-z_]\w*\b", expr)) - known - _GUARD_WORDS:
            return "", ""
        for earlier, value in named.items():
            expr = re.sub(rf"\b{earlier}\b", value if re.fullmatch(r"[\w:]+(?:\([^()]*\))?|\(.*\)", value)
                          else f"({value})", expr)
        named[name] = expr.strip()
        known.add(name)
    at = parsed[-1].group(1)
    select = _SELECT.fullmatch(parsed[-1].group(2).strip())
    if not select or sorted([_NUMBER.fullmatch(x) is not None for x in select.groups()[1:]]) != [False, True]:
        return "", ""
    if m not in select.groups()[1:] or any(re.search(rf"\b{n}\b", after) for n in [m, *list(named)[:-1]]):
        return "", ""
    return at, named[at]


def _arguments(function: str, args: str) -> dict[str, str] | None:
    """Each parameter of ``function`` mapped to what ``args`` (a call's) passes for it, a name or a parenthesized
    expression; None when the counts differ."""
    head = re.match(r"[^(]*\(([^)]*)\)", function.strip())
    params = [re.findall(r"\w+", p)[-1] for p in _split_args(head.group(1))] if head else []
    passed = _split_args(args)
    if len(params) != len(passed) or not all(params):
        return None
    return {p: a if re.fullmatch(r"\w+", a) else f"({a})" for p, a in zip(params, passed) if p != a}


def applicable(key: str, kernel: str, aten_ops: tuple[str, ...] = ()) -> bool:
    """Whether asking for directive ``key`` on this kernel can change anything: a kernel that already
    runs its rows in parallel gets no "parallelize the rows" (the model answers with the same code, a
    duplicate that costs a minute of generation and no candidate), a lone operator has no epilogue."""
    if key == "openmp_rows":
        return "omp parallel" not in kernel
    if key == "simd_inner":  # an inner loop without a pragma (the rows' parallel loop is not inner), other than a
        # fill: a loop that stores one constant is a memset to the compiler, a pragma changes nothing there. Asked
        # of a masked softmax's finish_row (a SIMD scaling loop, then the masked rest of the row set to 0), the
        # default model dropped the fill, 3 of 3 edits ("130048 of 262144 output values were never assigned";
        # dev: causal_scaled_softmax, generalize_r56da)
        return loop_without_simd(kernel)
    if key == "fuse_epilogue":  # a chain of operators, in more than one pass (one pass has nothing to fuse:
        # asked, the default model changed the formula of an elementwise chain; dev: quick_gelu)
        chain = len({op.lstrip("_").removeprefix("native_") for op in aten_ops}) > 1 if aten_ops else True
        return chain and _loops(kernel) >= 3
    if key == "hoist_invariants":  # a division inside a loop by a value the loop does not change; with
        # nothing of the kind the default model invented one (an array of reciprocals written through a
        # const pointer, a constant factor on the output; the record is in docs/benchmarks.md). In the entry
        # point, which the edit rewrites (``edit_targets.ENTRY_DIRECTIVES``)
        return bool(entry_divisions(kernel))
    if key == "unroll_accumulators":  # a sum loop not unrolled yet, in a helper when there are helpers
        functions = [it for it in split_items(kernel) if it.kind == "function"]
        helpers = [it for it in functions if it.name != ENTRY]  # the scaffold's entry point
        return any(unrollable(it.text) for it in (helpers or functions))
    if key == "reference_max":  # a row maximum and a sum of exponentials, each a helper's loop (``reference_parts``)
        return reference_parts(kernel) is not None
    if key == "single_pass":  # passes to fuse: a statistic accumulated over a row, and the loops to fuse. A pooling
        # has none: its sums and maxima are each output's own window. Asked, the default model dropped the loop over
        # the outputs ("wrote 1 of the 512 values of each row"): 0 of 5 dev edits correct (max_pool_overlap,
        # moving_average). Nor does a kernel that reads each row in one loop (a running sum, an elementwise chain,
        # however its rows are blocked): 0 of 12 such recorded edits correct (benchmarks/directive_record.py --passes)
        code = re.sub(r"\bfor\s*\([^;]*;[^;]*;[^)]*\)", "for ()", strip_cpp_comments(kernel))  # no loop steps
        accumulates = re.search(r"\b\w+\s*\+=|\b(\w+)\s*=\s*(std::)?(max|fmaxf?)\s*\(\s*\1\b", code)
        return (bool(accumulates) and _loops(kernel) >= 3 and innermost_loops(kernel) >= 2
                and not _pooling(aten_ops) and reference_parts(kernel) is None)  # the max-and-sum: reference_max
    if key == "cache_blocking":  # blocks of rows; a channels-layout kernel has groups, not rows
        # and data to reuse: a kernel that reads each value once (an elementwise chain) gains nothing from
        # blocks, and asked for them the default model dropped the loop over the columns (dev: quick_gelu,
        # bias_leaky_relu_scale). Nor does a pooling: each output reads its own window of one row, and the row
        # loop already reads a row's windows in order. Asked, the default model dropped the loop over the outputs
        # ("wrote 1 of the 1024 values of each row"): 5 of 20 such dev edits correct, none faster than the seed
        # (0.37-1.01x; dev: max_pool_overlap, moving_average)
        return ("rows" in kernel and not re.search(r"\b(tile|r0|block_rows)\b", kernel)  # not blocked already
                and any(accumulators(kernel)) and not _pooling(aten_ops))
    # CUDA: a change the kernel already has is no change (the exemplar seeds load float4 and reduce with
    # shuffles already; asked again, the default model hands the seed back unchanged)
    if key == "vectorized_loads":
        return "float4" not in kernel
    if key == "warp_reductions":
        return "__shfl" not in kernel and bool(re.search(r"__syncthreads|atomicAdd", kernel))
    if key == "online_softmax":  # a max and a sum of exponentials, in more than one pass
        return bool(re.search(r"\bexpf?\s*\(|__expf", kernel)) and "fmaxf" in kernel and "m_new" not in kernel
    if key == "grid_stride":  # a kernel of one thread per element (or per group of them), without a stride yet;
        # a kernel of one block per row has a grid of rows already: asked, the default model handed the row
        # seeds back unchanged (benchmarks/results/gpu_samples_r37)
        code = strip_cpp_comments(kernel)
        return "gridDim" not in code and bool(_THREAD_OWN_WORK.search(code))
    if key == "fusion":  # one launch has nothing to fuse: asked, the default model handed the one-launch
        # CUDA seeds back unchanged (benchmarks/results/gpu_samples_r35: the fusion edits). No launch at all is
        # a Triton module, whose forward may still run part of the chain in torch.
        return len(re.findall(r"<<<|\bcudaLaunchKernel(?:Ex)?\s*\(", strip_cpp_comments(kernel))) != 1
    if key == "shared_tiling":  # values read again from global memory: a kernel that holds its values in registers
        # (a local array) or in dynamic shared memory reads them once already; asked, the default model handed
        # such seeds back unchanged (benchmarks/results/gpu_samples_r37). Nor does a kernel with no sum or maximum
        # (an elementwise chain): it reads each value once, so there is nothing to stage. Asked, the default model
        # declared a variable-length __shared__ array or read past it (dev: bias_leaky_relu_scale, quick_gelu;
        # docs/results/h100_round27), as the C++ blocks above were asked of such chains and dropped columns
        # Nor does a kernel whose threads or warps each take their own row or output value, several to a block
        # (the lowered seeds): staging would need a slice of dynamic shared memory per warp, sized at the launch;
        # asked, the default model wrote one block-wide array for all of them (fixed or variable-length), and none
        # of its dev edits staged a row correctly (docs/benchmarks.md, thirty-ninth measurement)
        code = strip_cpp_comments(kernel)
        held = re.search(r"(?<!__shared__ )\bfloat4?\s+\w+\s*\[\s*\w+\s*\]", code) or "extern __shared__" in code
        return not held and not _THREAD_OWN_WORK.search(code) and any(accumulators(kernel))
    if key == "fast_math":
        code = strip_cpp_comments(kernel)
        return bool(re.search(r"(?<!\w)(expf?|sqrtf?|tanhf?|logf?)\s*\(|\b1\.0f?\s*/\s*sqrtf?", code))
    if key == "float_math":
        # doubles, double literals, or unqualified C math calls (std::exp on a float is float already)
        code = strip_cpp_comments(kernel)
        return bool(re.search(r"\bdouble\b|(?<![\w:])(exp|sqrt|tanh|log|pow)\s*\(", code) or DOUBLE_LITERAL.search(code))
    return True


# a loop body that stores one constant: `out[c] = 0.0f;`, `{ yr[c] = -INFINITY; }`
_FILL = re.compile(r"\s*(\{\s*)?\w+\s*\[[^\]]+\]\s*=\s*[-+]?(?:[\d.]+(?:e[-+]?\d+)?f?|INFINITY|NAN)\s*;(?(1)\s*\})")


def loop_without_simd(kernel: str, innermost: bool = False) -> bool:
    """Whether a loop of ``kernel`` (with ``innermost``: one that holds no other loop) has neither a ``simd`` nor a
    ``parallel`` pragma, other than a fill (a loop that stores one constant is a memset to the compiler)."""
    for m in re.finditer(r"(#pragma[^\n]*\n\s*)?for\s*\([^;]*;[^;]*;[^)]*\)", kernel):
        pragma = m.group(1) or ""
        if "simd" in pragma or "parallel" in pragma or _FILL.match(kernel, m.end()):
            continue
        if not innermost or holds_no_loop(kernel, m.start() + len(pragma)):
            return True
    return False


# a thread's (or a warp's) own unit of work from its global index: `blockIdx.x * blockDim.x + threadIdx.x`
_THREAD_OWN_WORK = re.compile(r"blockIdx\.[xyz]\s*\*\s*blockDim\.[xyz]|blockDim\.[xyz]\s*\*\s*(\(\w+\))?\s*blockIdx")


def _pooling(aten_ops: tuple[str, ...]) -> bool:
    return any(op.lstrip("_") in POOL_OPS for op in aten_ops)


def _loops(kernel: str) -> int:
    return len(re.findall(r"\bfor\s*\(", strip_cpp_comments(kernel)))


_DIVIDE_BY_NAME = re.compile(r"/\s*(?:\(\s*float\s*\)\s*)?([A-Za-z_]\w*)\b(?!\s*[\[(.:])")
_FOR_HEADER = re.compile(r"\bfor\s*\(([^;]*);([^;]*);[^)]*\)\s*$")


def hoistable_divisions(kernel: str) -> list[tuple[str, str, str]]:
    """(divisor, value, loop) for each name a loop over a row's values divides by that the loop does not change
    (neither its counter nor a name assigned in its body): each is one reciprocal to hoist out of the loop.
    ``value`` is the name set before the loop that the divisor holds: the divisor itself, or the name a copy in
    the body takes (``const float v_expand = v_clamp;``, the lowered seeds' broadcast of a row's statistic: such a
    division, the lowered l2_normalize's store loop, was not found, so hoisting was never asked of it; what hoisting
    it gains: benchmarks/hoisted_division.py). ``x[i] / (1.0f + e)`` divides by a value of
    each element, ``s / cols`` after the loop is outside any loop body, a division in the loop over the rows
    (``r < rows``) is once a row, and ``std::sqrt`` is no name. ``loop``: the header of the loop that divides,
    as written (``for (int64_t c = 0; c < cols; ++c)``)."""
    code = strip_cpp_comments(kernel)
    found: list[tuple[str, str, str]] = []
    for m in _DIVIDE_BY_NAME.finditer(code):
        name, at = m.group(1), m.start()
        depth, i = 0, at
        while i > 0:  # back to the `{` that opens the enclosing block
            i -= 1
            if code[i] == "}":
                depth += 1
            elif code[i] == "{":
                if depth == 0:
                    break
                depth -= 1
        line_start = code.rfind("\n", 0, at) + 1
        header = _FOR_HEADER.search(code[:i]) if code[i:i + 1] == "{" else None
        one_line = re.match(r"\s*for\s*\(([^;]*);([^;]*);[^)]*\)", code[line_start:at])
        loop = one_line or header  # the innermost: a loop on the division's own line, else the block's
        if loop is None or re.search(r"<\s*rows\b", loop.group(2)):
            continue
        counter = re.findall(r"\w+", loop.group(1))[-2:-1] if "=" in loop.group(1) else []
        body = code[line_start:at] if one_line else code[i:at]
        assigned = re.findall(r"\b(\w+)\s*(?:[-+*/]?=(?!=)|\+\+|--)", body)  # names the loop body sets
        copy = re.search(rf"\b(?:const\s+)?(?:float|auto)\s+{name}\s*=\s*([A-Za-z_]\w*)\s*;", body)
        # a copy, made in the body, of a value set before the loop: the value is the invariant
        value = copy.group(1) if copy and assigned.count(name) == 1 else name
        if value in counter or value in assigned:
            continue
        where = re.sub(r"\s+", " ", (loop.group(0) if one_line else header.group(0)).strip())
        if not any(f[:2] == (name, value) for f in found):
            found.append((name, value, where))
    return found


def entry_divisions(kernel: str) -> list[tuple[str, str, str]]:
    """``hoistable_divisions`` of the kernel's entry point (of the whole code when it has none)."""
    entry = next((it.text for it in split_items(kernel) if it.kind == "function" and it.name == ENTRY), kernel)
    return hoistable_divisions(entry)
