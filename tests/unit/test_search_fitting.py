"""Exemplars match what the op computes, not one signature; where none fits, the prompt says what differs.

Every seed here is built for real and compared with its reference (our own exemplars, adapted)."""

from __future__ import annotations

import textwrap
import types

import pytest
import torch

from kforge_desktop.llm import prompts
from kforge_desktop.problem.problem import Problem
from kforge_desktop.search.differences import differences
from kforge_desktop.search.exemplars import (
    best_exemplar,
    exemplar_named,
    load_exemplars,
    missing_ops,
    rank,
    seed_exemplars,
)
from kforge_desktop.search.prompting import with_differences
from kforge_desktop.search.scaffold import build_scaffold


def problem(name: str, init: str, forward: str, inputs: str, init_inputs: str = "[]", imports: str = "") -> Problem:
    """A small KernelBench problem: ``init`` and ``forward`` bodies (indented as in the class)."""
    src = (f"import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n{imports}\n\n"
           f"class Model(nn.Module):\n    def __init__(self, *args):\n        super().__init__()\n{init}\n"
           f"{forward}\n\ndef get_inputs():\n    return {inputs}\n\ndef get_init_inputs():\n    return {init_inputs}\n")
    return Problem(name=name, source=textwrap.dedent(src), path=None)


def _outputs(p: Problem, code: str) -> tuple[torch.Tensor, torch.Tensor]:
    scaffold = build_scaffold(p)
    mod = p.load_module()
    torch.manual_seed(3)
    ref = mod.Model(*mod.get_init_inputs())
    module = types.ModuleType(f"fit_{p.name}")
    exec(compile(scaffold.module_source(code), p.name, "exec"), module.__dict__)  # our own exemplar, built for real
    torch.manual_seed(3)
    new = module.ModelNew(*mod.get_init_inputs())
    torch.manual_seed(4)
    inputs = mod.get_inputs()
    return ref(*inputs), new(*inputs)


NO_INIT = "        pass"
RMS_MODULE = '''
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
'''
CAUSAL_SCALED = problem("causal_scaled", "        self.scale = 0.125", '''
    def forward(self, scores):
        t = scores.shape[-1]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        return torch.softmax((scores * self.scale).masked_fill(causal, float("-inf")), dim=-1)''',
                        "[4.0 * torch.randn(2, 3, 32, 32)]")

