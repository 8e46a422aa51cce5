"""`ternit data ...` as a user types it: output, progress on stderr, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.base.i18n import set_language
from app.cli.main import main
from app.data.textgen import documents

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def english():
    set_language("en")
    yield
    set_language(None)


def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "книги"
    root.mkdir()
    for i, doc in enumerate(documents(60, seed=21)):
        (root / f"{i:03d}.txt").write_text(doc, encoding="utf-8")
    (root / "junk.txt").write_bytes(b"\x00" * 50)
    return root


def test_add_list_constellations_prepare(tmp_path, capsys, english):
    root = corpus(tmp_path)
    assert main(["data", "add", str(root), "--name", "books", "--constellation", "library"]) == 0
    out, err = capsys.readouterr()
    assert "books: added" in out and "files: 60" in out and "library" in out
    assert "junk.txt" in err and "binary" in err  # the note, on stderr

    assert main(["data", "add", str(root), "--name", "books"]) == 0
    assert "books: unchanged" in capsys.readouterr().out

    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert set(lines) == {"books", "python-docs"}
    assert "library" in lines["books"] and "60 (+1)" in lines["books"] and lines["books"].rstrip().endswith("—")

    assert main(["data", "constellations"]) == 0
    out = capsys.readouterr().out
    assert "demo *" in out and "library" in out and "books" in out

    dest = tmp_path / "prepared"
    assert main(["data", "prepare", "--constellations", "library", "--vocab", "350",
                 "--context", "32", "--out", str(dest)]) == 0
    out, err = capsys.readouterr()
    assert str(dest) in out and "vocab 350" in out and "library:" in out
    assert "Tokenizing" in err and "100.0%" in err  # the progress bar
    meta = json.loads((dest / "meta.json").read_text())
    assert meta["data_id"] in out and meta["constellations"] == ["library"]

    # Again: from the cache, at once.
    assert main(["data", "prepare", "--constellations", "library", "--vocab", "350",
                 "--context", "32", "--out", str(dest)]) == 0
    assert "from cache" in capsys.readouterr().out

    # Token counts are now known in the list, and the folder in `prepared`.
    assert main(["data", "list"]) == 0
    books = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("books")][0]
    assert not books.rstrip().endswith("?")
    assert main(["data", "prepared"]) == 0
    assert str(dest) in capsys.readouterr().out


def test_errors_are_one_line_with_exit_codes(tmp_path, capsys, english):
    assert main(["data", "add", str(tmp_path / "missing")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "missing" in err

    for vocab in ("255", "65537"):
        assert main(["data", "prepare", "--constellations", "demo", "--vocab", vocab]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and vocab in err and "uint16" in err

    assert main(["data", "prepare", "--constellations", "nope"]) == 2  # bad input, as elsewhere
    assert "nope" in capsys.readouterr().err

    assert main(["data", "prepare", "--constellations", "demo", "--tokenizer", str(tmp_path / "t.json")]) == 2
    assert "t.json" in capsys.readouterr().err

    with pytest.raises(SystemExit) as e:
        main(["data", "prepare"])  # --constellations is required
    assert e.value.code == 2


def test_ternit_command_in_russian_by_default(tmp_path):
    """The real command line, as a user runs it on a Russian system: Russian unless told otherwise."""
    env_home = tmp_path / "lab"
    res = subprocess.run([sys.executable, "-m", "app.cli", "data", "add", str(tmp_path / "нет")],
                         cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "TERNIT_HOME": str(env_home), "HOME": str(tmp_path),
                              "LANG": "ru_RU.UTF-8"})
    assert res.returncode == 2
    assert res.stderr.strip() == f"ternit data: нет такого пути: {tmp_path / 'нет'}"


def test_bench_data_runs_and_reports_ratios(capsys):
    """`ternit bench data` end to end on a tiny input (the figures themselves are in PERF.md)."""
    from app.cli.bench import main as bench_main

    assert bench_main(["data", "--mb", "0.1", "--repeats", "1", "--vocab", "300", "--context", "16"]) == 0
    out = capsys.readouterr().out
    result = json.loads(out[out.index("{"):])
    for name in ("lab", "encode", "encode_fast"):
        assert result[name]["median_mb_s"] > 0 and result[name]["tokens"] > 0
    # The lab's tokens are the same text plus one end-of-text per document.
    assert result["lab"]["tokens"] > result["encode"]["tokens"] == result["encode_fast"]["tokens"]
    assert result["ratio_lab_vs_encode_wall"] > 0


def test_ctrl_c_during_prepare_exits_130_and_leaves_nothing(tmp_path, capsys, monkeypatch, english):
    """Ctrl-C arrives (as KeyboardInterrupt in the main thread) in the middle of tokenizing."""
    from app.data import progress as data_progress

    root = corpus(tmp_path)
    assert main(["data", "add", str(root), "--name", "books", "--constellation", "library"]) == 0

    class InterruptedBar(data_progress.TextBar):
        def __call__(self, p):
            super().__call__(p)
            if p.phase == "tokenize":
                raise KeyboardInterrupt

    monkeypatch.setattr(data_progress, "TextBar", InterruptedBar)
    dest = tmp_path / "out"
    assert main(["data", "prepare", "--constellations", "library", "--vocab", "300", "--out", str(dest)]) == 130
    assert "interrupted, nothing written" in capsys.readouterr().err
    assert not dest.exists() and [p for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


def test_check_reports_changed_and_missing_datasets(tmp_path, capsys, english):
    root = corpus(tmp_path)
    single = tmp_path / "single.txt"
    single.write_text("Один файл.\n", encoding="utf-8")
    assert main(["data", "add", str(root), "--name", "books"]) == 0
    assert main(["data", "add", str(single), "--name", "single"]) == 0
    capsys.readouterr()
    assert main(["data", "check"]) == 0
    assert capsys.readouterr().out.splitlines() == ["books: unchanged", "single: unchanged"]
    (root / "000.txt").write_text("Изменён.\n", encoding="utf-8")
    single.unlink()
    assert main(["data", "check"]) == 2
    out, err = capsys.readouterr()
    assert out.splitlines() == ["books: changed", "  ~ 000.txt"]
    assert "single" in err and "no longer exists" in err


def test_a_damaged_state_file_is_one_line_not_a_traceback(tmp_path, capsys, monkeypatch, english):
    from app.base import paths

    paths.state_db_path().write_bytes(b"not a database " * 50)
    assert main(["data", "list"]) == 0  # set aside by the lab itself, a new one made
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "set aside" in err and "Traceback" not in err


def test_sigterm_during_prepare_exits_like_ctrl_c_and_leaves_no_temporary_folder(tmp_path):
    """`kill PID` (or a closed terminal) mid-prepare: the real CLI process removes its hidden
    temporary folder and says so, as for Ctrl-C (it used to die at once and leave it)."""
    import os
    import signal
    import textwrap

    root = corpus(tmp_path)
    home = tmp_path / "home"
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from app.data import progress as data_progress
        from app.cli.main import main

        class Bar(data_progress.TextBar):
            def __call__(self, p):
                super().__call__(p)
                if p.phase == "tokenize":
                    print("TOKENIZING", flush=True)
                    sys.stdin.readline()  # wait here until the test sends SIGTERM

        assert main(["data", "add", {str(root)!r}, "--name", "books", "--constellation", "library"]) == 0
        data_progress.TextBar = Bar
        sys.exit(main(["data", "prepare", "--constellations", "library", "--vocab", "300",
                       "--out", {str(tmp_path / "out")!r}]))
    """)
    env = {**os.environ, "TERNIT_HOME": str(home), "TERNIT_LANG": "en"}
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, text=True)
    try:
        lines = iter(proc.stdout.readline, "")
        assert any(line.strip() == "TOKENIZING" for line in lines)
        assert [p for p in tmp_path.iterdir() if p.name.startswith(".out.tmp-")]  # it was writing
        proc.send_signal(signal.SIGTERM)
        proc.stdout.read()  # through the wrapper that readline used (communicate reads the raw pipe behind it)
        err = proc.stderr.read()
        proc.wait(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted, nothing written" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


def test_prepare_into_a_folder_that_cannot_be_made_is_one_clear_line(tmp_path, capsys, english):
    """A target that cannot be written (here under a file; a read-only disk alike): the advice
    line, not a bare "[Errno 20] Not a directory"."""
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    assert main(["data", "prepare", "--constellations", "demo", "--vocab", "300",
                 "--out", str(blocker / "sub" / "out")]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("ternit data: preparing failed:") and "choose another --out" in err


def test_ternit_help_and_an_unknown_command_in_the_interface_language(capsys):
    """`ternit --help` is the first thing a user reads: in Russian by default, English as set."""
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("использование: ternit [--lang ru|en] КОМАНДА") and "наборы данных, созвездия" in out
    assert main(["datta"]) == 2
    assert capsys.readouterr().err.startswith("ternit: нет команды 'datta'")
    set_language("en")
    try:
        assert main([]) == 0
        out = capsys.readouterr().out
        assert out.startswith("usage: ternit [--lang ru|en] COMMAND") and "datasets, constellations" in out
    finally:
        set_language(None)


def test_output_into_a_closed_pipe_is_no_traceback(tmp_path):
    """`ternit --help | head -1`: the reader leaves early (here `true`, which reads nothing); the lab exits without a traceback."""
    res = subprocess.run(f"{sys.executable} -m app.cli --help | true", shell=True, cwd=ROOT,
                         capture_output=True, text=True, errors="replace", timeout=60,
                         env={"PATH": "/usr/bin:/bin", "TERNIT_HOME": str(tmp_path), "HOME": str(tmp_path),
                              "PYTHONUNBUFFERED": "1"})
    assert "Traceback" not in res.stderr and "BrokenPipe" not in res.stderr, res.stderr


def test_constellations_can_be_renamed_and_removed_and_a_dataset_taken_out(tmp_path, capsys, english):
    """A mistyped --constellation used to stay in the library (and the form) for good."""
    root = corpus(tmp_path)
    assert main(["data", "add", str(root), "--name", "books", "--constellation", "libary"]) == 0
    assert main(["data", "add", str(root), "--name", "books", "--constellation", "extra"]) == 0
    capsys.readouterr()
    assert main(["data", "rename-constellation", "libary", "library"]) == 0
    assert main(["data", "rename-constellation", "library", "extra"]) == 2  # taken
    assert "already exists" in capsys.readouterr().err
    assert main(["data", "rename-constellation", "demo", "docs"]) == 2  # the builtin one stays
    assert main(["data", "remove", "books", "--constellation", "extra"]) == 0
    assert main(["data", "remove", "books", "--constellation", "extra"]) == 1  # not in it any more
    assert main(["data", "remove-constellation", "extra"]) == 0
    assert main(["data", "remove-constellation", "nope"]) == 2  # an unknown name: bad input
    capsys.readouterr()
    assert main(["data", "constellations"]) == 0
    rows = {line.split()[0]: line.split()[1] for line in capsys.readouterr().out.splitlines()[1:-1]}
    assert rows == {"demo": "*", "library": "books"}  # "demo *": the builtin one
    assert main(["data", "list"]) == 0
    assert "books" in capsys.readouterr().out  # the dataset itself stays


def test_progress_into_a_pipe_keeps_moving_within_a_long_phase(monkeypatch):
    """The window reads `ternit data prepare`'s stderr through a pipe into its status bar: a
    tokenizing phase of minutes shows new lines as it goes, not only its first per cent."""
    import io

    from app.data import progress as prog

    clock = [100.0]
    monkeypatch.setattr(prog.time, "monotonic", lambda: clock[0])
    out = io.StringIO()
    bar = prog.TextBar(out, every=5.0)
    for done in range(0, 101):
        bar(prog.Progress("tokenize", done * 1e6, 100e6, "chars"))
        clock[0] += 0.5  # a report every half second, 50 s in all
    lines = out.getvalue().splitlines()
    assert 9 <= len(lines) <= 13, lines  # start, one about every 5 s, end
    assert lines[0].split()[0] == "Tokenizing" or lines[0].startswith("Токенизация")
    assert "100.0%" in lines[-1] and any(" 50.0%" in x or " 40.0%" in x or " 60.0%" in x for x in lines)


def test_check_json_and_progress_lines_for_the_window(tmp_path, monkeypatch, capsys, english):
    """The «Данные» window runs `add` and `check` as child processes and reads JSON: progress
    (TERNIT_PROGRESS=json) on stderr, one result a dataset on stdout for `check --json`."""
    from app.data.progress import parse_progress_line

    monkeypatch.setenv("TERNIT_PROGRESS", "json")
    root = corpus(tmp_path)
    gone = tmp_path / "gone.txt"
    gone.write_text("Текст.\n", encoding="utf-8")
    assert main(["data", "add", str(root), "--name", "books"]) == 0
    assert main(["data", "add", str(gone), "--name", "gone"]) == 0
    err = capsys.readouterr().err
    progress = [p for p in map(parse_progress_line, err.splitlines()) if p is not None]
    assert progress and progress[-1].phase == "scan" and progress[-1].fraction == 1.0
    assert "[###" not in err  # no text bar mixed in
    (root / "000.txt").write_text("Изменён.\n", encoding="utf-8")
    gone.unlink()
    assert main(["data", "check", "--json"]) == 2
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert out[0] == {"name": "books", "status": "changed", "message": "", "changes": ["~ 000.txt"]}
    assert out[1]["name"] == "gone" and out[1]["status"] == "missing" and "no longer exists" in out[1]["message"]


def test_prepare_json_progress_and_warnings_for_the_window(tmp_path, monkeypatch, capsys, english):
    """`data prepare` under TERNIT_PROGRESS=json (the window's «Подготовить данные»): every
    phase as JSON progress, each warning as {"warning": ...}, no text bar; the folder on stdout."""
    from app.data.manage import CliOutput
    from app.data.progress import parse_progress_line, parse_warning_line

    root = corpus(tmp_path)
    assert main(["data", "add", str(root), "--name", "books", "--constellation", "library"]) == 0
    capsys.readouterr()
    (root / "000.txt").write_text("Изменён после добавления.\n", encoding="utf-8")
    monkeypatch.setenv("TERNIT_PROGRESS", "json")
    assert main(["data", "prepare", "--constellations", "library", "--context", "16",
                 "--out", str(tmp_path / "out")]) == 0
    out, err = capsys.readouterr()
    assert "[###" not in err and "warning:" not in err
    progress = [p for p in map(parse_progress_line, err.splitlines()) if p is not None]
    phases = [p.phase for p in progress]
    assert {"check", "tokenizer", "tokenize", "split", "done"} <= set(phases), phases
    # The changed dataset is read again before preparing: file by file, not a still bar.
    assert any(p.phase == "scan" and p.unit == "files" and p.total == 61 for p in progress), phases
    warnings = [w for w in map(parse_warning_line, err.splitlines()) if w is not None]
    assert any("dataset 'books' changed: ~ 000.txt" in w for w in warnings), warnings
    assert any("vocabulary of 4000" in w for w in warnings), err  # 60 short documents
    assert any("junk.txt" in w for w in warnings), err  # the binary file, skipped
    got = CliOutput()
    got.feed_stderr(err)
    got.feed_stdout(out)
    assert got.warnings == warnings and got.messages == []
    assert got.lines[0] == str(tmp_path / "out")


def test_the_builtin_dataset_cannot_be_removed(capsys, english):
    assert main(["data", "remove", "python-docs"]) == 2
    assert "builtin" in capsys.readouterr().err
    # Nor taken out of the demo: nothing could put it back.
    assert main(["data", "remove", "python-docs", "--constellation", "demo"]) == 2
    assert main(["data", "constellations"]) == 0
    assert "python-docs" in capsys.readouterr().out


def test_nothing_is_added_to_the_builtin_constellation(capsys, english, tmp_path):
    """The demo is the Python docs only (a prepared "demo" always means the same text): the
    command line refuses it as the data window does, before anything is stored."""
    text = tmp_path / "mine.txt"
    text.write_text("Some text of mine.\n" * 50, encoding="utf-8")
    assert main(["data", "add", str(text), "--constellation", "demo"]) == 2
    assert "builtin constellation" in capsys.readouterr().err
    assert main(["data", "list"]) == 0
    assert "mine" not in capsys.readouterr().out
