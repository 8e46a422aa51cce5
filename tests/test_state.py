"""The lab's SQLite state: migrations in number order, upgrades, WAL, threads, transactions."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from app.base import paths
from app.base.state import StateError, find_migrations, open_state, repairs_to_say, split_statements


def _write(folder: Path, name: str, sql: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(sql, encoding="utf-8")


def test_fresh_database_gets_the_real_schema_in_the_data_folder():
    st = open_state()
    try:
        assert st.path == paths.state_db_path()
        assert st.version >= 1
        assert st.journal_mode == "wal"
        assert st.one("PRAGMA busy_timeout")[0] >= 1000
        assert st.one("PRAGMA foreign_keys")[0] == 1
        tables = {r[0] for r in st.query("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"datasets", "dataset_files", "constellations", "constellation_datasets",
                "prepared", "prepared_sources", "schema_migrations"} <= tables
        assert 1 in st.applied
    finally:
        st.close()
    # Opening again applies nothing.
    with open_state() as st2:
        assert st2.applied == []


def test_older_database_is_upgraded_and_keeps_its_rows(tmp_path):
    migs = tmp_path / "migs"
    _write(migs, "001_a.sql", "CREATE TABLE a (x INTEGER);\n-- a comment\n")
    db = tmp_path / "s.sqlite"
    with open_state(db, find_migrations(migs)) as st:
        assert st.version == 1
        st.execute("INSERT INTO a VALUES (42)")
    # A later version of the lab brings 003 (002 not yet written: a gap), with a trigger.
    _write(migs, "003_c.sql", """
CREATE TABLE c (y TEXT);
CREATE TRIGGER c_copy AFTER INSERT ON a BEGIN
    INSERT INTO c VALUES ('copied ' || NEW.x);
END;
""")
    with open_state(db, find_migrations(migs)) as st:
        assert st.applied == [3]
        assert st.version == 3
        assert st.one("SELECT x FROM a")[0] == 42
        st.execute("INSERT INTO a VALUES (7)")
        assert st.one("SELECT y FROM c")[0] == "copied 7"
    # The gap is filled later: 002 is still applied, the version stays the highest.
    _write(migs, "002_b.sql", "CREATE TABLE b (z REAL);")
    with open_state(db, find_migrations(migs)) as st:
        assert st.applied == [2]
        assert st.version == 3
        st.execute("INSERT INTO b VALUES (1.5)")


def test_failed_migration_rolls_back_whole(tmp_path):
    migs = tmp_path / "migs"
    _write(migs, "001_a.sql", "CREATE TABLE a (x INTEGER);")
    _write(migs, "002_bad.sql", "CREATE TABLE b (x INTEGER);\nINSERT INTO nowhere VALUES (1);\n")
    db = tmp_path / "s.sqlite"
    with pytest.raises(StateError, match="002_bad.sql"):
        open_state(db, find_migrations(migs))
    conn = sqlite3.connect(db)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "a" in tables and "b" not in tables
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    conn.close()


@pytest.mark.parametrize("lang, advice", [("en", "newer than this lab"), ("ru", "новее, чем знает")])
def test_database_newer_than_the_lab_is_refused_with_advice(tmp_path, lang, advice):
    from app.base.i18n import set_language

    db = tmp_path / "s.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 999")
    conn.close()
    set_language(lang)
    try:
        with pytest.raises(StateError, match=advice):
            open_state(db)
    finally:
        set_language(None)


def test_duplicate_numbers_and_damaged_file_are_clear_errors(tmp_path):
    migs = tmp_path / "migs"
    _write(migs, "001_a.sql", "CREATE TABLE a (x);")
    _write(migs, "001_b.sql", "CREATE TABLE b (x);")
    with pytest.raises(StateError, match="share number 001"):
        find_migrations(migs)
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database at all" * 100)
    # Not a database at all: set aside by the lab itself (never "rename it"), a new one made.
    with open_state(bad) as st:
        assert st.repaired and "bad.damaged-" in st.repaired and st.version >= 1
    assert repairs_to_say() == [st.repaired]  # said once, by whoever asks first
    assert repairs_to_say() == []
    (aside,) = tmp_path.glob("bad.damaged-*.sqlite")
    assert aside.read_bytes().startswith(b"this is not a database")


def test_transaction_commits_or_rolls_back(tmp_path):
    with open_state(tmp_path / "s.sqlite") as st:
        with st.transaction():
            st.execute("INSERT INTO constellations (name, created_at) VALUES ('x', 0)")
            with st.transaction():  # nested joins the outer one
                st.execute("INSERT INTO constellations (name, created_at) VALUES ('y', 0)")
        with pytest.raises(RuntimeError):
            with st.transaction():
                st.execute("INSERT INTO constellations (name, created_at) VALUES ('z', 0)")
                raise RuntimeError("boom")
        names = [r["name"] for r in st.query("SELECT name FROM constellations ORDER BY name")]
        assert names == ["x", "y"]


def test_reader_thread_sees_writer_thread_commits(tmp_path):
    """The window's timer reads while a worker writes: one connection per thread, WAL."""
    st = open_state(tmp_path / "s.sqlite")
    n = 200
    errors: list[BaseException] = []
    seen: list[int] = []

    def writer() -> None:
        try:
            for i in range(n):
                with st.transaction():
                    st.execute("INSERT INTO constellations (name, created_at) VALUES (?, 0)", (f"c{i}",))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            while True:
                count = st.one("SELECT COUNT(*) FROM constellations")[0]
                seen.append(count)
                if count >= n:
                    return
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not errors
    assert seen == sorted(seen) and seen[-1] == n
    # Each thread had its own connection; close() closes them all, from here.
    assert len(st._all) == 3
    st.close()
    with pytest.raises(StateError):
        st.execute("SELECT 1")


def test_split_statements_keeps_triggers_whole():
    sql = "CREATE TABLE t (a);\n-- note; with semicolon\nCREATE TRIGGER x AFTER INSERT ON t BEGIN\n  SELECT 1;\n  SELECT 2;\nEND;\n"
    parts = split_statements(sql)
    assert len(parts) == 2 and "CREATE TRIGGER" in parts[1] and parts[1].endswith("END;")
    with pytest.raises(StateError, match="unterminated"):
        split_statements("CREATE TABLE t (a)")


def test_a_lab_with_only_001_is_upgraded_to_the_current_schema_keeping_its_data(tmp_path):
    """An older lab (the data schema only) opened by the current one: the later migrations
    are applied and the datasets stay."""
    from app.data.library import Library

    all_migs = find_migrations()
    db = tmp_path / "old.sqlite"
    with open_state(db, all_migs[:1]) as old:
        assert old.version == 1
        f = tmp_path / "t.txt"
        f.write_text("Старые данные.\n", encoding="utf-8")
        Library(old).add(f, name="old", constellation="c")
    with open_state(db) as new:
        assert new.applied == [m.version for m in all_migs[1:]]
        assert new.version == all_migs[-1].version
        assert Library(new).dataset("old").constellations == ["c"]
        integrity = new.one("PRAGMA integrity_check")[0]
        assert integrity == "ok"
        assert new.query("PRAGMA foreign_key_check") == []
