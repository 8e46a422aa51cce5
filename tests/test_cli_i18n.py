"""`ternit` speaks the interface language completely: every help page of the command tree,
its usage errors and its messages, in Russian by default and in English as a setting.

The help check walks the real tree (`ternit --help`, each group's `--help`, each subcommand's
`--help`, subcommands found in the usage line argparse prints) and, in Russian, flags every
line that still holds English prose. Names are not prose: option strings, metavars and
choices (the usage line lists them), paths and files, `code`, acronyms, and a few product
names; `test_the_prose_check_flags_an_untranslated_help_and_not_option_names` shows that it
catches one untranslated help string among them.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import struct

import pytest

from app.base.i18n import set_language
from app.cli import main as cli
from app.cli.bench import BENCHES
from tests.trainer_run import run_trainer, write_run

# Latin words that are names in any language (products, formats, libraries, values users type).
NAMES = {"Kaggle", "NVML", "NVIDIA", "psutil", "safetensors", "torch", "PyTorch", "AdamW", "auto", "cpu",
         "val", "loss", "train",
         "pt", "dcp"}  # the checkpoint forms' suffixes: a .pt file, a .dcp folder (FSDP2's)
# Not walked into: the benchmarks (`ternit bench NAME`, and `ternit data bench`, the same as
# `ternit bench data`) are measurement tools whose help and reports are English, as
# `ternit bench --help` says; their lines in `ternit bench --help` are ours and are checked.
NOT_WALKED = {("data", "bench")}


def run_cli(argv: list[str], lang: str) -> tuple[int, str, str]:
    """`ternit ARGV` in-process, in `lang`: (exit code, stdout, stderr)."""
    set_language(lang)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(argv)
            except SystemExit as e:  # argparse's --help and usage errors
                code = e.code if isinstance(e.code, int) else 1
    finally:
        set_language(None)
    return code, out.getvalue(), err.getvalue()


def usage_block(text: str) -> str:
    return text.split("\n\n", 1)[0]


def subcommands(argv: list[str], text: str) -> list[str]:
    """The names listed on a help page at the head of their lines."""
    if not argv:
        return list(cli.GROUPS)
    if argv == ["bench"]:
        return list(BENCHES)
    found = re.search(r"\{([\w,-]+)\}\s+\.\.\.", usage_block(text))  # argparse's "{a,b} ..."
    return found.group(1).split(",") if found else []


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _blocks(lines: list[str]) -> list[list[str]]:
    """A help page's entries: an option or command line with its wrapped help (indented
    further), or a paragraph of the description."""
    blocks: list[list[str]] = []
    prev: str | None = None
    for line in lines:
        if not line.strip():
            prev = None
            continue
        joins = prev is not None and (_indent(line) > 4 or (_indent(line) == 0 and _indent(prev) == 0))
        if joins and blocks:
            blocks[-1].append(line)
        else:
            blocks.append([line])
        prev = line
    return blocks


def english_prose(text: str, children: list[str] = ()) -> list[str]:
    """The lines of a Russian help page that hold English prose: two English words (other
    than names) on a line, or any in an entry with no Russian at all."""
    usage = usage_block(text)
    names = set(NAMES)
    for choices in re.findall(r"\{([^}]*)\}", usage):
        names.update(choices.split(","))
    # Metavars and positional names as the usage line shows them (not the program's words).
    names.update(w for w in re.findall(r"[A-Za-z]\w*", re.sub(r"^\S+:?\s+ternit( [\w-]+)*", "", usage))
                 if not w.startswith("-"))

    def prose(line: str) -> list[str]:
        rest = line.strip()
        first = rest.split(" ", 1)[0]
        if first in children:  # a subcommand's name at the head of its line
            rest = rest[len(first):]
        # `code`, {choices} and a command named in passing ("= ternit bench data")
        rest = re.sub(r"`[^`]*`|\{[^}]*\}|\bternit(?: [a-z][\w-]*){0,2}", " ", rest)
        # options, paths, files, numbers with units, key combinations: names, not prose
        tokens = [tok for tok in rest.split() if not re.search(r"[-./_+0-9=|,:\\]", tok.strip("()«»;:,."))]
        words = re.findall(r"[A-Za-z][A-Za-z']+", " ".join(tokens))
        return [w for w in words if w not in names and not w.isupper()]

    bad = []
    for block in _blocks(text[len(usage):].splitlines()):
        russian = any(re.search("[А-Яа-яЁё]", line) for line in block)
        for line in block:
            words = prose(line)
            if len(words) >= 2 or (words and not russian):
                bad.append(f"{line.strip()!r}: {words}")
    return bad


def walk(lang: str) -> dict[tuple[str, ...], str]:
    """Every help page of the tree, by its command path."""
    pages: dict[tuple[str, ...], str] = {}
    todo: list[list[str]] = [[]]
    while todo:
        argv = todo.pop()
        code, out, err = run_cli([*argv, "--help"], lang)
        assert code == 0 and out.strip(), (argv, code, err)
        pages[tuple(argv)] = out
        if argv != ["bench"]:
            todo += [[*argv, name] for name in subcommands(argv, out) if (*argv, name) not in NOT_WALKED]
    return pages


@pytest.fixture(scope="module")
def pages_ru() -> dict[tuple[str, ...], str]:
    return walk("ru")


@pytest.fixture(scope="module")
def pages_en() -> dict[tuple[str, ...], str]:
    return walk("en")


def test_the_walk_reaches_every_command(pages_ru, pages_en):
    for group in cli.GROUPS:
        assert (group,) in pages_ru
    for path in [("run", "start"), ("run", "continue"), ("run", "show"), ("kaggle", "add-account"),
                 ("kaggle", "accounts"), ("data", "prepare"), ("bench",), ("export",)]:
        assert path in pages_ru, sorted(pages_ru)
    assert pages_ru.keys() == pages_en.keys()


def test_russian_help_has_no_english_prose(pages_ru):
    bad = {" ".join(path) or "ternit": english_prose(text, subcommands(list(path), text))
           for path, text in pages_ru.items()}
    assert not {k: v for k, v in bad.items() if v}, json.dumps(bad, ensure_ascii=False, indent=1)
    for path, text in pages_ru.items():
        if path and path != ("bench",):
            assert text.startswith("использование: "), path  # argparse's own words as well


def test_english_help_has_no_russian(pages_en):
    for path, text in pages_en.items():
        assert not re.search("[А-Яа-яЁё]", text), (path, text)


def test_every_help_string_differs_between_the_languages(pages_ru, pages_en):
    """An option's help written once, not as a t(ru, en) pair, prints the same in both."""
    def blocks(text: str) -> set[str]:
        return {"\n".join(b) for b in _blocks(text[len(usage_block(text)):].splitlines())}

    for path, ru in pages_ru.items():
        usage, children = usage_block(ru), subcommands(list(path), ru)
        same = [b for b in blocks(ru) & blocks(pages_en[path]) if english_prose(f"{usage}\n\n{b}", children)]
        assert not same, (path, same)


