"""The «Данные» (Data) window's decisions: what its tables show, which actions a row allows,
the `ternit data` commands it runs as child processes and how their output reads back.

The window stays thin: it shows these rows, asks the user, and runs the commands built here.
Adding and re-checking read every file (long for a big folder), so they run as
`python -m app.cli data add|check ...` in a child process with JSON progress lines
(TERNIT_PROGRESS=json); the instant ones (remove, rename) go straight to the Library, with the
very messages the command line prints.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from trainer.base.streams import UTF8_ENV

from ..base.i18n import in_language, t
from ..base.numbers import bytes_text, count_text
from .library import Dataset, Library, LibraryError, dataset_files, valid_constellation_name
from .progress import (
    PROGRESS_ENV,
    VAL_SAMPLE_WARNING,
    Progress,
    parse_progress_line,
    parse_warning_line,
    phase_name,
)

# --- what the tables show -------------------------------------------------------------------

STATUS_TEXT = {
    "ok": ("в порядке", "ok"),
    "changed": ("изменился", "changed"),
    "missing": ("нет на диске", "missing"),
    "unknown": ("…", "…"),
}


@dataclass(frozen=True)
class DatasetStatus:
    status: str  # ok | changed | missing | unknown
    detail: str = ""  # the tooltip: what differs and what to do

    @property
    def text(self) -> str:
        ru, en = STATUS_TEXT[self.status]
        return t(ru, en)


@dataclass(frozen=True)
class ConstellationRow:
    name: str
    builtin: bool
    datasets: str
    size: str
    documents: str
    characters: str
    tokens: str
    tooltip: str


@dataclass(frozen=True)
class DatasetRow:
    name: str
    path: str
    builtin: bool
    size: str
    constellations: list[str]
    tooltip: str




def constellation_rows(lib: Library) -> list[ConstellationRow]:
    rows = []
    for c in lib.constellations():
        tip = t("Встроенное: документация Python, без загрузки. Его не переименовать и не удалить.",
                "Builtin: the Python documentation, no download. It cannot be renamed or removed.") \
            if c.builtin else t(f"Наборы: {', '.join(c.datasets) or 'нет'}", f"Datasets: {', '.join(c.datasets) or 'none'}")
        if c.tokens is None:
            tip += t("\nТокены ещё не посчитаны: их считает подготовка данных («Подготовить данные» в форме).",
                     "\nTokens are not counted yet: preparing the data counts them (“Prepare data” in the form).")
        rows.append(ConstellationRow(
            name=c.name, builtin=c.builtin, datasets=", ".join(c.datasets) or "—", size=bytes_text(c.bytes),
            documents=str(c.documents), characters=count_text(c.characters),
            tokens=count_text(c.tokens) if c.tokens is not None else t("не посчитаны", "not counted"),
            tooltip=tip))
    return rows


def dataset_rows(lib: Library) -> list[DatasetRow]:
    rows = []
    for d in lib.datasets():
        builtin = d.kind == "builtin"
        files = t(f"файлов: {d.files}", f"files: {d.files}") + (
            t(f" (+{d.skipped} без текста)", f" (+{d.skipped} without text)") if d.skipped else "")
        tip = t(f"{files}, документов: {d.documents}, символов: {count_text(d.characters)}",
                f"{files}, documents: {d.documents}, characters: {count_text(d.characters)}")
        if builtin:
            tip += t("\nВстроенный набор созвездия demo: его не убрать.",
                     "\nThe builtin dataset of the demo constellation: it cannot be removed.")
        rows.append(DatasetRow(
            name=d.name, path=d.path or t("(встроенный: pydoc_data)", "(builtin: pydoc_data)"), builtin=builtin,
            size=bytes_text(d.bytes), constellations=list(d.constellations), tooltip=tip))
    return rows


def add_targets(lib: Library) -> list[str]:
    """Constellations a user's data can go into: their own (the builtin demo is the Python
    docs only, so a prepared "demo" always means the same text)."""
    return [c.name for c in lib.constellations() if not c.builtin]


# --- status without reading -----------------------------------------------------------------

def quick_status(lib: Library, ds: Dataset) -> DatasetStatus:
    """A dataset's files against what the library read, by their list, sizes and dates only
    (nothing is read, so it is quick). «Перепроверить» (`ternit data check`) reads the
    changed ones and tells whether their text really changed."""
    if ds.kind == "builtin":
        return DatasetStatus("ok")
    p = Path(ds.path)
    if not p.exists():
        return DatasetStatus("missing", t(
            f"Путь {p} больше не существует: верните файлы на место или уберите набор из библиотеки.",
            f"{p} no longer exists: put the files back, or remove the dataset from the library."))
    known = {f.relpath: f for f in lib.files(ds.name)}
    try:
        current = dataset_files(ds.kind, p)
    except OSError as exc:
        return DatasetStatus("unknown", str(exc))
    found = {rel: path for rel, path, _ in current}
    new = sorted(set(found) - set(known))
    gone = sorted(set(known) - set(found))
    touched = []
    for rel, path in found.items():
        old = known.get(rel)
        if old is None or old.status == "unreadable":
            continue
        try:
            st = path.stat()
        except OSError:
            touched.append(rel)
            continue
        if (st.st_size, st.st_mtime_ns) != (old.size, old.mtime_ns):
            touched.append(rel)
    if not (new or gone or touched):
        return DatasetStatus("ok", t("Файлы те же, что при добавлении (по размеру и дате).",
                                     "The files are as when added (by size and date)."))
    parts = [f"+ {r}" for r in new[:5]] + [f"- {r}" for r in gone[:5]] + [f"~ {r}" for r in touched[:5]]
    more = len(new) + len(gone) + len(touched) - len(parts)
    return DatasetStatus("changed", t(
        "Файлы изменились после добавления:\n", "The files changed since they were added:\n")
        + "\n".join(parts) + (t(f"\n… и ещё {more}", f"\n… and {more} more") if more > 0 else "")
        + t("\n«Перепроверить» прочтёт их заново; после этого подготовьте данные снова.",
            "\n“Re-check” reads them again; then prepare the data again."))


def quick_statuses(lib: Library) -> dict[str, DatasetStatus]:
    return {d.name: quick_status(lib, d) for d in lib.datasets()}


# --- the child processes --------------------------------------------------------------------

def cli_env() -> dict[str, str]:
    """Environment for `python -m app.cli data ...` run by the window (on top of its own):
    JSON progress, the window's language (a language set in this process is not in the
    child's settings), and UTF-8 streams (on Windows a pipe is otherwise the ANSI code page,
    and the window showed mojibake or died on «₽»)."""
    from ..base.i18n import current_language

    return {PROGRESS_ENV: "json", "TERNIT_LANG": current_language(), **UTF8_ENV}


def default_name(path: str | Path) -> str:
    """A dataset's (and a new constellation's) default name: the file's or folder's name, as
    `ternit data add` takes it without --name."""
    return Path(path).expanduser().resolve().stem


def add_command(path: str | Path, name: str, constellation: str) -> list[str]:
    """`python -m ...` arguments for adding `path` as dataset `name` to `constellation`."""
    return ["-m", "app.cli", "data", "add", str(path), "--name", name, "--constellation", constellation]


def check_command(names: list[str] | None = None) -> list[str]:
    return ["-m", "app.cli", "data", "check", "--json", *(names or [])]


def precheck_add(lib: Library, path: str | Path, name: str, constellation: str) -> str | None:
    """What is wrong with an add before a process starts (None: go). The command line would
    refuse these too, but in its own words ("--name"); the window says them its way."""
    if not str(path).strip():
        return t("Выберите файл или папку с текстом.", "Choose a text file or folder.")
    name = name.strip()
    if not name:
        return t("У набора должно быть имя.", "The dataset needs a name.")
    try:
        valid_constellation_name(constellation)
    except LibraryError:
        return t("Имя созвездия не может быть пустым или содержать запятую.",
                 "A constellation's name cannot be empty or hold a comma.")
    if constellation.strip() in {c.name for c in lib.constellations() if c.builtin}:
        return t(f"«{constellation.strip()}» — встроенное созвездие (документация Python); выберите своё.",
                 f"{constellation.strip()!r} is the builtin constellation (the Python docs); choose one of your own.")
    resolved = str(Path(path).expanduser().resolve())
    for d in lib.datasets():
        if d.name == name and d.path != resolved:
            where = d.path or t("встроенным набором", "a builtin dataset")
            return t(f"Имя «{name}» уже занято ({where}): выберите другое.",
                     f"The name {name!r} is already taken ({where}): choose another.")
    return None


@dataclass
class CliOutput:
    """A `ternit data` child's output, fed as it arrives: its latest progress, its
    messages (stderr lines that are not progress) and its stdout lines."""

    progress: Progress | None = None
    messages: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # {"warning": ...} lines: it went on regardless
    _err: str = ""
    _out: str = ""

    def feed_stderr(self, text: str) -> bool:
        """True when the progress changed."""
        self._err += text
        *complete, self._err = self._err.split("\n")
        moved = False
        for line in complete:
            p = parse_progress_line(line)
            if p is not None:
                self.progress, moved = p, True
                continue
            w = parse_warning_line(line)
            if w is not None:
                self.warnings.append(w)
            elif line.strip():
                self.messages.append(line.strip())
        return moved

    def feed_stdout(self, text: str) -> None:
        self._out += text
        *complete, self._out = self._out.split("\n")
        self.lines += [x.rstrip() for x in complete if x.strip()]

    def finish(self) -> None:
        if self._err.strip():
            self.feed_stderr("\n")
        if self._out.strip():
            self.feed_stdout("\n")

    def checks(self) -> dict[str, DatasetStatus]:
        """`ternit data check --json` lines as statuses."""
        out = {}
        for line in self.lines:
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if not isinstance(d, dict) or "name" not in d:
                continue
            out[str(d["name"])] = check_status(d)
        return out


def check_status(d: dict) -> DatasetStatus:
    status = d.get("status")
    if status == "unchanged":
        return DatasetStatus("ok", t("Перепроверен: текст тот же.", "Re-checked: the same text."))
    if status == "changed":
        changes = "\n".join(d.get("changes") or [])
        return DatasetStatus("changed", t(
            "Перепроверен: текст изменился, библиотека знает новый. Подготовьте данные снова — "
            "прежние подготовленные данные сделаны из старого текста.",
            "Re-checked: the text changed and the library now knows the new one. Prepare the data "
            "again: the data prepared before was made from the old text.") + (f"\n{changes}" if changes else ""))
    if status == "missing":
        return DatasetStatus("missing", str(d.get("message") or ""))
    return DatasetStatus("unknown", str(d.get("message") or ""))


def progress_text(p: Progress | None) -> str:
    if p is None:
        return ""
    name = phase_name(p.phase)
    if p.total:
        amount = f"{int(p.done)}/{int(p.total)}" if p.unit == "files" else f"{p.fraction or 0:.0%}"
        return f"{name}: {amount} {p.message}".rstrip()
    return f"{name} {p.message}".rstrip()


def failure_text(exit_code: int, out: CliOutput) -> str:
    """What the window says when a `ternit data` child failed: the command line's own message
    (its last lines, without the "ternit data:" prefix), never an empty box."""
    if exit_code == 130:
        return t("Отменено: в библиотеке ничего не изменилось.", "Cancelled: nothing changed in the library.")
    msgs = [m.removeprefix("ternit data:").strip() for m in out.messages]
    msgs = [m for m in msgs if m]
    if msgs:
        return "\n".join(msgs[-3:])
    return t(f"Команда завершилась с кодом {exit_code} без сообщения; повторите или выполните в терминале: "
             "ternit data list",
             f"The command ended with code {exit_code} and no message; try again, or run in a terminal: "
             "ternit data list")


def notes_text(out: CliOutput) -> str:
    """An add's summary line and its notes (skipped files, replaced bytes)."""
    return "\n".join(out.lines + out.messages)


