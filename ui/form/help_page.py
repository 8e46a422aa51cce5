"""«Подробнее»: a form field's help page, the whole story its one-screen tooltip leaves out
(app.form.fields' FieldSpec.help_text, the facts of the lab's field guide), in the interface
language. Opened by the field's «?» button or F1 on the field."""

from __future__ import annotations

import html

from PySide6.QtWidgets import QDialog, QHBoxLayout, QPushButton, QTextBrowser, QVBoxLayout, QWidget

from app.base.i18n import t
from app.form import fields as F
from app.form.tooltips import glue_numbers


def help_html(name: str, default: object = None, lang: str | None = None) -> str:
    """The page as HTML: the field's label as the title, its paragraphs, «•» lines as a list."""
    spec = F.spec(name)
    parts = [f"<h3>{html.escape(spec.label_text(lang))}</h3>"]
    for para in glue_numbers(spec.help_text(lang, default)).split("\n\n"):
        lines = [x for x in para.split("\n") if x.strip()]
        bullets = [x for x in lines if x.lstrip().startswith("•")]
        head = [x for x in lines if not x.lstrip().startswith("•")]
        if head:
            parts.append("<p>" + "<br>".join(html.escape(x) for x in head) + "</p>")
        if bullets:
            parts.append("<ul>" + "".join(f"<li>{html.escape(x.lstrip()[1:].strip())}</li>" for x in bullets) + "</ul>")
    if spec.path:
        parts.append(f"<p><i>run.json: <code>{html.escape(spec.path)}</code></i></p>")
    return "\n".join(parts)


class HelpPage(QDialog):
    """One field's help page; `name` says which."""

    def __init__(self, name: str, default: object = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.setWindowTitle(t(f"Подробнее: {F.spec(name).label_text()}", f"More: {F.spec(name).label_text()}"))
        self.text = QTextBrowser()
        self.text.setOpenExternalLinks(False)
        self.text.setHtml(help_html(name, default))
        close = QPushButton(t("Закрыть", "Close"))  # Qt's standard button would stay English
        close.clicked.connect(self.reject)
        close.setDefault(True)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.text, 1)
        layout.addLayout(row)
        self.resize(560, 420)

    def plain_text(self) -> str:
        return self.text.toPlainText()