def test_the_prose_check_flags_an_untranslated_help_and_not_option_names():
    from app.base.cli_args import Parser
    from app.base.i18n import t

    def page(help_text: str) -> str:
        set_language("ru")
        try:
            p = Parser(prog="ternit demo", description=t("Проверка.", "A check."))
            p.add_argument("--steps-to", type=int, metavar="N", help=t("«Шагов до»", "«Steps to»"))
            p.add_argument("--gpu", choices=["auto", "t4x2"], help=t("видеокарта", "GPU"))
            p.add_argument("--config", metavar="RUN.json", help=t("файл run.json (`ternit run list`)", "run.json"))
            p.add_argument("--data-dir", metavar="DIR", help=help_text)
            return p.format_help()
        finally:
            set_language(None)

    assert english_prose(page("папка данных (DIR, data.dir из конфига, Kaggle)")) == []
    flagged = english_prose(page("the prepared data folder"))
    assert len(flagged) == 1 and "prepared" in flagged[0]
    assert english_prose(page("папка (default: the lab's)"))
    assert english_prose(page("папка (default: all)"))


# ---- messages and usage errors, one error path (at least) per command ---------------------

@pytest.mark.parametrize("lang", ["ru", "en"])
def test_usage_errors_in_the_interface_language(lang):
    cases = {
        ("run", "start", "--layers", "x"): ("аргумент --layers: неверное значение 'x' (нужно: целое число)",
                                            "argument --layers: invalid int value: 'x'"),
        ("run", "stop", "1", "--wait", "x"): ("лишние аргументы: x", "unrecognized arguments: x"),
        ("estimate", "--gpu", "h100"): ("аргумент --gpu: недопустимое значение 'h100'",
                                        "argument --gpu: invalid choice: 'h100'"),
        ("monitor", "--count", "many"): ("аргумент --count: неверное значение 'many' (нужно: целое число)",
                                         "argument --count: invalid int value: 'many'"),
        ("export",): ("не хватает аргументов: ЧЕКПОИНТ, OUT",
                      "the following arguments are required: CKPT, OUT"),
        ("kaggle", "remove-account"): ("не хватает аргументов: ", "the following arguments are required: "),
        ("run", "bogus"): ("недопустимое значение 'bogus'", "invalid choice: 'bogus'"),
    }
    for argv, (ru, en) in cases.items():
        code, out, err = run_cli(list(argv), lang)
        assert code == 2 and out == "", (argv, out)
        assert (ru if lang == "ru" else en) in err, (argv, err)
        assert err.startswith("использование: " if lang == "ru" else "usage: "), err
        assert (": ошибка: " if lang == "ru" else ": error: ") in err, err