# (problem, the family whose exemplar must be its seed, something the adapted kernel must say)
FITS = {
    "rms_norm in a submodule": (problem("rms_sub", "        self.norm = RMSNorm(64)", '''
    def forward(self, hidden):
        return self.norm(hidden)''', "[torch.randn(2, 8, 64)]", imports=RMS_MODULE), "rms_norm", "norm_eps"),
    "rms_norm of a whole-model target (weight an input, eps a literal)": (problem("rms_target", NO_INIT, '''
    def forward(self, x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-06) * weight''',
        "[torch.randn(2, 8, 64), torch.ones(64) + 0.1 * torch.randn(64)]"), "rms_norm", "const float eps = 1e-06f;"),
    "rms_norm without a weight": (problem("rms_bare", NO_INIT, '''
    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)''', "[torch.randn(16, 64)]"),
        "rms_norm", "yr[c] = xr[c] * scale;"),
    "layer_norm without affine parameters": (problem("ln_bare", NO_INIT, '''
    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), eps=1e-6)''', "[torch.randn(16, 64)]"), "layer_norm",
        "(xr[c] - mean) * inv_std;"),
    "a causal mask and a scale in front of a softmax": (CAUSAL_SCALED, "masked_softmax", "r % cols"),
    "a causal mask without a scale (tril == 0)": (problem("causal_plain", NO_INIT, '''
    def forward(self, att):
        t = att.size(-1)
        mask = torch.tril(torch.ones(t, t)) == 0
        return torch.softmax(att.masked_fill(mask, float("-inf")), dim=-1)''', "[torch.randn(3, 16, 16)]"),
        "masked_softmax", "const float scale = 1.0f;"),
    "a causal mask and a division by sqrt(d)": (problem("causal_div", NO_INIT, '''
    def forward(self, att):
        t = att.size(-1)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        return torch.softmax(att.masked_fill(mask, float("-inf")) / math.sqrt(64), dim=-1)''',
        "[torch.randn(3, 16, 16)]"), "masked_softmax", "const float scale = 0.125f;"),
    "LayerNorm of a residual sum": (problem("ln_residual", '''
        self.norm = nn.LayerNorm(96)
        with torch.no_grad():
            self.norm.weight.add_(0.1 * torch.randn(96))
            self.norm.bias.add_(0.1 * torch.randn(96))''', '''
    def forward(self, x, skip):
        return self.norm(x + skip)''', "[torch.randn(4, 96), torch.randn(4, 96)]"), "layer_norm_residual", "skip"),
    "exact GELU after a bias named b": (problem("gelu_b", "        self.b = nn.Parameter(0.1 * torch.randn(64))", '''
    def forward(self, x):
        return F.gelu(x + self.b)''', "[3.0 * torch.randn(16, 64)]"), "bias_gelu_erf", "gelu_erf"),
    "tanh GELU without a bias": (problem("gelu_tanh", NO_INIT, '''
    def forward(self, x):
        return F.gelu(x, approximate="tanh")''', "[3.0 * torch.randn(16, 64)]"), "gelu_bias", "gelu_tanh("),
    "a softmax at a temperature (x / T, T an attribute)": (problem("softmax_t", "        self.temperature = 0.7", '''
    def forward(self, logits):
        return torch.softmax(logits / self.temperature, dim=-1)''', "[torch.randn(16, 64)]"), "row_softmax",
        "const float scale = 1.0f / temperature;"),
    "a softmax of x times a literal": (problem("softmax_half", NO_INIT, '''
    def forward(self, x):
        return torch.softmax(x * 0.5, dim=-1)''', "[4.0 * torch.randn(16, 64)]"), "row_softmax",
        "const float scale = 0.5f;"),
    "RMSNorm of a residual sum": (problem("rms_skip", "        self.weight = nn.Parameter(1 + 0.1 * torch.randn(64))", '''
    def forward(self, x, skip):
        h = x + skip
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight''',
        "[torch.randn(16, 64), torch.randn(16, 64)]"), "rms_norm_residual", "skip + r * cols"),
    "SiLU alone (the SwiGLU exemplar without its b)": (problem("silu_only", NO_INIT, '''
    def forward(self, x):
        return F.silu(x)''', "[3.0 * torch.randn(16, 64)]"), "silu_mul", "out[i] = silu(a[i]);"),
    "GroupNorm without affine parameters": (problem("gn_bare", "        self.gn = nn.GroupNorm(4, 16, affine=False)", '''
    def forward(self, x):
        return self.gn(x)''', "[torch.randn(2, 16, 5, 5)]"), "group_norm", "inv_std"),
}


@pytest.mark.parametrize("case", sorted(FITS))
def test_an_exemplar_fits_what_the_op_computes_not_one_signature(case, build_cache):
    p, family, said = FITS[case]
    scaffold = build_scaffold(p)
    seeds = seed_exemplars(scaffold, p.source)
    assert seeds and seeds[0][0].name == family, [e.name for e, _ in seeds]
    code = seeds[0][1]
    assert said in code
    assert scaffold.signature() in code  # the problem's exact signature
    ref, new = _outputs(p, code)
    assert torch.allclose(ref, new, atol=1e-5, rtol=1e-4), (ref - new).abs().max()


@pytest.mark.parametrize("name", ["masked_softmax", "layer_norm_residual", "group_norm_silu", "bias_gelu_erf",
                                  "rms_norm_residual"])
def test_the_new_families_exist_on_both_languages_and_say_what_they_need(name):
    cpp, cuda = exemplar_named(name, "cpp"), exemplar_named(name, "cuda")
    assert cpp is not None and cuda is not None
    assert cpp.ops == cuda.ops or set(cpp.ops) >= set(cuda.ops)
    assert cpp.needs == cuda.needs and cpp.optional == cuda.optional
    assert "#pragma omp parallel for" in cpp.code  # OpenMP over independent rows or groups, like the others


def test_masked_softmax_is_never_seeded_for_a_softmax_without_a_mask():
    plain = problem("softmax_plain", NO_INIT, '''
    def forward(self, x):
        return torch.softmax(x, dim=-1)''', "[torch.randn(16, 64)]")
    scaled = problem("softmax_scaled", "        self.scale = 0.5", '''
    def forward(self, x):
        return torch.softmax(x * self.scale, dim=-1)''', "[torch.randn(16, 64)]")
    for p in (plain, scaled):
        scaffold = build_scaffold(p)
        assert "masked_softmax" not in [e.name for e, _ in seed_exemplars(scaffold, p.source, limit=5)]
        assert rank(scaffold, p.source)[0][1].name == "row_softmax"
    assert exemplar_named("masked_softmax", "cpp").needs == ("masked_fill|where",)


