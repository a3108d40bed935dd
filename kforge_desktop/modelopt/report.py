"""Reports of a whole-model run: the profile table for a terminal, and Markdown/HTML for an export.

The HTML has its plots as inline SVG (no script, no network, no plotting library), so it opens
anywhere; the Markdown carries the same tables.
"""

from __future__ import annotations

import html
import time

from .profile import ModelProfile, Target
from .session import LEFT_TO_COMPILE


def _fmt(x: float | None, spec: str = ".2f", suffix: str = "") -> str:
    return "–" if x is None else f"{x:{spec}}{suffix}"


def _shapes(t: Target) -> str:
    return ", ".join("×".join(str(d) for d in s) or "scalar" for s in t.shapes)


def time_lines(profile: ModelProfile) -> list[str]:
    """Where the forward's time went: targets, traced ops outside them, and what is not attributed
    (measured as the forward less the traced ops; unknown where those add up to more)."""
    head = f"{profile.model} on {profile.device}: eager forward {profile.eager_ms:.3f} ms"
    if profile.outside_ms is not None:
        head += (f" = {profile.targets_ms:.3f} ms in targets + {profile.outside_ms:.3f} ms outside any target "
                 f"({profile.other_ms:.3f} ms in traced ops, {profile.unattributed_ms:.3f} ms not attributed)")
        rest = ("not attributed: the forward less its traced ops (code that runs as is, Python and framework "
                "overhead between ops)")
    else:
        head += (f"; {profile.targets_ms:.3f} ms in targets, {profile.other_ms:.3f} ms in traced ops outside any "
                 "target, the rest not attributed")
        rest = ("not attributed: unknown — the ops timed one by one add up to more than the forward "
                f"({profile.op_ms:.3f} ms: timing an op alone costs it time the forward does not pay)")
    if profile.untraced_ms is not None:
        rest += f"; {profile.untraced_ms:.3f} ms measured in the own code of the modules not traced"
    return [head, rest]


def profile_table(profile: ModelProfile, limit: int | None = None, width: int = 110) -> str:
    """The profile as a fixed-width table (what ``kforge profile`` prints)."""
    lines = [*time_lines(profile), f"floor rates: {profile.rates.summary()}"]
    if profile.exported:
        lines.append("captured through torch.export (fx could not trace them): " + ", ".join(profile.exported))
    if profile.untraced:
        why = dict(profile.untraced_why)
        lines.append("not traced (runs as is): " + ", ".join(
            f"{p} ({why[p]})" if p in why else p for p in profile.untraced))
    cols = f"{'target':24} {'share':>6} {'ms':>8} {'calls':>5} {'vs floor':>8} {'vs compile':>10}  {'module':22} op / shapes"
    lines += [cols, "-" * min(width, len(cols) + 20)]
    for t in profile.targets[:limit]:
        hc = t.headroom_compile
        lines.append(
            f"{t.name:24.24} {100 * t.share:5.1f}% {t.time_ms:8.3f} {t.calls:5d} {_fmt(t.headroom_floor, '.1f', 'x'):>8} "
            f"{_fmt(hc, '.2f', 'x'):>10}  {', '.join(t.module_paths)[:22]:22} {t.op} [{_shapes(t)}]"
            + ("" if t.optimizable else f"  (not optimizable: {t.note})"))
    lines.append("vs floor: time over the floor set by bytes moved and FLOPs at this device's measured rates; "
                 "vs compile: eager time over torch.compile's, the target alone (above 1: compile is faster).")
    return "\n".join(lines)