def test_run_commands_name_a_missing_run_in_the_interface_language():
    for cmd in ("stop", "show", "continue", "wait", "retry"):
        code, out, err = run_cli(["run", cmd, "no-such-run"], "ru")
        assert code == 2, (cmd, err)
        assert err.strip() == (f"ternit run {cmd}: прогона 'no-such-run' нет в истории "
                               "(`ternit run list` покажет прогоны)"), err
    code, out, err = run_cli(["run", "show", "no-such-run"], "en")
    assert code == 2 and "no run 'no-such-run' in the history" in err


def test_an_ambiguous_run_id_and_a_bad_gpu_are_explained_in_russian(tmp_path):
    from app.runs import Registry

    reg = Registry()
    for _ in range(2):
        reg.create_run({"name": "alpha", "model": {}, "training": {}, "data": {}, "target": {}})
    reg.close()
    code, _, err = run_cli(["run", "show", "alpha"], "ru")
    assert code == 2 and "подходит к нескольким прогонам" in err and "укажите ID полнее" in err, err

    config = tmp_path / "run.json"
    config.write_text(json.dumps({"target": {"kind": "local"}, "data": {"dir": str(tmp_path)}}))
    code, _, err = run_cli(["run", "start", "--config", str(config), "--gpu", "first"], "ru")
    # The trainer's own rule (trainer.config.run_config.gpu_choice), framed in Russian, before any run exists.
    assert code == 2 and "run.json не пройдёт проверку тренера" in err and "target.gpu" in err and "'first'" in err, err
    assert Registry().list_runs() == [] or all(r.name == "alpha" for r in Registry().list_runs())


def test_run_list_columns_in_both_languages():
    from app.runs import Registry

    reg = Registry()
    rec = reg.create_run({"name": "demo", "model": {}, "training": {"steps_to": 30}, "data": {}, "target": {}})
    reg.update(rec.id, tokens_seen=3840, params=35_200, last_step=30, best_val_loss=5.25)
    reg.close()
    code, out, _ = run_cli(["run", "list"], "ru")
    head, row = out.splitlines()[:2]
    assert code == 0 and head.split() == ["прогон", "состояние", "где", "шаги", "val", "loss", "токены", "веса"]
    assert rec.id in row and "5,2500" in row and "3,84 тыс." in row and "35,2 тыс." in row
    assert " tok" not in out and not row.endswith(" w")
    code, out, _ = run_cli(["run", "list"], "en")
    assert out.splitlines()[0].split() == ["run", "status", "where", "steps", "val", "loss", "tokens", "weights"]
    # The header's columns sit over the row's: the weights column ends where the header's does.
    head, row = out.splitlines()[:2]
    assert len(head) == len(row)


