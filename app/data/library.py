"""The dataset library: named sources of text, their files and hashes, and constellations.

A dataset is a file or a folder (recursive) of .txt/.md, .jsonl (a "text" field) and .gz of
those. Adding one reads every file once (sha256, documents, characters, replacements) and
records it in the state database. Adding it again reads only files whose size or mtime
changed; unchanged content changes nothing in the database, changed content is reported
file by file. A constellation («созвездие») is a named group of datasets.

The demo constellation "demo" holds one builtin dataset: the Python documentation topics
that ship with every interpreter (pydoc_data), so a fresh machine can train at once.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..base.i18n import t
from ..base.numbers import plural_ru
from ..base.state import State, now, open_state
from . import readers
from .progress import CancelToken, ProgressFn, Reporter, check

DEMO_DATASET = "python-docs"
DEMO_CONSTELLATION = "demo"


class LibraryError(Exception):
    """A data-library operation that cannot be done; the message says why and what to do.

    exit_code 2 for a path that does not exist or cannot be read (the CLI's rule), 1 otherwise.
    """

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class FileRecord:
    relpath: str
    size: int
    mtime_ns: int
    sha256: str
    status: str
    documents: int = 0
    characters: int = 0
    replaced: int = 0
    note: str = ""


@dataclass
class Dataset:
    id: int
    name: str
    path: str
    kind: str
    sha256: str
    bytes: int
    documents: int
    characters: int
    files: int
    skipped: int
    replaced: int
    constellations: list[str] = field(default_factory=list)
    tokens: int | None = None  # from the latest prepare of exactly this content


@dataclass
class Constellation:
    name: str
    description: str
    builtin: bool
    datasets: list[str]
    bytes: int
    documents: int
    characters: int
    tokens: int | None


@dataclass
class AddResult:
    dataset: Dataset
    status: str  # added | unchanged | changed
    changes: list[str] = field(default_factory=list)  # "+ a.txt", "~ b.txt", "- c.txt"
    notes: list[str] = field(default_factory=list)  # skipped files, replacements


def unreadable_text(path: Path, windows: bool = os.name == "nt") -> str:
    """A path the lab may not read, and how to allow it on this OS."""
    how = (t("в «Свойства → Безопасность»", "in Properties → Security") if windows else "(chmod u+rX)")
    return t(f"нет доступа на чтение: {path} — дайте себе право чтения {how} или скопируйте файлы в свою папку",
             f"not readable: {path} — give yourself read access {how} or copy the files into a folder of your own")


def valid_constellation_name(name: str) -> str:
    """The name stripped; empty or with a comma (the list separator of `--constellations
    A,B`) is refused."""
    name = name.strip()
    if not name or "," in name:
        raise LibraryError(t(f"недопустимое имя созвездия: {name!r} (не пустое и без запятых)",
                             f"not a valid constellation name: {name!r} (not empty, no commas)"), exit_code=2)
    return name


# --- scanning -------------------------------------------------------------------------------

def list_files(root: Path) -> list[tuple[str, Path, str]]:
    """(relpath, path, format) of the files under a folder, in a fixed order. Hidden folders
    and files (.git, .cache) are not data. A file without a known suffix is read as plain
    text, as a single file is: its content decides (a binary one is skipped with a note
    naming it when it is read), so a folder of `chapter-01` files is not refused."""
    found: list[tuple[str, Path, str]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for fname in sorted(filenames):
            if fname.startswith("."):
                continue
            p = Path(dirpath) / fname
            if not p.is_file():  # a pipe, socket or device would block the reader or never end
                continue
            found.append((p.relative_to(root).as_posix(), p, readers.format_of(p, explicit=True) or "text"))
    return found


def dataset_files(kind: str, path: Path) -> list[tuple[str, Path, str]]:
    if kind == "file":
        return [(path.name, path, readers.format_of(path, explicit=True) or "text")]
    return list_files(path)


def content_hash(files: list[FileRecord]) -> str:
    """A dataset's hash: its readable files' names and contents, in order."""
    h = hashlib.sha256(b"ternit-dataset-1\n")
    for f in files:
        if f.status == "ok":
            h.update(f"{f.relpath}\0{f.sha256}\n".encode())
    return h.hexdigest()


def scan(kind: str, path: Path, previous: dict[str, FileRecord] | None = None,
         progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> list[FileRecord]:
    """Read a dataset's files: a file whose size and mtime match `previous` is not read again."""
    previous = previous or {}
    entries = dataset_files(kind, path)
    report = Reporter(progress)
    out: list[FileRecord] = []
    for i, (rel, p, fmt) in enumerate(entries):
        check(cancel)
        report("scan", i, len(entries), "files", rel)
        try:
            st = p.stat()
        except OSError as exc:
            out.append(FileRecord(rel, 0, 0, "", "unreadable", note=str(exc.strerror or exc)))
            continue
        old = previous.get(rel)
        # A file that had bytes replaced is read again even if unchanged: the reader may
        # read it better now (cp1251 text was once read as broken UTF-8).
        if old and old.size == st.st_size and old.mtime_ns == st.st_mtime_ns and old.sha256 and not old.replaced:
            out.append(old)
            continue
        stats = readers.FileStats()
        for _ in readers.iter_file_units(p, fmt, stats):
            pass
        out.append(FileRecord(rel, st.st_size, st.st_mtime_ns, stats.sha256, stats.status,
                              stats.documents, stats.characters, stats.replaced, stats.note))
    report("scan", len(entries), len(entries), "files", force=True)
    return out


def _demo_topics() -> list[tuple[str, str]]:
    from pydoc_data import topics  # ships with CPython: no download

    return sorted(topics.topics.items())


def demo_sha256() -> str:
    h = hashlib.sha256(b"ternit-demo-1\n")
    h.update(json.dumps(_demo_topics(), ensure_ascii=False).encode())
    return h.hexdigest()


def iter_demo_units() -> Iterator[tuple[str, bool]]:
    for _, text in _demo_topics():
        if text.strip():
            yield from readers.split_document(text)


# --- the library ----------------------------------------------------------------------------

class Library:
    """Datasets and constellations in the lab's state database."""

    def __init__(self, state: State | None = None) -> None:
        self.state = state or open_state()
        self.ensure_demo()

    # datasets
    def add(self, path: str | Path, name: str | None = None, constellation: str | None = None,
            progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> AddResult:
        p = Path(path).expanduser()
        if not p.exists():
            raise LibraryError(t(f"нет такого пути: {p}", f"no such path: {p}"), exit_code=2)
        if not os.access(p, os.R_OK) or (p.is_dir() and not os.access(p, os.X_OK)):
            raise LibraryError(unreadable_text(p), exit_code=2)
        p = p.resolve()
        if not (p.is_dir() or p.is_file()):
            raise LibraryError(t(f"{p} — не обычный файл и не папка (канал, сокет или устройство): такое "
                                 "не читается как набор данных. Сохраните текст в файл и добавьте его.",
                                 f"{p} is neither a regular file nor a folder (a pipe, socket or device): it "
                                 "cannot be read as a dataset. Save the text to a file and add that."), exit_code=2)
        kind = "folder" if p.is_dir() else "file"
        name = (name or p.stem).strip()
        if not name:
            raise LibraryError(t("у набора должно быть имя (--name)", "a dataset needs a name (--name)"))
        if constellation is not None:
            # Refused before anything is read or stored: a bad name found after the store
            # left the dataset added under an error message.
            constellation = valid_constellation_name(constellation)
            builtin = self.state.one("SELECT 1 FROM constellations WHERE name = ? AND builtin", (constellation,))
            if builtin is not None:
                # The demo is the Python docs only, so a prepared "demo" always means that text.
                raise LibraryError(t(
                    f"«{constellation}» — встроенное созвездие (документация Python); выберите своё --constellation",
                    f"{constellation!r} is the builtin constellation (the Python docs); choose your own --constellation",
                ), exit_code=2)
        row = self.state.one("SELECT * FROM datasets WHERE name = ?", (name,))
        if row is not None and row["path"] != str(p):
            raise LibraryError(t(
                f"имя «{name}» уже занято набором {row['path'] or 'встроенным'}; выберите другое --name",
                f"the name {name!r} is already used by {row['path'] or 'a builtin dataset'}; choose another --name",
            ))
        previous = self._files(row["id"]) if row is not None else {}
        files = scan(kind, p, previous, progress, cancel)
        if kind == "folder" and not files:
            raise LibraryError(t(f"в папке {p} нет файлов", f"the folder {p} has no files"), exit_code=2)
        if row is None and not any(f.status == "ok" for f in files):
            # A binary or empty file added by mistake would otherwise sit in the library
            # (and in its constellation) as a dataset of nothing.
            why = "; ".join(f"{f.relpath}: {f.note}" for f in files[:3] if f.note)
            raise LibraryError(t(f"в {p} нет текста ({why}): ничего не добавлено. Лаборатория читает ",
                                 f"{p} holds no text ({why}): nothing was added. The lab reads ")
                               + readers.what_is_read(), exit_code=2)
        # The dataset and its constellation stand or fall together: an add cancelled (or
        # failing) between the two must not leave half of it in the library.
        with self.state.transaction():
            result = self._store(row, name, p, kind, files)
            if constellation:
                self.add_to_constellation(constellation, name)
                result.dataset = self.dataset(name)
        return result

    def refresh(self, name: str, progress: ProgressFn | None = None,
                cancel: CancelToken | None = None) -> AddResult:
        """Re-check a dataset's files (only changed ones are read); a vanished path is an error."""
        ds = self.dataset(name)
        if ds.kind == "builtin":
            return AddResult(ds, "unchanged")
        p = Path(ds.path)
        if not p.exists():
            raise LibraryError(t(
                f"набор «{name}»: путь {p} больше не существует (верните файлы или удалите набор: ternit data remove {name})",
                f"dataset {name!r}: {p} no longer exists (restore it, or remove the dataset: ternit data remove {name})",
            ), exit_code=2)
        row = self.state.one("SELECT * FROM datasets WHERE id = ?", (ds.id,))
        files = scan(ds.kind, p, self._files(ds.id), progress, cancel)
        return self._store(row, name, p, ds.kind, files)

    def _files(self, dataset_id: int) -> dict[str, FileRecord]:
        rows = self.state.query("SELECT * FROM dataset_files WHERE dataset_id = ?", (dataset_id,))
        return {r["relpath"]: FileRecord(r["relpath"], r["size"], r["mtime_ns"], r["sha256"], r["status"],
                                         r["documents"], r["characters"], r["replaced"], r["note"])
                for r in rows}

    def _store(self, row, name: str, p: Path, kind: str, files: list[FileRecord]) -> AddResult:
        sha = content_hash(files)
        ok = [f for f in files if f.status == "ok"]
        notes = [f"{f.relpath}: {f.note}" for f in files if f.note]
        replaced = sum(f.replaced for f in ok)
        if replaced:
            one = replaced == 1
            notes.append(t(
                f"{replaced} {plural_ru(replaced, 'последовательность', 'последовательности', 'последовательностей')} "
                f"байт не в UTF-8 {plural_ru(replaced, 'заменена', 'заменены', 'заменены')} на «\ufffd»",
                f"{replaced} byte {'sequence' if one else 'sequences'} that {'was' if one else 'were'} not UTF-8 "
                f"{'was' if one else 'were'} replaced with \"\ufffd\"",
            ))
        totals = dict(bytes=sum(f.size for f in ok), documents=sum(f.documents for f in ok),
                      characters=sum(f.characters for f in ok), files=len(ok),
                      skipped=len(files) - len(ok), replaced=replaced)
        old_files = self._files(row["id"]) if row is not None else {}
        new_files = {f.relpath: f for f in files}
        if row is not None and row["sha256"] == sha and set(old_files) == set(new_files) and all(
            (o.size, o.mtime_ns, o.replaced) == (new_files[k].size, new_files[k].mtime_ns, new_files[k].replaced)
            for k, o in old_files.items()
        ):
            return AddResult(self.dataset(name), "unchanged", [], notes)
        changes = [f"+ {k}" for k in new_files if k not in old_files]
        changes += [f"- {k}" for k in old_files if k not in new_files]
        changes += [f"~ {k}" for k, f in new_files.items() if k in old_files and old_files[k].sha256 != f.sha256]
        ts = now()
        with self.state.transaction():
            if row is None:
                cur = self.state.execute(
                    "INSERT INTO datasets (name, path, kind, sha256, bytes, documents, characters, files,"
                    " skipped, replaced, added_at, changed_at, scanned_at)"
                    " VALUES (:name, :path, :kind, :sha, :bytes, :documents, :characters, :files,"
                    " :skipped, :replaced, :ts, :ts, :ts)",
                    dict(name=name, path=str(p), kind=kind, sha=sha, ts=ts, **totals))
                ds_id = int(cur.lastrowid)
                status = "added"
            else:
                ds_id = int(row["id"])
                changed = row["sha256"] != sha
                self.state.execute(
                    "UPDATE datasets SET sha256 = :sha, bytes = :bytes, documents = :documents,"
                    " characters = :characters, files = :files, skipped = :skipped, replaced = :replaced,"
                    " changed_at = CASE WHEN :changed THEN :ts ELSE changed_at END, scanned_at = :ts"
                    " WHERE id = :id",
                    dict(sha=sha, ts=ts, id=ds_id, changed=changed, **totals))
                status = "changed" if changed else "unchanged"
                self.state.execute("DELETE FROM dataset_files WHERE dataset_id = ?", (ds_id,))
            self.state.executemany(
                "INSERT INTO dataset_files (dataset_id, relpath, size, mtime_ns, sha256, status,"
                " documents, characters, replaced, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(ds_id, f.relpath, f.size, f.mtime_ns, f.sha256, f.status, f.documents,
                  f.characters, f.replaced, f.note) for f in files])
        return AddResult(self.dataset(name), status, changes if status == "changed" else [], notes)

    def remove(self, name: str) -> None:
        ds = self.dataset(name)
        self.state.execute("DELETE FROM datasets WHERE id = ?", (ds.id,))

    def dataset(self, name: str) -> Dataset:
        found = [d for d in self.datasets() if d.name == name]
        if not found:
            raise LibraryError(t(f"нет набора «{name}» (ternit data list)", f"no dataset {name!r} (ternit data list)"),
                               exit_code=2)
        return found[0]

    def datasets(self) -> list[Dataset]:
        rows = self.state.query("SELECT * FROM datasets ORDER BY name")
        member = {}
        for r in self.state.query(
            "SELECT cd.dataset_id, c.name FROM constellation_datasets cd"
            " JOIN constellations c ON c.id = cd.constellation_id ORDER BY c.name"
        ):
            member.setdefault(r["dataset_id"], []).append(r["name"])
        tokens = self._known_tokens()
        return [Dataset(r["id"], r["name"], r["path"], r["kind"], r["sha256"], r["bytes"], r["documents"],
                        r["characters"], r["files"], r["skipped"], r["replaced"],
                        member.get(r["id"], []), tokens.get((r["name"], r["sha256"])))
                for r in rows]

    def _known_tokens(self) -> dict[tuple[str, str], int]:
        """Token counts from the newest prepare that saw each (dataset, content)."""
        out: dict[tuple[str, str], int] = {}
        for r in self.state.query(
            "SELECT ps.dataset_name, ps.dataset_sha256, ps.tokens FROM prepared_sources ps"
            " JOIN prepared p ON p.id = ps.prepared_id ORDER BY p.created_at"
        ):
            out[(r["dataset_name"], r["dataset_sha256"])] = int(r["tokens"])
        return out

    def files(self, name: str) -> list[FileRecord]:
        ds = self.dataset(name)
        return sorted(self._files(ds.id).values(), key=lambda f: f.relpath)

    def iter_units(self, ds: Dataset) -> Iterator[tuple[str, bool, readers.FileStats]]:
        """The dataset's text as units, with each file's stats (filled as it is read)."""
        if ds.kind == "builtin":
            stats = readers.FileStats()
            for unit, end in iter_demo_units():
                yield unit, end, stats
            return
        for _rel, p, fmt in dataset_files(ds.kind, Path(ds.path)):
            stats = readers.FileStats()
            for unit, end in readers.iter_file_units(p, fmt, stats):
                yield unit, end, stats

    # constellations
    def create_constellation(self, name: str, description: str = "", builtin: bool = False) -> None:
        name = valid_constellation_name(name)
        self.state.execute(
            "INSERT OR IGNORE INTO constellations (name, description, builtin, created_at) VALUES (?, ?, ?, ?)",
            (name, description, int(builtin), now()))

    def add_to_constellation(self, constellation: str, dataset: str) -> None:
        ds = self.dataset(dataset)
        with self.state.transaction():
            self.create_constellation(constellation)
            self.state.execute(
                "INSERT OR IGNORE INTO constellation_datasets (constellation_id, dataset_id, added_at)"
                " SELECT id, ?, ? FROM constellations WHERE name = ?", (ds.id, now(), constellation))

    def remove_from_constellation(self, constellation: str, dataset: str) -> None:
        ds = self.dataset(dataset)
        self.state.execute(
            "DELETE FROM constellation_datasets WHERE dataset_id = ? AND constellation_id ="
            " (SELECT id FROM constellations WHERE name = ?)", (ds.id, constellation))

    def rename_constellation(self, old: str, new: str) -> None:
        """A new name for a constellation (its datasets stay). Prepared folders and runs keep
        the name they were made with: they record what they used."""
        c = self._own_constellation(old)
        new = valid_constellation_name(new)
        if new != c.name and any(x.name == new for x in self.constellations()):
            raise LibraryError(t(f"созвездие «{new}» уже есть", f"a constellation {new!r} already exists"),
                               exit_code=2)
        self.state.execute("UPDATE constellations SET name = ? WHERE name = ?", (new, c.name))

    def remove_constellation(self, name: str) -> None:
        """Forget a constellation; its datasets stay in the library (and in other constellations)."""
        c = self._own_constellation(name)
        self.state.execute("DELETE FROM constellations WHERE name = ?", (c.name,))

    def _own_constellation(self, name: str) -> Constellation:
        c = self.constellation(name)
        if c.builtin:
            raise LibraryError(t(f"«{name}» — встроенное созвездие: его не переименовать и не удалить",
                                 f"{name!r} is a builtin constellation: it cannot be renamed or removed"),
                               exit_code=2)
        return c

    def constellations(self) -> list[Constellation]:
        by_name = {d.name: d for d in self.datasets()}
        out = []
        for r in self.state.query("SELECT * FROM constellations ORDER BY builtin DESC, name"):
            names = [x["name"] for x in self.state.query(
                "SELECT d.name FROM constellation_datasets cd JOIN datasets d ON d.id = cd.dataset_id"
                " WHERE cd.constellation_id = ? ORDER BY d.name", (r["id"],))]
            members = [by_name[n] for n in names]
            tokens = [m.tokens for m in members]
            out.append(Constellation(
                r["name"], r["description"], bool(r["builtin"]), names,
                sum(m.bytes for m in members), sum(m.documents for m in members),
                sum(m.characters for m in members),
                sum(tokens) if members and all(x is not None for x in tokens) else None))  # type: ignore[misc]
        return out

    def constellation(self, name: str) -> Constellation:
        for c in self.constellations():
            if c.name == name:
                return c
        known = ", ".join(c.name for c in self.constellations()) or "-"
        raise LibraryError(t(f"нет созвездия «{name}» (есть: {known})", f"no constellation {name!r} (known: {known})"),
                           exit_code=2)

    # the demo
    def ensure_demo(self) -> None:
        """The builtin Python-docs dataset in the "demo" constellation (kept current with the
        interpreter: a new Python brings new topics, hence a new hash)."""
        sha = demo_sha256()
        row = self.state.one("SELECT id, sha256 FROM datasets WHERE name = ? AND kind = 'builtin'", (DEMO_DATASET,))
        if row is not None and row["sha256"] == sha:
            return
        stats = readers.FileStats()
        units = list(iter_demo_units())
        documents = sum(1 for _, end in units if end)
        characters = sum(len(u) for u, _ in units)
        size = sum(len(u.encode()) for u, _ in units)
        ts = now()
        with self.state.transaction():
            # Looked at again under the write lock: several `ternit` commands on a fresh lab
            # seed at once, and the first one's row must not make the others' INSERT fail.
            row = self.state.one("SELECT id, sha256 FROM datasets WHERE name = ? AND kind = 'builtin'", (DEMO_DATASET,))
            if row is not None and row["sha256"] == sha:
                return
            if self.state.one("SELECT 1 FROM datasets WHERE name = ? AND kind != 'builtin'", (DEMO_DATASET,)):
                return  # the user took the name for their own data: leave it
            if row is None:
                self.state.execute(
                    "INSERT INTO datasets (name, path, kind, sha256, bytes, documents, characters, files,"
                    " skipped, replaced, added_at, changed_at, scanned_at)"
                    " VALUES (?, '', 'builtin', ?, ?, ?, ?, 1, 0, ?, ?, ?, ?)",
                    (DEMO_DATASET, sha, size, documents, characters, stats.replaced, ts, ts, ts))
            else:
                self.state.execute(
                    "UPDATE datasets SET sha256 = ?, bytes = ?, documents = ?, characters = ?,"
                    " changed_at = ?, scanned_at = ? WHERE id = ?",
                    (sha, size, documents, characters, ts, ts, row["id"]))
            self.create_constellation(DEMO_CONSTELLATION, "Python documentation (pydoc_data)", builtin=True)
            self.state.execute(
                "INSERT OR IGNORE INTO constellation_datasets (constellation_id, dataset_id, added_at)"
                " SELECT c.id, d.id, ? FROM constellations c, datasets d WHERE c.name = ? AND d.name = ?",
                (ts, DEMO_CONSTELLATION, DEMO_DATASET))


def constellation_summaries(state: State | None = None) -> list[dict]:
    """Constellations as plain dicts for the window's form: name, description, builtin,
    datasets, bytes, documents, characters, tokens (known from a prepare of exactly this
    content, else None)."""
    lib = Library(state)
    try:
        texts = {d.name: d.sha256 for d in lib.datasets() if d.documents}  # a prepare skips the empty ones
        return [
            {"name": c.name, "description": c.description, "builtin": c.builtin, "datasets": c.datasets,
             "bytes": c.bytes, "documents": c.documents, "characters": c.characters, "tokens": c.tokens,
             "content": {n: texts[n] for n in c.datasets if n in texts}}
            for c in lib.constellations()
        ]
    finally:
        if state is None:
            lib.state.close()