# --- «Подготовить данные» in the main window ---------------------------------------------------

MAX_NOTE_LINES = 8  # warnings listed under the form; more in the tooltip, all in meta.json
MAX_TIP_LINES = 40  # a tooltip taller than the screen cannot be read


def prepare_command(constellations: list[str], context: int | None = None,
                    tokenizer: str | Path | None = None) -> list[str]:
    """`python -m ...` arguments for `ternit data prepare` of the ticked constellations (into
    the lab's prepared/ folder, where the form looks); a continued run passes its checkpoint's
    tokenizer."""
    args = ["-m", "app.cli", "data", "prepare", "--constellations", ",".join(constellations)]
    if context is not None:
        args += ["--context", str(context)]
    if tokenizer is not None:
        args += ["--tokenizer", str(tokenizer)]
    return args


def prepare_started_text(constellations: list[str]) -> str:
    names = ", ".join(constellations)
    return t(f"Подготовка данных «{names}»…", f"Preparing the data of {names!r}…")


PREPARE_CANCEL_TIP = ("Остановить подготовку: незаконченная папка удаляется, форма её не увидит.",
                      "Stop preparing: the unfinished folder is removed; the form never sees it.")


@dataclass(frozen=True)
class PrepareOutcome:
    """How a prepare ended, for the window: `note` stays under the form until the next prepare
    (empty: nothing to keep), `status` is the status bar's line, `tooltip` the full note."""

    level: str  # ok | warning | error | cancelled
    status: str
    note: str
    tooltip: str
    folder: str | None  # the prepared folder (success only)


