"""Qt's own words in the interface language: the file dialogs' buttons and labels, a
dialog's «ОК» and «Отмена», the text fields' context menus. Qt ships them translated
(PySide6 carries qtbase_ru.qm in QLibraryInfo's translations folder); they were English in
the Russian interface (issue 27). Installed for Russian, taken out for English; Qt's own
number formatting (a spin box's decimal sign) follows the language too."""

from __future__ import annotations

import logging

from PySide6.QtCore import QLibraryInfo, QLocale, QTranslator
from PySide6.QtWidgets import QApplication

from app.base.i18n import current_language

log = logging.getLogger(__name__)

_LOCALES = {"ru": QLocale.Language.Russian, "en": QLocale.Language.English}
_installed: dict[int, QTranslator] = {}  # per application: the translator in use


def install(app: QApplication | None = None) -> bool:
    """Qt's words for the current interface language; False (and a line in the log) when
    Qt's translation is missing, which leaves them English."""
    app = app or QApplication.instance()  # type: ignore[assignment]
    if app is None:
        return False
    lang = current_language()
    QLocale.setDefault(QLocale(_LOCALES.get(lang, QLocale.Language.English)))
    old = _installed.pop(id(app), None)
    if old is not None:
        app.removeTranslator(old)
    if lang == "en":
        return True
    folder = QLibraryInfo.path(QLibraryInfo.LibraryPath.TranslationsPath)
    translator = QTranslator(app)
    if not translator.load(QLocale(_LOCALES[lang]), "qtbase", "_", folder):
        log.warning("Qt's own %s words (qtbase) are not in %s: its dialogs' buttons stay English", lang, folder)
        return False
    app.installTranslator(translator)
    _installed[id(app)] = translator
    return True
