"""Text kept for a later reader is read in the reader's language: a queue item's note (stored
in both languages), the trainer's own English end messages, and the tables `--out` writes
(UTF-8 with a BOM, which Windows PowerShell 5.1, Notepad and Excel read right)."""

from __future__ import annotations

import json

from app.base import run_status as st
from app.base.i18n import set_language
from app.base.stored_text import both, shown
from app.cli import main as cli
from app.queue.runner import QueueRunner, run_config
from app.queue.store import DONE, QueueStore
from app.queue.world import Planner
from app.runs.failure import shown_message
from app.runs.manager import RunManager
from app.runs.registry import Registry
from tests.test_queue_store import cfg
from tests.test_words import CYRILLIC


def test_a_stored_text_in_both_languages_is_read_in_the_readers():
    stored = both("прогон удалён", "run deleted")
    assert shown(stored, "ru") == "прогон удалён" and shown(stored, "en") == "run deleted"
    assert shown("the trainer's own line", "ru") == "the trainer's own line"  # older rows: as they are
    assert shown(None) == "" and shown('{"ru": broken', "en") == '{"ru": broken'


def test_a_said_text_survives_a_copy_and_a_pickle_with_both_languages():
    # `ternit run show --json` turns a failure record holding a Said into a dict with
    # dataclasses.asdict, which deep-copies each field: a Said must be rebuilt, not refused.
    import copy
    import pickle
    from dataclasses import asdict, dataclass

    from app.base.i18n import Said, in_language

    set_language("ru")
    text = Said("данные не читаются", "the data cannot be read", key="data")

    @dataclass
    class Holder:
        message: str

    for again in (copy.deepcopy(text), pickle.loads(pickle.dumps(text)), asdict(Holder(text))["message"]):
        assert isinstance(again, Said) and again == "данные не читаются" and again.key == "data"
        assert in_language(again, "en") == "the data cannot be read"


def test_the_trainers_end_messages_in_the_readers_language():
    assert shown_message("reached step 60", "ru") == "достигнут шаг 60"
    assert shown_message("reached step 60", "en") == "reached step 60"
    assert shown_message("stopped by the time limit at step 7", "ru") == "остановлен по лимиту времени на шаге 7"
    assert shown_message("stopped on request at step 5 (RUN_DIR/STOP exists)", "ru") == (
        "остановлен по запросу на шаге 5 (в папке прогона есть файл STOP)")
    assert shown_message("CUDA out of memory", "ru") == "CUDA out of memory"  # an error's own text


def test_a_queue_items_end_is_noted_in_the_language_the_list_is_read_in(tmp_path, tiny_data):
    """The runner settles an item in Russian; the English list says it in English."""
    reg = Registry()
    store = QueueStore(reg.state)
    try:
        it = store.add(cfg(tiny_data, "stopped"), "local")
        manager = RunManager(reg)
        run_id = reg.reserve_run_id(it.name)
        assert store.claim(it.id, "local", run_id)
        manager.create(run_config(store.item(it.id)), run_id=run_id)
        manager.stop(run_id)  # never started: settled as stopped at the next tick
        set_language("ru")
        runner = QueueRunner(RunManager(reg), "test")
        runner.start()
        runner.tick()
        runner.close()
        assert store.item(it.id).state == DONE
        notes = {}
        for lang in ("ru", "en"):
            set_language(lang)
            (row,) = Planner(store, reg).timeline().rows
            notes[lang] = row.note
        assert notes == {"ru": st.LABELS[st.STOPPED]["ru"], "en": st.LABELS[st.STOPPED]["en"]}
    finally:
        set_language(None)
        store.close()
        reg.close()


