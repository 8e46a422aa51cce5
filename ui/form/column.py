"""The window's left column: the «Новый прогон» form in a scroll area, its footer («Старт»
and why not) kept in sight under it.

The form scrolls rather than squeezes (issue 27). Its scroll area gives it the height its
texts need at the column's width (Qt's height-for-width), and:
- the column is never narrower than the form's own minimum: a larger desktop font made
  the form wider than a fixed 520 px column, cut at the right (there is no sideways
  scrolling) with its wrapped texts measured for one width and laid out at another;
- after each change of the form, Qt's pending layout work is done at once and the scroll
  area asked for the form's new height: it used to learn of a form grown by a line only
  after the form had been laid out (and painted) in its old height, the rows squeezed
  together, and of a wrapped text grown by a line (a longer message under a field) not at
  all until some later change.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QApplication, QFrame, QScrollArea, QVBoxLayout, QWidget

from ui.form.run_form import RunFormView

MIN_WIDTH = 520  # the form's column at its narrowest with the default font


class FormColumn(QWidget):
    def __init__(self, form: RunFormView) -> None:
        super().__init__()
        self.form = form
        self.scroll = QScrollArea()
        self.scroll.setWidget(form)
        self.scroll.setWidgetResizable(True)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        col = QVBoxLayout(self)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(0)
        col.addWidget(self.scroll, 1)
        col.addWidget(form.footer)
        form.changed.connect(self._form_changed)
        self.fit_width()

    def _form_changed(self) -> None:
        self.fit_width()
        QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        # A wrapped text grown by a line changes the form's height for its width, not its
        # minimum size, and nothing tells the scroll area: asked here.
        QApplication.sendEvent(self.scroll, QEvent(QEvent.Type.LayoutRequest))

    def fit_width(self) -> None:
        """The column as wide as the form needs at least (set again as the form changes)."""
        frame = 2 * self.scroll.frameWidth() if self.scroll.frameShape() != QFrame.Shape.NoFrame else 0
        need = self.form.minimumSizeHint().width() + self.scroll.verticalScrollBar().sizeHint().width() + frame
        width = max(MIN_WIDTH, need)
        if self.scroll.minimumWidth() != width:
            self.scroll.setMinimumWidth(width)
