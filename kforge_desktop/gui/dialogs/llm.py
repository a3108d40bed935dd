"""Choose the local model: a GGUF from the models folder or anywhere on disk, or a local
OpenAI-compatible server; and how it runs (GPU layers, context, temperature)."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ..settings import LLMChoices


def _size(n: int | None) -> str:
    if not n:
        return "?"
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


class LLMDialog(QDialog):
    def __init__(self, parent: QWidget | None, choices: LLMChoices) -> None:
        super().__init__(parent)
        self.setObjectName("llmDialog")
        self.setWindowTitle("Local model")
        self.models = QComboBox(self)
        self.models.setObjectName("llmModels")
        self.models.setMinimumWidth(420)
        self.browse = QPushButton("Browse…", self)
        self.browse.clicked.connect(self._browse)
        self.problems = QLabel("", self)
        self.problems.setWordWrap(True)
        self.server = QLineEdit(choices.server_url, self)
        self.server.setObjectName("llmServer")
        self.server.setPlaceholderText("http://127.0.0.1:8080/v1  (empty: run the GGUF in this app)")
        self.server_model = QLineEdit(choices.server_model, self)
        self.server_model.setPlaceholderText("model name on the server (empty: its first model)")
        self.gpu_layers = QSpinBox(self)
        self.gpu_layers.setRange(-1, 999)
        self.gpu_layers.setSpecialValueText("all (when llama.cpp has GPU offload)")
        self.gpu_layers.setValue(choices.gpu_layers)
        self.context = QSpinBox(self)
        self.context.setRange(512, 262144)
        self.context.setSingleStep(1024)
        self.context.setValue(choices.context)
        self.temperature = QDoubleSpinBox(self)
        self.temperature.setRange(0.0, 2.0)
        self.temperature.setSingleStep(0.1)
        self.temperature.setValue(choices.temperature)
        self.max_tokens = QSpinBox(self)
        self.max_tokens.setRange(64, 32768)
        self.max_tokens.setSingleStep(256)
        self.max_tokens.setValue(choices.max_tokens)

        pick = QHBoxLayout()
        pick.addWidget(self.models, 1)
        pick.addWidget(self.browse)
        form = QFormLayout()
        form.addRow("GGUF model", pick)
        form.addRow("", self.problems)
        form.addRow("Local server URL", self.server)
        form.addRow("Server model", self.server_model)
        form.addRow("GPU layers", self.gpu_layers)
        form.addRow("Context (tokens)", self.context)
        form.addRow("Temperature", self.temperature)
        form.addRow("Max answer tokens", self.max_tokens)
        note = QLabel("Everything runs on this machine: a server URL must be localhost.", self)
        note.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(note)
        lay.addWidget(buttons)
        self._fill(choices.model_path)

    def _fill(self, current: str) -> None:
        self.models.clear()
        self.models.addItem("Default model (from the models folder)", "")
        problems: list[str] = []
        try:
            from ...llm.discovery import discover

            entries, problems = discover()
        except Exception as err:  # an unreadable folder must not break the dialog
            entries, problems = [], [str(err)]
        for e in entries:
            label = f"{e.name} — {_size(e.size)}"
            if e.info is not None:
                label += f", {e.info.quantization or '?'}"
            if e.is_default:
                label += " (default)"
            if not e.ok:
                label += "  [unusable]"
            self.models.addItem(label, str(e.path))
            self.models.setItemData(self.models.count() - 1, e.problem or str(e.path), 3)  # tooltip
        if current and self.models.findData(current) < 0:
            self.models.addItem(current, current)
        idx = self.models.findData(current)
        self.models.setCurrentIndex(max(0, idx))
        self.problems.setText("\n".join(problems))
        self.problems.setVisible(bool(problems))

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose a GGUF model", "", "GGUF models (*.gguf);;All files (*)")
        if path:
            if self.models.findData(path) < 0:
                self.models.addItem(path, path)
            self.models.setCurrentIndex(self.models.findData(path))

    def choices(self) -> LLMChoices:
        return LLMChoices(
            model_path=self.models.currentData() or "",
            server_url=self.server.text().strip(),
            server_model=self.server_model.text().strip(),
            gpu_layers=self.gpu_layers.value(),
            context=self.context.value(),
            temperature=self.temperature.value(),
            max_tokens=self.max_tokens.value(),
        )
