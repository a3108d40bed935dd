"""The Inspector dock: everything known about the selected node — the verdict (status and reason,
latency with its spread, speedups over eager and torch.compile, errors, build seconds), the build
or run log, the directive, and the LLM exchange that produced it (prompt, answer, tokens, seconds).
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable

from PySide6.QtWidgets import QPlainTextEdit, QTabWidget, QTextBrowser, QVBoxLayout, QWidget

from ....search.events import NodeRecord
from ...session_model import SessionModel
from ...status import BY_KEY, classify, node_title, state_words, where_ran
from ...theme import Theme
from ..code.view import mono_font


def _fmt(v, unit: str = "", digits: int = 4) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.{digits}g}{unit}"
    return f"{v}{unit}"


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v:.4g} ms"


def _timing(median: float | None, iqr: float | None, call: float | None) -> str:
    """"7.98 ms ± 7.93 ms IQR · one call 8.01 ms": the time speedups use, its spread, and one
    synchronous call (host overhead included) beside it."""
    out = _ms(median)
    if iqr is not None:
        out += f" ± {_ms(iqr)} IQR"
    if call is not None:
        out += f" · one call {_ms(call)}"
    return out


BASIS = {"device": "device time (the GPU's own time per call; launch overhead hidden)",
         "wall": "wall time of a call (CPU)"}


def _bytes(n: int | None) -> str:
    if not n:
        return "—"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def verdict_rows(node: NodeRecord, running: bool = True) -> list[tuple[str, str]]:
    """(label, value) pairs for the verdict table; also what tests read."""
    v = node.verdict
    rows: list[tuple[str, str]] = [("node", node_title(node))]
    if node.parent_id is not None:
        rows.append(("parent", f"#{node.parent_id}"))
    rows.append(("state", state_words(node, running)))
    if node.note:  # why a node has no code, what was fixed or provided, where a seed came from
        rows.append(("note", node.note))
    if node.duplicate_of is not None:
        rows.append(("duplicate of", f"#{node.duplicate_of}"))
    if node.pinned:
        rows.append(("pinned", "yes — the chosen kernel of this problem"))
    if node.excluded:
        rows.append(("excluded", "yes — never expanded again"))
    if v is None:
        return rows
    rows.append(("status", v.status))
    rows.append(("reason", v.reason))
    rows.append(("ran on", where_ran(node)))
    if v.speedup is not None:
        tag = " (disturbed measurement)" if v.disturbed else ("" if v.significant else " (within noise)")
        rows.append(("speedup over eager", f"{v.speedup:.3f}×{tag}"))
    if v.disturbed:
        rows.append(("disturbed", f"{v.disturbed}; re-time it before trusting this speedup"))
    if v.host_saving_ms:
        rows.append(("host overhead", f"same device time as eager; {v.host_saving_ms:.3g} ms less per call "
                     "(saved on the host, not a faster kernel)"))
    if v.delegates:
        rows.append(("delegates", "part of the work is PyTorch's own operators (" + ", ".join(v.library_calls)
                     + "): never chosen or exported unless you pin it"))
    if v.speedup_compile is not None:
        rows.append(("speedup over torch.compile", f"{v.speedup_compile:.3f}×"))
    if v.time_basis:
        rows.append(("times are", BASIS.get(v.time_basis, v.time_basis)))
    if v.latency_ms is not None:
        rows.append(("latency (median)", _timing(v.latency_ms, v.latency_iqr_ms, v.call_ms)))
    if v.baseline_ms is not None:
        rows.append(("eager (median)", _timing(v.baseline_ms, v.baseline_iqr_ms, v.baseline_call_ms)))
    if v.compile_baseline_ms is not None:
        rows.append(("torch.compile (median)", _timing(v.compile_baseline_ms, v.compile_iqr_ms, v.compile_call_ms)))
    if v.noise is not None:
        rows.append(("noise (IQR / median)", f"{100 * v.noise:.1f} %"))
    if v.n_timed:
        rows.append(("timed runs", str(v.n_timed)))
    if v.max_abs_err is not None:
        rows.append(("max abs error", f"{v.max_abs_err:.3g}"))
    if v.rel_l2_err is not None:
        rows.append(("relative L2 error", f"{v.rel_l2_err:.3g}"))
    if v.trials:
        rows.append(("correctness trials", str(v.trials)))
    if v.input_seed is not None:
        rows.append(("input seed", str(v.input_seed)))
    if v.peak_mem_bytes:
        rows.append(("peak memory", _bytes(v.peak_mem_bytes)))
    if v.build_s is not None:
        rows.append(("build", f"{v.build_s:.2f} s" + (" (cached)" if v.cached_build else "")))
    if v.verify_s is not None:
        rows.append(("verify", f"{v.verify_s:.2f} s"))
    if v.time_s is not None:
        rows.append(("timing", f"{v.time_s:.2f} s"))
    if v.library_calls and not v.delegates:
        rows.append(("library calls", ", ".join(v.library_calls)))
    if v.policy_flags:
        rows.append(("policy flags", ", ".join(v.policy_flags)))
    return rows


def params_text(params: dict) -> str:
    """Sampling parameters as "temperature 0.7 · top_p 0.95 · max_tokens 1024", numbers rounded."""
    def one(value) -> str:
        if isinstance(value, float):
            return f"{value:.4g}"
        if isinstance(value, dict):
            return "{" + ", ".join(f"{k} {one(x)}" for k, x in value.items()) + "}"
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(one(x) for x in value) + "]"
        return str(value)

    return " · ".join(f"{k} {one(v)}" for k, v in params.items())


class InspectorWidget(QWidget):
    def __init__(self, session: SessionModel, theme: Theme, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.theme = theme
        self.running: Callable[[], bool] = lambda: False  # the window says whether its search runs
        self.tabs = QTabWidget(self)
        self.tabs.setObjectName("inspectorTabs")
        self.tabs.setDocumentMode(True)
        self.verdict_view = QTextBrowser(self)
        self.verdict_view.setObjectName("verdictView")
        self.verdict_view.setOpenLinks(False)
        self.log_view = QPlainTextEdit(self)
        self.log_view.setObjectName("buildLog")
        self.log_view.setReadOnly(True)
        self.log_view.setFont(mono_font())
        self.log_view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.directive_view = QTextBrowser(self)
        self.directive_view.setObjectName("directiveView")
        self.llm_view = QTextBrowser(self)
        self.llm_view.setObjectName("llmView")
        self.tabs.addTab(self.verdict_view, "Verdict")
        self.tabs.addTab(self.log_view, "Build / run log")
        self.tabs.addTab(self.directive_view, "Directive")
        self.tabs.addTab(self.llm_view, "LLM exchange")
        self.live_view = QPlainTextEdit(self)
        self.live_view.setObjectName("liveView")
        self.live_view.setReadOnly(True)
        self.live_view.setFont(mono_font())
        self.live_view.setPlaceholderText("The answer the model is writing right now appears here while a search runs.")
        self.live_view.setMaximumBlockCount(2000)
        self.tabs.addTab(self.live_view, "Live")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.tabs)
        session.selectionChanged.connect(self.refresh)
        session.sessionChanged.connect(self.live_clear)
        session.nodesUpdated.connect(lambda ids: self.refresh() if session.selected_id in ids else None)
        theme.changed.connect(self.refresh)
        self.node: NodeRecord | None = None
        self.refresh()

    def live_clear(self) -> None:
        """Another session, or the search ended: the last answer belongs to the past."""
        self.live_view.clear()

    def live_reset(self, heading: str) -> None:
        """A new request to the model: start the Live tab afresh."""
        self.live_view.setPlainText(f"— {heading} —\n")

    def live_append(self, text: str) -> None:
        cursor = self.live_view.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        cursor.insertText(text)
        self.live_view.setTextCursor(cursor)
        self.live_view.ensureCursorVisible()

    def refresh(self, *_a) -> None:
        node = self.session.node(self.session.selected_id)
        self.node = node
        if node is None:
            msg = "Select a node to see its verdict, logs, directive and LLM exchange."
            self.verdict_view.setHtml(f"<p style='color:gray'>{msg}</p>")
            self.log_view.setPlainText("")
            self.directive_view.setHtml("")
            self.llm_view.setHtml("")
            return
        self.verdict_view.setHtml(self._verdict_html(node))
        v = node.verdict
        self.log_view.setPlainText(v.log if v and v.log else "(no build or run log for this node)")
        self.directive_view.setHtml(
            f"<p><b>Directive</b> ({html.escape(node.kind)}):</p><p>{html.escape(node.directive) or '—'}</p>"
        )
        self.llm_view.setHtml(self._llm_html(node))

    def _verdict_html(self, node: NodeRecord) -> str:
        cls = BY_KEY[classify(node)]
        color = cls.color(self.theme.dark)
        head = (f"<p><span style='color:{color}; font-size:16px'>●</span> <b>{html.escape(cls.label)}</b>"
                f" &nbsp; <span style='color:gray'>{html.escape(node_title(node))}</span></p>")
        rows = "".join(
            f"<tr><td style='padding:1px 10px 1px 0; color:gray'>{html.escape(k)}</td>"
            f"<td>{html.escape(val)}</td></tr>" for k, val in verdict_rows(node, self.running())
        )
        return head + f"<table>{rows}</table>"

    def _llm_html(self, node: NodeRecord) -> str:
        store = self.session.store
        if node.llm_call_id is None or store is None:
            who = {"root": "the reference program", "seed": "a seed from the exemplar library",
                   "user": "written by hand"}.get(node.origin, "no LLM call recorded")
            return f"<p style='color:gray'>No LLM exchange: this node is {html.escape(who)}.</p>"
        call = store.llm_call(node.llm_call_id)
        if call is None:
            return "<p style='color:gray'>The LLM call of this node is missing from the session.</p>"
        tps = f", {call.tokens_per_s:.1f} tokens/s" if call.tokens_per_s else ""
        meta = (f"<p><b>{html.escape(call.model)}</b> · {html.escape(call.purpose)} · "
                f"prompt {_fmt(call.prompt_tokens)} tokens, answer {_fmt(call.completion_tokens)} tokens, "
                f"{_fmt(call.seconds, ' s', 3)}{tps}</p>")
        params = f"<p style='color:gray'>{html.escape(params_text(call.params))}</p>" if call.params else ""
        prompt = _prompt_text(call.prompt)
        pre = "white-space:pre-wrap; font-family:monospace"
        return (meta + params + "<h4>Prompt</h4>" + f"<div style='{pre}'>{html.escape(prompt)}</div>"
                + "<h4>Answer</h4>" + f"<div style='{pre}'>{html.escape(call.response)}</div>")


def _prompt_text(prompt: str) -> str:
    """Chat prompts are stored as JSON messages; show them as role-labelled text."""
    try:
        msgs = json.loads(prompt)
    except (ValueError, TypeError):
        return prompt
    if isinstance(msgs, list) and all(isinstance(m, dict) and "content" in m for m in msgs):
        return "\n\n".join(f"[{m.get('role', '?')}]\n{m['content']}" for m in msgs)
    return prompt