def test_without_an_exact_fit_the_nearest_family_guides_and_the_directive_says_what_differs():
    """A key-padding mask (an input, not causal): the masked softmax is shown, not seeded, and the
    prompt names the mask the reference applies. Without the masked family, the row softmax for a
    causal problem gets the sentence the model needs: columns j > i get -inf before the max."""
    padded = problem("padded", NO_INIT, '''
    def forward(self, scores, keep):
        return torch.softmax(scores.masked_fill(~keep[:, None, :], float("-inf")), dim=-1)''',
        "[torch.randn(2, 8, 8), torch.arange(8)[None, :] < torch.tensor([[5], [8]])]")
    scaffold = build_scaffold(padded)
    assert not seed_exemplars(scaffold, padded.source)
    ex, code = best_exemplar(scaffold, padded.source)
    assert ex.name == "masked_softmax"
    ctx = prompts.PromptContext(kind="whole", language="cpp", problem_source=padded.source,
                                signature=scaffold.signature(), arguments=scaffold.describe_args(), exemplar=code,
                                exemplar_about=ex.about, directive="Write a straightforward, correct kernel first.")
    user = prompts.render(with_differences(ctx, ex, scaffold, padded.source, "cpp"))[1]
    assert "unlike the example's causal mask" in user and "`~keep[:, None, :]`" in user and "`keep`" in user

    causal = build_scaffold(CAUSAL_SCALED)
    row = exemplar_named("row_softmax", "cpp")
    notes = differences(row, causal, CAUSAL_SCALED.source)
    assert any("causal mask" in n and "columns j > i get -inf before the max" in n for n in notes), notes
    assert missing_ops(row, causal) == ["triu", "masked_fill"]  # the row softmax takes a scale too

    log = problem("log_softmax", NO_INIT, '''
    def forward(self, x):
        return torch.log_softmax(x, dim=-1)''', "[torch.randn(16, 64)]")
    s = build_scaffold(log)
    ex, _ = best_exemplar(s, log.source)
    assert ex.name == "row_softmax"
    assert any("log of the softmax" in n for n in differences(ex, s, log.source))


def test_an_exemplar_that_fits_exactly_has_no_differences():
    scaffold = build_scaffold(CAUSAL_SCALED)
    ex, _ = best_exemplar(scaffold, CAUSAL_SCALED.source)
    assert ex.name == "masked_softmax" and differences(ex, scaffold, CAUSAL_SCALED.source) == []


def test_every_exemplar_header_parses():
    for lang in ("cpp", "cuda"):
        for ex in load_exemplars(lang):
            assert ex.ops and ex.params(), ex.path
            params = {n for _, n in ex.params()}
            assert {name for name, _ in ex.optional} <= params, ex.path


def test_a_residual_added_before_the_norm_is_named_in_the_directive():
    """``norm(h + skip)`` with no exemplar taking the second input: the directive says to read
    h + skip wherever the example reads its input (it used to say only "also takes `skip`")."""
    p = problem("res_rms", "        self.weight = nn.Parameter(torch.ones(64))",
                "    def forward(self, h, skip):\n        s = h + skip\n"
                "        return s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight",
                "[torch.randn(8, 64), torch.randn(8, 64)]")
    scaffold = build_scaffold(p)
    notes = differences(exemplar_named("rms_norm", "cpp"), scaffold, p.source)
    assert any("first adds `skip`" in n and "h[i] + skip[i]" in n for n in notes), notes
    assert not any("also takes `skip`" in n for n in notes)


def test_a_loss_of_two_inputs_is_not_said_to_add_them():
    """A smoothed cross-entropy adds its two loss terms, not its logits and labels: the directive must not
    tell the model to add the class indices to the logits first (it did). (A residual the reference does add
    is still named: test_a_residual_added_before_the_norm_is_named_in_the_directive.)"""
    ce = problem("smoothed_ce", NO_INIT, '''
    def forward(self, logits, labels):
        return F.cross_entropy(logits, labels, reduction="none", label_smoothing=0.1)''',
                 "[torch.randn(8, 64), torch.randint(0, 64, (8,))]")
    scaffold = build_scaffold(ce)
    ex, _ = best_exemplar(scaffold, ce.source)
    notes = differences(ex, scaffold, ce.source)
    assert not any("adds `labels`" in n for n in notes), notes
    assert any("nll_loss" in n for n in notes), notes


