"""«Поиск…» beside «Серия…»: search one to four of the form's fields (each as `KEY=log:LOW..HIGH`,
`KEY=LOW..HIGH` or `KEY=V1,V2,…`, as `ternit search add --space` takes them) for a number of
trials within a budget of GPU hours. The space's rules are app.search.space's; the window
starts the search (app.search.adding) with what `result()` gives once accepted."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.base.i18n import t
from app.search.space import MAX_FIELDS, Dimension, SpaceError, parse_space
from app.search.store import PRUNERS
from ui.base import palette


def default_space(values: dict[str, Any]) -> str:
    """The learning rate a hundredfold around the form's, on a log scale: the usual first search."""
    lr = values.get("lr")
    lr = float(lr) if isinstance(lr, int | float) and lr > 0 else 1e-3
    return f"lr=log:{lr / 10:.3g}..{lr * 10:.3g}"


class SearchDialog(QDialog):
    def __init__(self, values: dict[str, Any], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(t("Поиск гиперпараметров", "A hyperparameter search"))
        form = QFormLayout()
        self.fields = [QLineEdit() for _ in range(MAX_FIELDS)]
        self.fields[0].setText(default_space(values))
        for i, edit in enumerate(self.fields):
            edit.setPlaceholderText("warmup_steps=50..500" if i == 1 else "")
            form.addRow(t(f"Поле {i + 1}", f"Field {i + 1}"), edit)
        self.trials = QSpinBox()
        self.trials.setRange(1, 500)
        self.trials.setValue(12)
        form.addRow(t("Попыток", "Trials"), self.trials)
        self.budget = QDoubleSpinBox()
        self.budget.setRange(0, 1000)
        self.budget.setSpecialValueText(t("без предела", "no limit"))
        form.addRow(t("Часов видеокарты, не больше", "GPU hours at most"), self.budget)
        self.pruner = QComboBox()
        words = {"median": ("по медиане (после 3 попыток)", "median (after 3 trials)"),
                 "halving": ("последовательное деление", "successive halving"), "none": ("не отсекать", "none")}
        for key in PRUNERS:
            self.pruner.addItem(t(*words[key]), key)
        form.addRow(t("Отсекать безнадёжные", "Stop hopeless trials"), self.pruner)
        self.target = QComboBox()
        for key, ru, en in (("any", "куда освободится раньше", "wherever frees first"), ("local", "этот ПК", "this PC"),
                            ("kaggle", "Kaggle", "Kaggle")):
            self.target.addItem(t(ru, en), key)
        form.addRow(t("Где", "Where"), self.target)
        self.error = QLabel("")
        self.error.setWordWrap(True)
        palette.set_style(self.error, palette.style("error"))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self._try_accept)
        buttons.rejected.connect(self.reject)
        col = QVBoxLayout(self)
        col.addLayout(form)
        col.addWidget(self.error)
        col.addWidget(buttons)

    def space(self) -> list[Dimension]:
        return parse_space([e.text().strip() for e in self.fields if e.text().strip()])

    def _try_accept(self) -> None:
        try:
            self.space()
        except SpaceError as e:  # said under the fields; the dialog stays open
            self.error.setText(str(e))
            return
        self.accept()

    def result_kwargs(self) -> dict[str, Any]:
        """What app.search.adding.create_search takes besides the config."""
        budget = self.budget.value()
        return {"space": self.space(), "trials": self.trials.value(), "budget_hours": budget or None,
                "pruner": self.pruner.currentData(), "target": self.target.currentData()}