def format_result(result) -> str:
    """The closing table of ``kforge optimize MODEL.py`` (a ``ModelOptResult``)."""
    lines = [f"session: {result.session_path}",
             f"{'target':24} {'share':>6} {'budget':>6} {'cands':>5} {'best':>7}  used / why not"]
    for o in result.outcomes:
        best = f"{o.best_speedup:.2f}x" if o.best_speedup else "–"
        lines.append(f"{o.target:24.24} {100 * o.share:5.1f}% {o.budget:6d} {o.candidates:5d} {best:>7}  "
                     + ("yes" if o.used else o.why_not))
    for c in result.checks:
        lines.append(f"check on {c.label}: {'ok' if c.ok else 'MISMATCH'} "
                     f"(max abs {c.max_abs_err:.2g}, rel L2 {c.rel_l2_err:.2g})")
    if result.bench:
        lines.append("end to end: " + result.bench.summary())
    elif not any(o.used for o in result.outcomes):
        lines.append("no kernel was used, so the model is unchanged")
    lines.append(f"next: kforge bench MODEL.py --session {result.session_path}; "
                 f"kforge export {result.session_path} --out DIR")
    return "\n".join(lines)


# -- export report ------------------------------------------------------------------------------


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _target_rows(data: dict) -> list[list[str]]:
    rows = []
    for t in data["targets"]:
        rows.append([
            f"`{t['name']}`", t["op"], ", ".join(t["module_paths"])[:60], f"{100 * t['share']:.1f}%",
            _fmt(t.get("headroom_floor"), ".1f", "x"), str(t.get("budget", "–")),
            _fmt(t.get("best_speedup"), ".2f", "x"),
            "yes" if t.get("used") else ("no: " + t.get("why_not", "")) if t.get("why_not") else "no",
        ])
    return rows


def markdown(data: dict) -> str:
    """``data``: model, device, environment, targets (dicts with name, op, module_paths, share,
    headroom_floor, budget, best_speedup, used, why_not), checks, bench (BenchResult.to_dict())."""
    lines = [f"# Kernel Forge report: {data['model']}", "",
             f"Device: {data['device']} ({data.get('device_name', '')}); exported {data.get('when', '')}.", ""]
    b = data.get("bench")
    if b:
        lines += ["## End to end", "",
                  _md_table(["", "median ms", "IQR ms", "speedup vs eager"], [
                      ["eager (original)", f"{b['eager']['median_ms']:.3f}", f"{b['eager']['iqr_ms']:.3f}", "1.00x"],
                      ["patched (these kernels)", f"{b['patched']['median_ms']:.3f}", f"{b['patched']['iqr_ms']:.3f}",
                       f"{b['speedup']:.2f}x"],
                  ] + ([["torch.compile(original)", f"{b['compiled']['median_ms']:.3f}", f"{b['compiled']['iqr_ms']:.3f}",
                         f"{b['compile_speedup']:.2f}x"]] if b.get("compiled") else [])), "",
                  f"Patched vs torch.compile: {_fmt(b.get('speedup_vs_compile'), '.2f', 'x')}. "
                  f"Interleaved rounds: {b['eager']['n']}; worst relative spread ±{100 * b['noise']:.0f}%."
                  + (f" {b['compile_note']}" if b.get("compile_note") and not b.get("compiled") else ""), ""]
    lines += ["## Targets", "", "Sorted by share of the model's op time. *vs floor*: time over the floor set by the "
              "bytes moved and FLOPs done at this device's measured rates. *best*: the fastest verified kernel "
              "against eager, the target alone.", "",
              _md_table(["target", "op", "module", "share", "vs floor", "budget", "best", "used"], _target_rows(data)), ""]
    left = [t for t in data["targets"] if (t.get("why_not") or "").startswith(LEFT_TO_COMPILE)]
    if left:
        lines += ["Where our fastest verified kernel is slower than torch.compile's code for the target, the "
                  "target is not patched: `torch.compile(patched)` compiles it as it would the original.", ""]
        lines += [f"- {LEFT_TO_COMPILE}: `{t['name']}` {t['why_not'][len(LEFT_TO_COMPILE) + 1:]}"
                  for t in left] + [""]
    if data.get("checks"):
        lines += ["## Patched model against the original", "",
                  _md_table(["inputs", "ok", "max abs error", "relative L2"],
                            [[c["label"], "yes" if c["ok"] else "NO", f"{c['max_abs_err']:.3g}", f"{c['rel_l2_err']:.3g}"]
                             for c in data["checks"]]), ""]
    if data.get("kernels"):
        lines += ["## Kernels", ""]
        for name, k in data["kernels"].items():
            v = k.get("verdict", {})
            lines.append(f"- `{name}` (node {k.get('node_id')}{', pinned' if k.get('pinned') else ''}): "
                         f"{_fmt(v.get('speedup'), '.2f', 'x')} over eager, "
                         f"{_fmt(v.get('latency_ms'), '.4f')} ms vs {_fmt(v.get('baseline_ms'), '.4f')} ms eager"
                         f" and {_fmt(v.get('compile_baseline_ms'), '.4f')} ms torch.compile; "
                         f"{v.get('trials', 0)} checks, max abs error {_fmt(v.get('max_abs_err'), '.2g')}; "
                         f"verified on {len(k.get('signatures', []))} input signature(s).")
        lines.append("")
    return "\n".join(lines)