def test_bench_list_and_unknown_benchmark():
    code, out, _ = run_cli(["bench", "--help"], "ru")
    assert code == 0 and "замеры:" in out and "скорость подготовки данных" in out
    code, out, err = run_cli(["bench", "warp"], "ru")
    assert code == 2 and out == ""
    assert err.strip() == "ternit bench: нет замера 'warp' (есть: " + ", ".join(BENCHES) + ")"
    code, _, err = run_cli(["bench", "warp"], "en")
    assert code == 2 and "unknown benchmark 'warp'" in err


def test_monitor_bad_interval_in_russian():
    code, out, err = run_cli(["monitor", "--interval", "0"], "ru")
    assert code == 2 and err.strip() == "ternit monitor: --interval должен быть больше 0"


def test_export_errors_and_its_success_line_in_the_interface_language(tmp_path, tiny_data):
    code, _, err = run_cli(["export", "nothing-here", str(tmp_path / "w.safetensors")], "ru")
    assert code == 2 and "не файл чекпоинта и не прогон" in err and "нет в истории" in err, err

    # The success line is the lab's, read back from the written file: the real exporter
    # (trainer/, no lab texts) says "wrote ... weights" in English.
    run = write_run(tmp_path / "exp", tiny_data, steps_to=2)
    assert run_trainer(run).returncode == 0
    ckpt = run / "checkpoints" / "step-00000002.pt"
    out = tmp_path / "w.safetensors"
    code, text, err = run_cli(["export", str(ckpt), str(out)], "ru")
    assert code == 0, err
    assert text.strip() == f"веса записаны: {out} (35\u202f200 весов, шаг 2)"  # app.base.numbers.int_text
    code, text, _ = run_cli(["export", str(ckpt), str(out)], "en")
    assert code == 0 and text.strip() == f"weights written: {out} (35,200 weights, step 2)"
    raw = out.read_bytes()
    assert json.loads(raw[8 : 8 + struct.unpack("<Q", raw[:8])[0]])["__metadata__"]["params"] == "35200"


def test_argparse_messages_of_other_python_versions_are_translated():
    from app.base.cli_args import translate_error

    assert translate_error("argument --gpu: invalid choice: h100 (choose from t4, t4x2)", "ru") == \
        "аргумент --gpu: недопустимое значение h100 (можно: t4, t4x2)"
    assert translate_error("argument --limit: expected one argument", "ru") == "аргумент --limit: нужно значение"
    assert translate_error("something argparse says one day", "ru") == "something argparse says one day"
    assert translate_error("unrecognized arguments: x", "en") == "unrecognized arguments: x"


def test_bench_window_help_exits_0_and_a_wrong_argument_is_a_usage_error(capsys):
    # A process benchmark, run in process here: only its argument handling is under test.
    from ui.window.bench import main as bench_window

    assert bench_window(["--help"]) == 0
    assert "startup|plot" in capsys.readouterr().out
    for wrong in (["plot", "many"], ["nothing"], ["plot", "5", "6"]):
        assert bench_window(wrong) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and "error: expected `startup|plot [N]`" in captured.err


def test_sample_and_eval_say_they_take_a_sharded_runs_folder_too(pages_ru, pages_en):
    """resolve() takes a step-*.dcp folder (a sharded run's checkpoint) as it takes a .pt
    file; the help said ".pt" only."""
    for pages in (pages_ru, pages_en):
        for command in ("sample", "eval"):
            text = " ".join(pages[(command,)].split())
            assert ".pt" in text and ".dcp" in text, (command, text)
