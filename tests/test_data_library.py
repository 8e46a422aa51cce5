"""The dataset library: reading formats, counts, hashes, change detection, bad input, demo."""

from __future__ import annotations

import codecs
import gzip
import json
import os
from pathlib import Path

import pytest

from app.base.state import open_state
from app.data import readers
from app.data.library import DEMO_CONSTELLATION, DEMO_DATASET, Library, LibraryError
from app.data.textgen import documents


@pytest.fixture
def lib(tmp_path) -> Library:
    st = open_state(tmp_path / "state.sqlite")
    yield Library(st)
    st.close()


def write_corpus(root: Path) -> dict[str, list[str]]:
    """A folder of every format the lab reads, nested; returns each file's documents."""
    docs = documents(12, seed=1)
    files: dict[str, list[str]] = {}
    (root / "ru").mkdir(parents=True)
    (root / "ru" / "deep").mkdir()
    (root / "ru" / "a.txt").write_text(docs[0], encoding="utf-8")
    files["ru/a.txt"] = [docs[0]]
    (root / "ru" / "deep" / "b.md").write_text(docs[1], encoding="utf-8")
    files["ru/deep/b.md"] = [docs[1]]
    jl = [docs[2], docs[3], docs[4]]
    (root / "c.jsonl").write_text(
        "".join(json.dumps({"text": d, "id": i}, ensure_ascii=False) + "\n" for i, d in enumerate(jl)),
        encoding="utf-8")
    files["c.jsonl"] = jl
    with gzip.open(root / "d.txt.gz", "wt", encoding="utf-8") as f:
        f.write(docs[5])
    files["d.txt.gz"] = [docs[5]]
    with gzip.open(root / "e.jsonl.gz", "wt", encoding="utf-8") as f:
        for d in docs[6:9]:
            f.write(json.dumps({"text": d}) + "\n")
    files["e.jsonl.gz"] = docs[6:9]
    # No known suffix: taken by content, as a single file is (issue 16: a folder of such
    # files was refused as "no text files"); a binary one is skipped and named in a note.
    chapter = "Глава первая. Мороз и солнце; день чудесный! Ещё ты дремлешь, друг прелестный.\n"
    (root / "chapter-01").write_text(chapter, encoding="cp1251")
    files["chapter-01"] = [chapter]
    (root / "picture.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    (root / ".git").mkdir()
    (root / ".git" / "x.txt").write_text("hidden folders are not data")
    return files


def test_every_format_is_read_with_exact_counts(lib, tmp_path):
    files = write_corpus(tmp_path / "corpus")
    res = lib.add(tmp_path / "corpus", name="mix", constellation="мои")
    d = res.dataset
    assert res.status == "added"
    all_docs = [doc for docs in files.values() for doc in docs]
    assert d.files == len(files) and d.skipped == 1
    assert any(n.startswith("picture.png: ") for n in res.notes)
    assert d.documents == len(all_docs)
    assert d.characters == sum(len(x) for x in all_docs)
    assert d.bytes == sum((tmp_path / "corpus" / rel).stat().st_size for rel in files)
    assert d.constellations == ["мои"] and d.kind == "folder"
    assert sorted(f.relpath for f in lib.files("mix") if f.status == "ok") == sorted(files)
    # Reading back gives the very documents that were written, in every format.
    for rel, expected in files.items():
        got, stats = readers.read_whole(tmp_path / "corpus" / rel, readers.format_of(Path(rel), explicit=True))
        assert got == expected and stats.status == "ok" and stats.replaced == 0


def test_readding_unchanged_changes_nothing_and_changes_are_detected(lib, tmp_path, monkeypatch):
    root = tmp_path / "corpus"
    write_corpus(root)
    first = lib.add(root, name="mix")

    def dump():
        return ([tuple(r) for r in lib.state.query("SELECT * FROM datasets ORDER BY id")],
                [tuple(r) for r in lib.state.query("SELECT * FROM dataset_files ORDER BY relpath")])

    before = dump()
    reads: list[Path] = []
    real = readers.iter_file_units

    def counting(path, fmt, stats):
        reads.append(path)
        return real(path, fmt, stats)

    monkeypatch.setattr(readers, "iter_file_units", counting)
    again = lib.add(root, name="mix")
    assert again.status == "unchanged" and again.changes == []
    assert dump() == before  # not even a timestamp moved
    assert reads == []  # unchanged files (size, mtime) are not read again

    (root / "ru" / "a.txt").write_text("Совсем другой текст.\n", encoding="utf-8")
    (root / "new.md").write_text("A new file.\n", encoding="utf-8")
    (root / "c.jsonl").unlink()
    changed = lib.add(root, name="mix")
    assert changed.status == "changed"
    assert sorted(changed.changes) == ["+ new.md", "- c.jsonl", "~ ru/a.txt"]
    assert changed.dataset.sha256 != first.dataset.sha256
    assert sorted(p.name for p in reads) == ["a.txt", "new.md"]  # only what changed was read
    # refresh() is the same check the prepare step runs
    assert lib.refresh("mix").status == "unchanged"


def test_touching_a_file_without_changing_it_is_not_a_change(lib, tmp_path):
    f = tmp_path / "one.txt"
    f.write_text("Один документ. One document.\n", encoding="utf-8")
    first = lib.add(f)
    assert first.dataset.name == "one" and first.dataset.kind == "file"
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 5_000_000_000))
    again = lib.add(f)
    assert again.status == "unchanged" and again.dataset.sha256 == first.dataset.sha256


