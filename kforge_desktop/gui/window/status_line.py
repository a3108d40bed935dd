"""The window's status bar: a passing message on the left (fitted to the room the labels leave), and the
search's phase, device, model, rates, the model's yield, progress and ETA on the right. It shows what
``sessions`` and ``run_control`` tell it."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QMainWindow, QProgressBar, QStyle, QWidget

from ...search import events as ev


class _Part(QLabel):
    """A label of the bar shown only while it says something: an empty one would still take its margins and
    spacing (18 px each) from the message's room and leave gaps between the others."""

    def setText(self, text: str) -> None:  # noqa: N802 (Qt's name)
        super().setText(text)
        self.setVisible(bool(text))


class StatusLine:
    """The status bar: a passing message on the left; phase, device, model, model speed, search rate,
    the model's yield, progress and ETA on the right."""

    def __init__(self, win: QMainWindow) -> None:
        sb = win.statusBar()
        sb.setObjectName("statusBar")
        self.bar = sb
        self._permanent: list[QWidget] = []  # right of the message, in order

        def label(name: str, tip: str) -> QLabel:
            lab = _Part("", win)
            lab.setObjectName(name)
            lab.setToolTip(tip)
            sb.addPermanentWidget(lab)
            lab.setVisible(False)
            self._permanent.append(lab)
            return lab

        self.phase_label = label("phaseLabel", "What the search is doing now")
        self.device_label = label("deviceLabel", "The device candidates are built and timed on")
        self.model_label = label("modelLabel", "The local model")
        self.tps_label = label("tokensLabel", "Tokens per second of the model")
        self.rate_label = label("rateLabel", "Candidates evaluated per minute")
        self.yield_label = label("yieldLabel", "How productive the model is on this problem: the share of its "
                                 "candidates that build and that are correct")
        # the count is a label beside a thin bar: a fill never hides its text
        self.progress_label = label("progressLabel", "Candidates judged out of the problem's budget (seeds and "
                                    "the reference are not candidates)")
        self.progress_bar = QProgressBar(win)
        self.progress_bar.setObjectName("progressBar")
        self.progress_bar.setFixedWidth(120)
        self.progress_bar.setFixedHeight(10)
        self.progress_bar.setTextVisible(False)
        sb.addPermanentWidget(self.progress_bar)
        self.progress_bar.setVisible(False)  # until there is a count to show
        self._permanent.append(self.progress_bar)
        self.eta_label = label("etaLabel", "Estimated time to the end of the budget")

    def message(self, text: str, ms: int = 8000) -> None:
        """A passing message. One longer than the room beside the labels ends in an ellipsis instead of
        being cut mid-word, and the whole sentence stays in the bar's tooltip."""
        self.bar.setToolTip(text)
        self.bar.showMessage(self._fitted(text), ms)

    def _fitted(self, text: str) -> str:
        sb = self.bar
        # a label set just now has its new size hint before the layout gives it the width; 8: the spacing
        labels = sum(max(w.width(), w.sizeHint().width()) + 8 for w in self._permanent if w.isVisible())
        room = max(sb.width() - labels - 2 * sb.style().pixelMetric(QStyle.PixelMetric.PM_DefaultFrameWidth) - 16, 60)
        return sb.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight, room)

    def show_choices(self, device: str, model: str) -> None:
        self.device_label.setText(f"device: {device}")
        self.model_label.setText(f"model: {model}")

    def show_phase(self, text: str) -> None:
        self.phase_label.setText(text)

    def clear_eta(self) -> None:
        self.eta_label.setText("")

    def show_tokens_rate(self, tokens_per_s) -> None:
        if tokens_per_s:
            self.tps_label.setText(f"{tokens_per_s:.1f} tok/s")

    def clear_run(self) -> None:
        """No search runs (stopped, finished, another session): rates and estimates are the past."""
        for lab in (self.tps_label, self.rate_label, self.eta_label):
            lab.setText("")

    def clear_count(self) -> None:
        """No session: no count and no bar."""
        self.progress_label.setText("")
        self.progress_bar.setVisible(False)

    def show_count(self, done: int, budget: int | None) -> None:
        self.progress_bar.setMaximum(max(budget or 0, done, 1))
        self.progress_bar.setValue(done)
        self.progress_bar.setVisible(True)
        self.progress_label.setText(f"{done} of {budget} candidates" if budget else f"{done} candidates")

    def show_phase_note(self, text: str, tip: str) -> None:
        """The phase with a longer explanation in its tooltip (another process owns the session)."""
        self.phase_label.setText(text)
        self.phase_label.setToolTip(tip or "What the search is doing now")

    def show_progress(self, p: ev.Progress, paused: bool, best: float | None = None) -> None:
        self.show_count(p.done, p.budget)
        minutes = p.elapsed_s / 60.0
        rate = p.done / minutes if minutes > 0.05 and p.done else None
        self.rate_label.setText(f"{rate:.1f} cand/min" if rate else "")
        self.show_tokens_rate(p.tokens_per_s)
        if rate and p.budget > p.done:
            eta = (p.budget - p.done) / rate * 60
            self.eta_label.setText(f"ETA {_duration(eta)}")
        else:
            self.eta_label.setText("")
        phase = "paused" if paused else (p.phase or "")
        shown = f" · best win {best:.2f}×" if best else ""
        self.phase_label.setText(f"{phase}{shown}")

    def show_yield(self, prod) -> None:
        """The model's productivity on this problem; amber, with the advice, when it is low."""
        if prod is None or not prod.candidates:
            self.yield_label.setText("")
            self.yield_label.setStyleSheet("")
            return
        self.yield_label.setText(f"its kernels: {prod.correct}/{prod.candidates} correct "
                                 f"({100.0 * (prod.correct_rate or 0):.0f}%), {prod.built}/{prod.candidates} built")
        tip = prod.summary() + (f"\n{prod.suggestion}" if prod.suggestion else "")
        self.yield_label.setToolTip(tip)
        self.yield_label.setStyleSheet("QLabel { color: #b26a00; font-weight: bold; }" if prod.suggestion else "")


def _duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 5400:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