def _bars(items: list[tuple[str, float, str]], unit: str, title: str, ref: float | None = None) -> str:
    """A horizontal bar chart as SVG: (label, value, colour)."""
    if not items:
        return ""
    w, row, left = 640, 22, 230
    h = row * len(items) + 40
    top = max([v for _l, v, _c in items] + [ref or 0]) or 1.0
    scale = (w - left - 70) / top
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
             f'<text x="4" y="14" font-weight="bold">{html.escape(title)}</text>']
    for i, (label, v, colour) in enumerate(items):
        y = 24 + i * row
        parts.append(f'<text x="{left - 6}" y="{y + 14}" text-anchor="end">{html.escape(label[:34])}</text>')
        parts.append(f'<rect x="{left}" y="{y + 2}" width="{max(1.0, v * scale):.1f}" height="{row - 6}" fill="{colour}"/>')
        parts.append(f'<text x="{left + v * scale + 4:.1f}" y="{y + 14}">{v:.2f}{unit}</text>')
    if ref is not None:
        x = left + ref * scale
        parts.append(f'<line x1="{x:.1f}" y1="20" x2="{x:.1f}" y2="{h - 4}" stroke="#888" stroke-dasharray="4 3"/>')
    parts.append("</svg>")
    return "".join(parts)


def html_report(data: dict) -> str:
    md = markdown(data)
    used, unused = "#2a9d8f", "#b0b0b0"
    share = _bars([(t["name"], 100 * t["share"], used if t.get("used") else unused) for t in data["targets"][:12]],
                  "%", "Share of the model's op time (green: replaced by a kernel)")
    speed = _bars([(t["name"], t["best_speedup"], used if t.get("used") else unused)
                   for t in data["targets"] if t.get("best_speedup")], "x",
                  "Best verified kernel against eager, per target (dashed: 1x)", ref=1.0)
    b = data.get("bench")
    e2e = ""
    if b:
        items = [("eager", b["eager"]["median_ms"], unused), ("patched", b["patched"]["median_ms"], used)]
        if b.get("compiled"):
            items.append(("torch.compile", b["compiled"]["median_ms"], "#e9c46a"))
        e2e = _bars(items, " ms", "End to end, median of interleaved runs")
    body = "".join(f"<p>{svg}</p>" for svg in (e2e, share, speed) if svg)
    return ("<!doctype html><html><head><meta charset='utf-8'>"
            f"<title>Kernel Forge report: {html.escape(data['model'])}</title>"
            "<style>body{font-family:sans-serif;max-width:980px;margin:2em auto;padding:0 1em}"
            "pre{white-space:pre-wrap;background:#f6f6f6;padding:1em}</style></head><body>"
            f"<h1>Kernel Forge report: {html.escape(data['model'])}</h1>{body}"
            f"<pre>{html.escape(md)}</pre></body></html>")


def now() -> str:
    return time.strftime("%Y-%m-%d %H:%M")