def prepare_outcome(exit_code: int, out: CliOutput, constellations: list[str]) -> PrepareOutcome:
    """What the window says when `ternit data prepare` ended.

    Success: the warnings (skipped files and datasets, replaced bytes, too little text for the
    vocabulary or the held-out sample) stay in sight — they are why a run may disappoint or not
    start. Failure: the command's own message and what to do from the window. Cancelled: says
    that nothing was left behind."""
    names = ", ".join(constellations)
    if exit_code == 0:
        folder = next((x for x in out.lines if not x.startswith(" ")), None)
        status = t(f"Данные «{names}» подготовлены", f"The data of {names!r} is prepared")
        # In today's language (the child wrote both); the held-out sample's size is the
        # form's to say, for its own context («по 1024» stayed here for a context of 128).
        warnings = [in_language(w) for w in out.warnings if getattr(w, "key", "") != VAL_SAMPLE_WARNING]
        if not warnings:
            return PrepareOutcome("ok", status, "", "", folder)
        shown = warnings[:MAX_NOTE_LINES]
        more = len(warnings) - len(shown)
        head = t(f"Данные «{names}» подготовлены, но обратите внимание:",
                 f"The data of {names!r} is prepared, but note:")
        lines = [head, *(f"• {w}" for w in shown)]
        if more:
            lines.append(t(f"… и ещё {more} (наведите мышь; все — в meta.json папки данных)",
                           f"… and {more} more (hover here; all of them are in the data folder's meta.json)"))
        tip = warnings[:MAX_TIP_LINES]
        rest = len(warnings) - len(tip)
        full = "\n".join([head, *(f"• {w}" for w in tip)]
                         + ([t(f"… и ещё {rest} — в meta.json", f"… and {rest} more: see meta.json")] if rest else [])
                         + ([folder] if folder else []))
        return PrepareOutcome("warning", status + t(" — с предупреждениями", " — with warnings"),
                              "\n".join(lines), full, folder)
    if exit_code == 130:
        text = t("Подготовка данных отменена: незаконченная папка удалена, подготовленных данных не прибавилось.",
                 "Preparing the data was cancelled: the unfinished folder was removed; no prepared data was added.")
        return PrepareOutcome("cancelled", text, text, "", None)
    msgs = [m.removeprefix("ternit data:").strip() for m in out.messages]
    msgs = [m for m in msgs if m]
    said = "\n".join(msgs[-3:]) if msgs else t(
        f"команда завершилась с кодом {exit_code} без сообщения", f"the command ended with code {exit_code} and no message")
    what = t("Что делать: наборы и созвездия — в «Лаборатория → Данные…» (там же «Перепроверить»); "
             "исправьте и нажмите «Подготовить данные» снова.",
             "What to do: datasets and constellations are in «Lab → Data…» (with «Re-check»); fix it and "
             "press «Prepare data» again.")
    head = t(f"Подготовить данные «{names}» не удалось:", f"Preparing the data of {names!r} failed:")
    note = f"{head}\n{said}\n{what}"
    return PrepareOutcome("error", t("Подготовка данных не удалась", "Preparing the data failed"), note, note, None)