def test_table_commands_write_utf8_with_a_bom_to_out(tmp_path, capsys):
    """`ternit run list --out FILE`: the README's way on Windows PowerShell 5.1, whose `>`
    writes UTF-16 decoded through the console's code page."""
    out = tmp_path / "прогоны.txt"
    assert cli.main(["run", "list", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip() == f"ternit run list: записано в {out}"
    raw = out.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and raw[3:].decode("utf-8").strip() == "прогонов пока нет"
    data = tmp_path / "data.txt"
    assert cli.main(["data", "constellations", "--out", str(data)]) == 0
    assert data.read_bytes().startswith(b"\xef\xbb\xbf") and "созвездие" in data.read_text("utf-8-sig")
    js = tmp_path / "queue.json"
    assert cli.main(["queue", "list", "--json", "--out", str(js)]) == 0
    json.loads(js.read_text("utf-8"))  # JSON without a BOM: JSON readers refuse one
    capsys.readouterr()
    assert cli.main(["run", "list", "--out", str(out / "x.txt")]) == 2  # under a file: one line, code 2
    assert capsys.readouterr().err.startswith(f"ternit run list: не записать {out / 'x.txt'} (")


def test_a_wait_counter_is_counted_by_the_reader_not_frozen_at_the_write():
    """«ждём 0 с» and «в очереди Kaggle 0 с» stayed until the next poll wrote again: the
    stored text keeps when the wait began, and each reading counts to its own now."""
    stored = both("в очереди Kaggle {waited}", "in Kaggle's queue for {waited}", since=1000.0)
    assert shown(stored, "ru", now=1000.0) == "в очереди Kaggle 0 с"
    assert shown(stored, "ru", now=1185.0) == "в очереди Kaggle 3 мин"
    assert shown(stored, "en", now=1185.0) == "in Kaggle's queue for 3 min"
    assert shown_message(stored, "ru").startswith("в очереди Kaggle ")  # the history reads it so too


def test_the_kaggle_queue_line_counts_from_the_push():
    import time

    from app.kaggle.watch import LegWatch

    pushed = time.time() - 125
    line = LegWatch._queued_message(object.__new__(LegWatch), {"pushed_at": pushed, "kernel_ref": "a/b"})
    assert shown(line, "ru").startswith("в очереди Kaggle 2 мин (с ")


def test_internal_words_are_gone_from_what_people_read(tmp_path):
    """«(target.gpu = cpu)» as a run's note, «Шаги разогрева, шагов», «лучшая val loss —.»"""
    from app.form import fields as F
    from app.runs import process as proc
    from app.runs.manager import RunEnded
    from app.runs.registry import Registry

    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "run.json").write_text("{}", encoding="utf-8")
    plan = proc.plan_launch(run_dir, "cpu")
    assert shown(plan.note, "ru") == "на процессоре (так выбрано)" and "target.gpu" not in shown(plan.note, "en")
    assert F.spec("warmup_steps").unit_text("ru") == ""  # the label «Шаги разогрева» names it
    reg = Registry()
    try:
        rec = reg.create_run({"name": "x", "model": {}, "training": {}, "data": {}, "target": {}})
        said = RunEnded(reg.update(rec.id, status=st.FINISHED, last_step=60, steps_to=60)).text("ru")
        assert said == "Шаг 60/60. Проверки на отложенной выборке ещё не было.", said
    finally:
        reg.close()


def test_a_kaggle_run_whose_stop_was_asked_says_so_in_the_history(tmp_path):
    """«Остановить» on Kaggle left the row and its button as they were."""
    import time as clock

    from app.runs.history import row

    reg = Registry()
    try:
        rec = reg.create_run({"name": "k", "model": {}, "training": {}, "data": {}, "target": {"kind": "kaggle"}})
        rec = reg.update(rec.id, status=st.RUNNING_KAGGLE, target_kind="kaggle")
        assert row(rec, "ru").can_stop and row(rec, "ru").status_label == "идёт на Kaggle"
        rec = reg.update(rec.id, stop_requested_at=clock.time())
        shown_row = row(rec, "ru")
        assert shown_row.status_label == "идёт на Kaggle · остановка запрошена" and not shown_row.can_stop
        assert row(rec, "en").status_label == "running on Kaggle · stop asked"
    finally:
        reg.close()


def test_a_queued_retry_s_advice_is_stored_for_the_reader_s_language(tmp_path, tiny_data):
    """A queued run ran out of memory under a Russian runner: its retry's note («Повторить
    с батчем 1 (один раз): Не хватило памяти…») was Russian in the English list, its advice
    made in the runner's language. It reads in English when the interface is English."""
    import json as _json

    reg = Registry()
    store = QueueStore(reg.state)
    try:
        it = store.add(cfg(tiny_data, "oom"), "local")
        manager = RunManager(reg)
        run_id = reg.reserve_run_id(it.name)
        assert store.claim(it.id, "local", run_id)
        rec = manager.create(run_config(store.item(it.id)), run_id=run_id)
        with rec.events_path.open("a", encoding="utf-8") as f:  # the trainer's own words: it ran out of memory
            for e in ({"event": "start", "time": 1.0, "step": 0},
                      {"event": "error", "time": 2.0, "step": 0, "kind": "oom", "message": "CUDA out of memory",
                       "advice": "", "suggested_batch": 1}):
                f.write(_json.dumps(e) + "\n")
        reg.set_status(run_id, st.FAILED, "CUDA out of memory")
        set_language("ru")
        runner = QueueRunner(RunManager(reg), "test")
        events = runner._failed(store.item(it.id), reg.get(run_id))  # the runner's verdict on the failure
        runner.close()
        assert [e.kind for e in events] == ["retry"] and "Не хватило памяти" in events[0].text
        notes = {}
        for lang in ("ru", "en"):
            set_language(lang)
            notes[lang] = shown(store.item(it.id).message)
        assert notes["ru"].startswith("Повторить с батчем 1 (один раз): Не хватило памяти видеокарты"), notes
        assert notes["en"].startswith("Retry with batch 1 (once): The GPU ran out of memory"), notes
        assert not CYRILLIC.search(notes["en"]), notes
    finally:
        set_language(None)
        store.close()
        reg.close()
