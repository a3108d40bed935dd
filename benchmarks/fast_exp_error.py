"""How exact the exemplars' vectorizable exp is: ``fast_exp`` against double-precision exp, every float.

Every CPU seed that computes an exp (softmax, log-softmax, cross-entropy, SiLU, sigmoid, GELU's tanh) calls the
row-softmax exemplar's ``fast_exp``. This takes its definition from ``resources/exemplars/cpp/row_softmax.cpp``
(or ``--source FILE``), builds it with the compiler flags the evaluator uses, and compares it with ``exp``
in double precision at every float in [-87, 89] where both are finite (about 2.1 billion values; seconds), counts
the floats whose exp overflows a float and fast_exp's does not (none may) and those where fast_exp gives +inf a
little early (its 2^n holds up to 2^127: from 88.37), then shows the edges: -inf, below -87, above 89, +inf and
NaN. ``fast_exp`` is ``fast_exp_neg`` (the exp a softmax's seed calls on a value minus its row's maximum, exact up to
88 and no further) wherever its argument is at most 88: the two must agree bit for bit at every float up to 88, the
edges below included.

    python benchmarks/fast_exp_error.py
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MAIN = r"""
#include <cstdio>
int main() {
    double worst = 0.0, at = 0.0;
    long early = 0, late = 0;  // floats where fast_exp overflows and exp does not; where exp overflows and it does not
    float first = 0.0f;
    for (float x = -87.0f; x <= 89.0f; x = std::nextafter(x, 100.0f)) {
        const double e = std::exp((double)x);
        const float got = fast_exp(x);
        if (e > FLT_MAX && !std::isinf(got)) ++late;
        if (e <= FLT_MAX && std::isinf(got) && !early++) first = x;
        if (e > FLT_MAX || std::isinf(got)) continue;
        const double rel = std::fabs((double)got - e) / e;
        if (rel > worst) { worst = rel; at = x; }
    }
    std::printf("max relative error over every float in [-87, 89] where both are finite: %.3g (at x = %.7g)\n", worst, at);
    std::printf("floats whose exp overflows a float and fast_exp's does not: %ld; floats where fast_exp gives +inf a "
                "little early: %ld, from x = %.7g\n", late, early, first);
    std::printf("fast_exp(-inf) = %g, fast_exp(-100) = %g, fast_exp(100) = %g, fast_exp(inf) = %g, fast_exp(nan) = %g\n",
                fast_exp(-INFINITY), fast_exp(-100.0f), fast_exp(100.0f), fast_exp(INFINITY), fast_exp(NAN));
    long differ = 0, checked = 0;
    auto compare = [&](float x) {
        const float a = fast_exp(x), b = fast_exp_neg(x);
        differ += std::memcmp(&a, &b, sizeof a) != 0, ++checked;
    };
    const float edges[] = {-INFINITY, -1e30f, -100.0f, -87.0f, 88.0f, NAN};
    for (float x : edges) compare(x);
    for (float x = -87.0f; x <= 88.0f; x = std::nextafter(x, 100.0f)) compare(x);
    std::printf("fast_exp_neg against fast_exp, every float in [-87, 88] and the edges below it: %ld of %ld differ\n",
                differ, checked);
    return differ != 0 || late != 0;
}
"""


def main(argv: list[str] | None = None) -> int:
    from kforge_desktop.kernels.native import _flags  # the evaluator's own compiler flags for C++

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path, default=ROOT / "resources" / "exemplars" / "cpp" / "row_softmax.cpp")
    args = ap.parse_args(argv)
    text = args.source.read_text()
    found = [re.search(rf"static inline float {name}\(float x\) \{{.*?\n\}}\n", text, re.S)
             for name in ("fast_exp_neg", "fast_exp")]
    if not all(found):
        print(f"{args.source}: no fast_exp_neg and fast_exp definitions", file=sys.stderr)
        return 1
    program = "#include <cfloat>\n#include <cmath>\n#include <cstdint>\n#include <cstring>\n" + "".join(m.group(0) for m in found) + MAIN
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "fast_exp.cpp", Path(tmp) / "fast_exp"
        src.write_text(program)
        subprocess.run(["g++", *_flags("cpp")["extra_cflags"], str(src), "-o", str(exe)], check=True)
        print(f"{args.source.relative_to(ROOT) if args.source.is_relative_to(ROOT) else args.source}:")
        return subprocess.run([str(exe)]).returncode


if __name__ == "__main__":
    sys.exit(main())