# --- the instant actions (the command line prints the same messages) --------------------------

def remove_dataset(lib: Library, name: str, constellation: str | None = None) -> str:
    if lib.dataset(name).kind == "builtin":
        # Nothing could put it back: the demo would stay empty for good.
        raise LibraryError(t(f"«{name}» — встроенный набор созвездия demo: его не убрать",
                             f"{name!r} is the demo constellation's builtin dataset: it cannot be removed"),
                           exit_code=2)
    if constellation:
        if constellation not in lib.dataset(name).constellations:
            raise LibraryError(t(f"набора «{name}» нет в созвездии «{constellation}»",
                                 f"dataset {name!r} is not in the constellation {constellation!r}"))
        lib.remove_from_constellation(constellation, name)
        return t(f"набор «{name}» убран из созвездия «{constellation}» (файлы на диске не тронуты)",
                 f"dataset {name!r} taken out of the constellation {constellation!r} (files on disk untouched)")
    lib.remove(name)
    return t(f"набор «{name}» убран из библиотеки (файлы на диске не тронуты)",
             f"dataset {name!r} removed from the library (files on disk untouched)")


def rename_constellation(lib: Library, old: str, new: str) -> str:
    lib.rename_constellation(old, new)
    return t(f"созвездие «{old}» теперь называется «{new.strip()}» (подготовленные данные и прогоны "
             "помнят старое имя)",
             f"the constellation {old!r} is now {new.strip()!r} (prepared data and runs keep the old name)")