def test_bad_files_are_skipped_with_notes_not_crashes(lib, tmp_path):
    root = tmp_path / "bad"
    root.mkdir()
    (root / "good.txt").write_text("Хороший текст. Good text.\n", encoding="utf-8")
    # latin-1 / cp1251 bytes: decoded with replacement, counted; a genuine U+FFFD is not counted
    (root / "latin.txt").write_bytes("café naïve \ufffd ok\n".encode("utf-8").replace("é".encode(), b"\xe9"))
    (root / "cp1251.txt").write_bytes("Привет".encode("cp1251") + b"\n")
    (root / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4)
    (root / "empty.md").write_bytes(b"")
    (root / "spaces.txt").write_text("   \n\n\t\n")
    (root / "broken.txt.gz").write_bytes(b"\x1f\x8b\x08\x00 this is not gzip at all")
    (root / "half.jsonl").write_text('{"text": "fine"}\nnot json\n{"title": "no text"}\n{"text": 5}\n')
    (root / "utf16.txt").write_bytes("Юникод в UTF-16\n".encode("utf-16"))
    res = lib.add(root, name="bad")
    files = {f.relpath: f for f in lib.files("bad")}
    assert files["image.txt"].status == "binary"
    assert files["empty.md"].status == "empty" and files["spaces.txt"].status == "empty"
    assert files["broken.txt.gz"].status == "unreadable"
    assert files["half.jsonl"].status == "ok" and files["half.jsonl"].documents == 1
    assert ": 3," in files["half.jsonl"].note  # Russian by default: "строк без поля \"text\": 3, ..."
    assert files["latin.txt"].replaced == 1  # the é byte, not the genuine U+FFFD
    assert files["cp1251.txt"].replaced == 6
    assert files["utf16.txt"].status == "ok"
    docs, _ = readers.read_whole(root / "utf16.txt", "text")
    assert docs == ["Юникод в UTF-16\n"]
    d = res.dataset
    assert d.files == 5 and d.skipped == 4 and d.replaced == 7
    notes = "\n".join(res.notes)
    for name in ("image.txt", "empty.md", "spaces.txt", "broken.txt.gz", "half.jsonl"):
        assert name in notes
    assert "7" in notes  # the replacement warning says how many


def test_missing_or_unreadable_path_is_exit_code_2(lib, tmp_path):
    with pytest.raises(LibraryError) as e:
        lib.add(tmp_path / "nowhere")
    assert e.value.exit_code == 2 and "nowhere" in str(e.value)
    # root reads anything; on Windows a file mode of 0 only makes a file read-only
    if os.name == "posix" and os.geteuid() != 0:
        locked = tmp_path / "locked.txt"
        locked.write_text("secret")
        locked.chmod(0)
        with pytest.raises(LibraryError) as e:
            lib.add(locked)
        assert e.value.exit_code == 2