def test_a_nearby_example_is_shown_with_the_problems_signature():
    """A leaky-ReLU chain with a scale is shown the bias + GELU example (no exact fit) declaring the
    problem's parameters, `scale` included: the default model keeps the example's parameter list, and
    an answer that did so failed the signature check. The body is the example's: it builds and runs
    as the problem's kernel (computing bias + GELU, which the directive says to change)."""
    from kforge_desktop.search.answers import signature_mismatch

    scaled = problem("bias_leaky_scale", "        self.bias = nn.Parameter(torch.randn(64))\n        self.scale = 1.5", '''
    def forward(self, x):
        return F.leaky_relu(x + self.bias, 0.2) * self.scale''', "[torch.randn(8, 64)]")
    scaffold = build_scaffold(scaled)
    assert "float scale" in scaffold.signature()
    ex, code = best_exemplar(scaffold, scaled.source)
    assert ex.name == "bias_gelu_erf" and not seed_exemplars(scaffold, scaled.source)
    assert scaffold.signature() + " {" in code and signature_mismatch(scaffold, code) is None
    assert scaffold.signature() not in ex.code  # the exemplar itself is unchanged
    ref, got = _outputs(scaled, code)
    assert got.shape == ref.shape and torch.isfinite(got).all()


def test_a_tensor_where_the_signature_takes_a_number_is_a_compile_error_before_any_build():
    """An answer with the right number of parameters but a pointer where the problem passes a number
    would fail only when called ("a Tensor with 131072 elements cannot be converted to Scalar"): the
    signature check names the parameter, as the compile error its repair is shown."""
    from kforge_desktop.search.answers import signature_mismatch

    scaled = problem("bias_leaky_scale", "        self.bias = nn.Parameter(torch.randn(64))\n        self.scale = 1.5", '''
    def forward(self, x):
        return F.leaky_relu(x + self.bias, 0.2) * self.scale''', "[torch.randn(8, 64)]")
    scaffold = build_scaffold(scaled)
    names = [a.name for a in scaffold.args]
    good = scaffold.signature() + " {}\n"
    assert signature_mismatch(scaffold, good) is None
    i = next(k for k, a in enumerate(scaffold.args) if a.ctype == "float")  # the scale
    params = [f"{a.ctype} {a.name}" for a in scaffold.args]
    params[i] = f"const float* {names[i]}"
    bad = f'extern "C" void {scaffold.function}({", ".join(params)}) {{}}\n'
    err = signature_mismatch(scaffold, bad)
    assert err and f"parameter {i + 1} is `const float* {names[i]}`" in err and f"`float {names[i]}`" in err


def test_a_constant_factor_the_exemplar_lacks_keeps_it_from_being_a_seed():
    """Quick GELU, x * sigmoid(1.702 * x): the SiLU exemplar (SwiGLU's, without its b) is shown with the
    problem's exact signature, the directive names the 1.702, and it is no seed (it would be a wrong
    first node). The same exemplar is the seed of SiLU itself (the FITS case above)."""
    quick = problem("quick_gelu", NO_INIT, '''
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)''', "[torch.randn(16, 64)]")
    scaffold = build_scaffold(quick)
    assert not seed_exemplars(scaffold, quick.source)
    ex, code = best_exemplar(scaffold, quick.source)
    assert ex.name == "silu_mul" and scaffold.signature() in code and "const float* b" not in code
    assert differences(ex, scaffold, quick.source) == ["the reference also multiplies by 1.702"]