def remove_constellation(lib: Library, name: str) -> str:
    lib.remove_constellation(name)
    return t(f"созвездие «{name}» удалено (наборы остались в библиотеке; подготовленные данные и "
             "прогоны не тронуты)",
             f"the constellation {name!r} is removed (its datasets stay in the library; prepared data "
             "and runs are untouched)")


def confirm_remove_text(name: str, constellation: str | None) -> str:
    if constellation:
        return t(f"Убрать набор «{name}» из созвездия «{constellation}»? Набор останется в библиотеке, "
                 "файлы на диске не тронуты.",
                 f"Take the dataset {name!r} out of the constellation {constellation!r}? It stays in the "
                 "library; the files on disk are untouched.")
    return t(f"Убрать набор «{name}» из библиотеки и из всех созвездий? Файлы на диске не тронуты: "
             "лаборатория их только читала.",
             f"Remove the dataset {name!r} from the library and from every constellation? The files on "
             "disk are untouched: the lab only read them.")


def confirm_remove_constellation_text(name: str) -> str:
    return t(f"Удалить созвездие «{name}»? Его наборы останутся в библиотеке, файлы на диске не тронуты; "
             "подготовленные данные и прогоны не изменятся.",
             f"Remove the constellation {name!r}? Its datasets stay in the library and the files on disk "
             "are untouched; prepared data and runs do not change.")