def test_names_and_constellations(lib, tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("Альфа.\n", encoding="utf-8")
    b.write_text("Beta.\n", encoding="utf-8")
    lib.add(a, name="alpha", constellation="greek")
    with pytest.raises(LibraryError, match="alpha"):
        lib.add(b, name="alpha")  # a name belongs to one path
    lib.add(b, name="beta", constellation="greek")
    lib.add_to_constellation("latin", "beta")
    cons = {c.name: c for c in lib.constellations()}
    assert cons["greek"].datasets == ["alpha", "beta"] and cons["latin"].datasets == ["beta"]
    assert cons["greek"].characters == len("Альфа.\n") + len("Beta.\n")
    lib.remove_from_constellation("greek", "alpha")
    assert lib.constellation("greek").datasets == ["beta"]
    lib.remove("beta")
    assert lib.constellation("greek").datasets == [] and lib.constellation("latin").datasets == []
    with pytest.raises(LibraryError, match="nope"):
        lib.constellation("nope")
    with pytest.raises(LibraryError):
        lib.create_constellation("a,b")


def test_demo_constellation_is_there_on_a_fresh_machine(lib):
    from pydoc_data import topics

    demo = lib.constellation(DEMO_CONSTELLATION)
    assert demo.builtin and demo.datasets == [DEMO_DATASET]
    ds = lib.dataset(DEMO_DATASET)
    assert ds.kind == "builtin"
    assert ds.documents == sum(1 for v in topics.topics.values() if v.strip())
    assert ds.characters == sum(len(v) for v in topics.topics.values() if v.strip())
    text = "".join(u for u, _, _ in lib.iter_units(ds))
    assert "while" in text and len(text) == ds.characters
    Library(lib.state)  # opening again does not duplicate it
    assert [c.name for c in lib.constellations()].count(DEMO_CONSTELLATION) == 1


def test_long_text_is_streamed_in_bounded_units(tmp_path):
    # A big file without paragraph breaks, and one long line: units stay bounded and join
    # back to exactly the file's text; only the last unit ends the document.
    para = "Строка текста без конца. " * 40 + "\n"
    text = para * 400 + "x" * (readers.HARD_UNIT_CHARS * 3) + "\nend\n"
    p = tmp_path / "big.txt"
    p.write_text(text, encoding="utf-8")
    stats = readers.FileStats()
    units = list(readers.iter_file_units(p, "text", stats))
    assert "".join(u for u, _ in units) == text
    assert [e for _, e in units] == [False] * (len(units) - 1) + [True]
    assert max(len(u) for u, _ in units) <= readers.HARD_UNIT_CHARS + readers.LINE_PIECE
    assert stats.documents == 1 and stats.characters == len(text)
    # In-memory documents (jsonl) are cut the same way, at paragraph breaks where possible.
    doc = "\n\n".join(["Абзац. " * 300] * 30)
    pieces = list(readers.split_document(doc))
    assert "".join(u for u, _ in pieces) == doc and len(pieces) > 3
    assert all(u.startswith("\n") for u, _ in pieces[1:])
    assert all(len(u) <= readers.HARD_UNIT_CHARS for u, _ in pieces)


def test_adding_reports_progress_and_can_be_cancelled(lib, tmp_path):
    from app.data.progress import Cancelled, CancelToken

    root = tmp_path / "many"
    root.mkdir()
    for i in range(30):
        (root / f"{i:02d}.txt").write_text(f"Документ номер {i}.\n", encoding="utf-8")
    seen = []
    lib.add(root, name="many", progress=seen.append)
    assert seen[-1].phase == "scan" and seen[-1].done == seen[-1].total == 30
    token = CancelToken()
    token.cancel()
    (root / "00.txt").write_text("changed\n")
    with pytest.raises(Cancelled):
        lib.add(root, name="many", cancel=token)
    assert lib.refresh("many").status == "changed"  # the cancelled add stored nothing


def test_constellation_summaries_for_the_form(tmp_path):
    from app.data.library import constellation_summaries
    from app.data.prepare import prepare

    rows = {r["name"]: r for r in constellation_summaries()}  # the lab's own state file
    assert rows["demo"]["builtin"] and rows["demo"]["tokens"] is None and rows["demo"]["characters"] > 0
    st = open_state()
    try:
        m = prepare(["demo"], vocab=300, context=64, library=Library(st)).meta
    finally:
        st.close()
    rows = {r["name"]: r for r in constellation_summaries()}
    assert rows["demo"]["tokens"] == m["tokens_by_constellation"]["demo"]


RUSSIAN = ("«Съешь же ещё этих мягких французских булок», — сказал он, — «да выпей чаю».\n\n"
           "В чащах юга жил бы цитрус? Да, но фальшивый экземпляр! Версия 2.0 вышла в 2024 году.\n")


def test_russian_text_in_windows_1251_is_read_as_cyrillic(lib, tmp_path, monkeypatch):
    """A Russian .txt saved by an old Windows editor (cp1251) is text, not a page of U+FFFD."""
    f = tmp_path / "war_and_peace.txt"
    f.write_bytes((RUSSIAN * 40).encode("cp1251"))
    # As the reader was before: every Cyrillic byte replaced, and that count stored.
    monkeypatch.setattr(readers, "looks_cp1251", lambda head: False)
    first = lib.add(f)
    assert first.dataset.replaced > 1000
    monkeypatch.undo()
    # Same bytes, same mtime: the file is read again because it had replacements.
    res = lib.add(f)
    assert res.status == "unchanged" and res.dataset.sha256 == first.dataset.sha256
    assert res.dataset.replaced == 0 and lib.files(res.dataset.name)[0].replaced == 0
    assert any("Windows-1251" in n for n in res.notes)
    docs, stats = readers.read_whole(f, "text")
    assert docs == [RUSSIAN * 40] and stats.replaced == 0


def test_utf8_and_latin1_are_not_taken_for_windows_1251():
    text = RUSSIAN * 40
    assert not readers.looks_cp1251(text.encode("utf-8")[:8192])
    assert not readers.looks_cp1251(text.encode("utf-8")[:8191])  # cut inside a letter
    assert not readers.looks_cp1251(codecs.BOM_UTF8 + text.encode("utf-8")[:8000])
    french = "Le cœur a ses raisons que la raison ne connaît point. Où est l'élève ?\n" * 40
    assert not readers.looks_cp1251(french.encode("latin-1", "replace")[:8192])
    # A UTF-8 file with one stray byte stays UTF-8 (the byte is replaced and counted).
    assert not readers.looks_cp1251(text.encode("utf-8")[:4000] + b"\xff" + text.encode("utf-8")[4000:8000])


@pytest.mark.parametrize("content, why", [(b"", "нет текста"), (b"\x89PNG\r\n\x1a\n\x00\x00" * 50, "двоичный")])
def test_a_file_with_no_text_is_refused_not_added_as_an_empty_dataset(lib, tmp_path, content, why, russian):
    f = tmp_path / "oops.txt"
    f.write_bytes(content)
    with pytest.raises(LibraryError) as e:
        lib.add(f, constellation="мои")
    assert e.value.exit_code == 2 and "oops.txt" in str(e.value) and why in str(e.value)
    assert "oops" not in [d.name for d in lib.datasets()]
    assert "мои" not in [c.name for c in lib.constellations()]
    # A folder whose files are all like that is refused too.
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "a.txt").write_bytes(content)
    with pytest.raises(LibraryError):
        lib.add(tmp_path / "dir")


def test_a_bad_constellation_name_refuses_the_whole_add(lib, tmp_path):
    """`add PATH --constellation "a,b"` used to store the dataset, then fail on the name: an
    error message over a dataset that was added after all."""
    f = tmp_path / "book.txt"
    f.write_text("Текст книги.\n", encoding="utf-8")
    for bad in ("a,b", "  "):
        with pytest.raises(LibraryError) as e:
            lib.add(f, constellation=bad)
        assert e.value.exit_code == 2
    assert "book" not in [d.name for d in lib.datasets()]


def test_an_add_interrupted_before_its_constellation_keeps_nothing(lib, tmp_path, monkeypatch):
    """Ctrl-C (or the window's cancel, a SIGTERM) landing between storing the dataset and
    joining its constellation: the dataset and the constellation stand or fall together."""
    f = tmp_path / "book.txt"
    f.write_text("Текст книги.\n", encoding="utf-8")

    def interrupted(self, constellation, dataset):
        raise KeyboardInterrupt

    monkeypatch.setattr(Library, "add_to_constellation", interrupted)
    with pytest.raises(KeyboardInterrupt):
        lib.add(f, constellation="книги")
    assert "book" not in [d.name for d in lib.datasets()]
