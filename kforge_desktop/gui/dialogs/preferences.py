"""Edit → Preferences: the models folder, the sessions folder, evaluator workers and model threads.

Saved with the window's settings (``Settings.set_preferences``) and applied at once
(``gui.preferences.apply_preferences``); a running search keeps what it started with.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
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

from ... import paths
from ..settings import Preferences


class PreferencesDialog(QDialog):
    def __init__(self, parent: QWidget | None, prefs: Preferences) -> None:
        super().__init__(parent)
        self.setObjectName("preferencesDialog")
        self.setWindowTitle("Preferences")
        self.models_dir = self._folder("prefModelsDir", prefs.models_dir, str(paths.models_dir()))
        self.sessions_dir = self._folder("prefSessionsDir", prefs.sessions_dir, str(paths.sessions_dir()))
        self.workers = QSpinBox(self)
        self.workers.setObjectName("prefWorkers")
        self.workers.setRange(0, 64)
        self.workers.setSpecialValueText("automatic (by device and cores)")
        self.workers.setValue(prefs.workers)
        self.workers.setToolTip("Worker processes that build, check and time candidates at once")
        self.threads = QSpinBox(self)
        self.threads.setObjectName("prefThreads")
        self.threads.setRange(0, 256)
        self.threads.setSpecialValueText("automatic (all cores but one)")
        self.threads.setValue(prefs.threads)
        self.threads.setToolTip("CPU threads of the local model (llama.cpp)")
        form = QFormLayout()
        form.addRow("Models folder", self._row(self.models_dir))
        form.addRow("Sessions folder", self._row(self.sessions_dir))
        form.addRow("Evaluator workers", self.workers)
        form.addRow("Model threads", self.threads)
        note = QLabel("Empty or automatic: the default. A running search keeps the values it started with.", self)
        note.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(note)
        lay.addWidget(buttons)
        self.resize(560, self.sizeHint().height())

    def _folder(self, name: str, value: str, default: str) -> QLineEdit:
        edit = QLineEdit(value, self)
        edit.setObjectName(name)
        edit.setPlaceholderText(default)
        edit.setClearButtonEnabled(True)
        return edit

    def _row(self, edit: QLineEdit) -> QHBoxLayout:
        row = QHBoxLayout()
        row.addWidget(edit, 1)
        browse = QPushButton("Browse…", self)
        browse.clicked.connect(lambda _c=False: self._browse(edit))
        row.addWidget(browse)
        return row

    def _browse(self, edit: QLineEdit) -> None:
        path = QFileDialog.getExistingDirectory(self, "Choose a folder", edit.text() or edit.placeholderText())
        if path:
            edit.setText(path)

    def preferences(self) -> Preferences:
        return Preferences(models_dir=self.models_dir.text().strip(), sessions_dir=self.sessions_dir.text().strip(),
                           workers=self.workers.value(), threads=self.threads.value())