def test_a_reduction_over_a_middle_dimension_is_told_how_it_is_laid_out(build_cache):
    """``x.mean(dim=1)`` of [8, 32, 64]: the prompt's arguments say which values each output combines, as
    an index formula; a kernel that follows that formula literally is correct. The example is the sum
    over that same dimension written for these shapes (it computes exactly that), not RMSNorm (which
    also runs a mean but writes one value per input value) nor the row sum (whose loop over rows writes
    past this smaller output), and the directive says to divide by the count."""
    mean = problem("mean_mid", NO_INIT, '''
    def forward(self, x):
        return x.mean(dim=1)''', "[torch.randn(8, 32, 64)]")
    scaffold = build_scaffold(mean)
    assert scaffold.reduced_dim() == 1
    said = scaffold.describe_args()
    assert "out[o * 64 + i] combines the 32 values x[(o * 32 + j) * 64 + i], j = 0..31" in said
    ex, shown = best_exemplar(scaffold, mean.source)
    assert ex.name == "sum_over_dim" and not seed_exemplars(scaffold, mean.source)
    assert scaffold.signature() in shown
    notes = differences(ex, scaffold, mean.source)
    assert len(notes) == 1 and "reduction over dimension 1" in notes[0] and "divided by how many" in notes[0], notes
    ref, got = _outputs(mean, shown)
    assert torch.allclose(32.0 * ref, got, atol=1e-4), (32.0 * ref - got).abs().max()  # the sum it says it is
    params = ", ".join(a.decl for a in scaffold.args)
    kernel = (f'extern "C" void kernel_forward({params}) {{\n'
              "    for (int64_t o = 0; o < 8; ++o)\n"
              "        for (int64_t i = 0; i < 64; ++i) {\n"
              "            float s = 0.0f;\n"
              "            for (int64_t j = 0; j < 32; ++j) s += x[(o * 32 + j) * 64 + i];\n"
              "            out[o * 64 + i] = s / 32.0f;\n"
              "        }\n}\n")
    ref, got = _outputs(mean, kernel)
    assert torch.allclose(ref, got, atol=1e-6), (ref - got).abs().max()
    sum_last = problem("sum_last", NO_INIT, '''
    def forward(self, x):
        return x.sum(-1, keepdim=True)''', "[torch.randn(8, 32, 64)]")
    last = build_scaffold(sum_last)
    assert last.reduced_dim() == 2 and "out[r] combines the 64 values x[r * 64 + c]" in last.describe_args()
    assert best_exemplar(last, sum_last.source)[0].name == "row_sum"  # rows: our exemplar
    channel = problem("channel_sum", NO_INIT, '''
    def forward(self, x):
        return x.sum(dim=1)''', "[torch.randn(4, 16, 8)]")
    (ex, code), = seed_exemplars(build_scaffold(channel), channel.source)  # exactly the sum: a seed
    ref, got = _outputs(channel, code)
    assert ex.name == "sum_over_dim" and torch.allclose(ref, got, atol=1e-5)
    same = build_scaffold(problem("softmax_rows", NO_INIT, '''
    def forward(self, x):
        return torch.softmax(x, dim=-1)''', "[torch.randn(8, 64)]"))
    assert same.reduced_dim() is None and "Reduction" not in same.describe_args()


@pytest.mark.parametrize("pool, what", [
    ("nn.MaxPool1d(3, stride=2, padding=1)", "max"),
    ("nn.AvgPool1d(4)", "mean"),
])
def test_a_pooling_along_the_last_dimension_is_told_its_window(pool, what, build_cache):
    """A 1d pooling runs as a 2d one with a window of height 1; the prompt's arguments say which input
    values each output value takes (window, stride, padding), and a kernel that follows that sentence
    literally is correct, padding included."""
    p = problem("pool", f"        self.pool = {pool}", '''
    def forward(self, x):
        return self.pool(x)''', "[torch.randn(4, 8, 64)]")
    scaffold = build_scaffold(p)
    line = scaffold.pooling_line()
    assert line in scaffold.describe_args() and f"is the {what} of x[r * 64 + " in line
    m = scaffold.shapes["out"][-1]
    k, st, pad = (dict(scaffold.op_args)[f"pool_{s}"] for s in ("kernel", "stride", "padding"))
    assert f"window {k}, stride {st}, padding {pad}" in line
    params = ", ".join(a.decl for a in scaffold.args)
    body = ("float v = -INFINITY; for (int64_t t = 0; t < K; ++t) { int64_t i = j * S - P + t;"
            " if (i >= 0 && i < 64) v = std::max(v, x[r * 64 + i]); }" if what == "max" else
            "float v = 0.0f; for (int64_t t = 0; t < K; ++t) v += x[r * 64 + j * S + t]; v /= K;")
    kernel = (f"constexpr int64_t K = {k}, S = {st}, P = {pad};\n"
              f'extern "C" void kernel_forward({params}) {{\n'
              f"    for (int64_t r = 0; r < 32; ++r)\n        for (int64_t j = 0; j < {m}; ++j) {{\n"
              f"            {body}\n            out[r * {m} + j] = v;\n        }}\n}}\n")
    ref, got = _outputs(p, kernel)
    assert torch.allclose(ref, got, atol=1e-6), (ref - got).abs().max()


def test_a_two_dimensional_window_gets_no_pooling_line():
    p = problem("pool2d", NO_INIT, '''
    def forward(self, x):
        return F.max_pool2d(x, 2)''', "[torch.randn(4, 8, 64)]")
    assert build_scaffold(p).pooling_line() == ""
