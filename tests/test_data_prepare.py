"""Prepared data: the tokenizer, train/val files, meta.json, the held-out rule, the cache,
bad input and atomic writes."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from app.base.state import open_state
from app.data import encode
from app.data import prepare as prep
from app.data.library import Library, LibraryError
from app.data.prepare import PrepareError, prepare
from app.data.progress import Cancelled, CancelToken
from app.data.textgen import documents

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def lib(tmp_path) -> Library:
    st = open_state(tmp_path / "state.sqlite")
    yield Library(st)
    st.close()


def jsonl(path: Path, docs: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")


def split_docs(folder: Path, tok: Tokenizer, name: str) -> list[str]:
    """A token file decoded back into its documents (split at end-of-text)."""
    ids = np.fromfile(folder / name, dtype="<u2").tolist()
    eot = tok.token_to_id(prep.EOT)
    docs, cur = [], []
    for i in ids:
        if i == eot:
            docs.append(tok.decode(cur))
            cur = []
        else:
            cur.append(i)
    assert cur == []  # every document ends with end-of-text
    return docs


@pytest.fixture
def two_constellations(lib, tmp_path):
    """Russian/Ukrainian and English/German/Greek/Chinese text, with exact duplicates."""
    ru = documents(300, seed=11, lang="ru") + documents(100, seed=12, lang="uk")
    other = documents(250, seed=13)
    dup = ru[:5]  # the same text in another file of another constellation
    jsonl(tmp_path / "src" / "ru" / "ru.jsonl", ru)
    jsonl(tmp_path / "src" / "other" / "other.jsonl", other)
    (tmp_path / "src" / "other" / "dup.txt").write_text("", encoding="utf-8")
    jsonl(tmp_path / "src" / "other" / "dup.jsonl", dup)
    lib.add(tmp_path / "src" / "ru", name="ru-uk", constellation="кириллица")
    lib.add(tmp_path / "src" / "other", name="mixed", constellation="world")
    return ru, other + dup


def test_prepared_folder_contract(lib, tmp_path, two_constellations):
    ru, other = two_constellations
    seen = []
    res = prepare(["кириллица", "world"], out=tmp_path / "out", vocab=600, context=32, library=lib,
                  progress=seen.append)
    out, m = res.path, res.meta
    assert not res.cached and out == (tmp_path / "out").resolve()
    assert sorted(p.name for p in out.iterdir()) == ["meta.json", "tokenizer.json", "train.bin", "val.bin"]
    on_disk = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    assert on_disk == m
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    assert m["format"] == 1 and m["dtype"] == "uint16"
    assert m["vocab_size"] == tok.get_vocab_size() == 600
    assert m["tokenizer_sha256"] == hashlib.sha256((out / "tokenizer.json").read_bytes()).hexdigest()
    assert m["constellations"] == ["кириллица", "world"]
    assert (out / "train.bin").stat().st_size == 2 * m["train_tokens"]
    assert (out / "val.bin").stat().st_size == 2 * m["val_tokens"]
    assert sum(m["tokens_by_constellation"].values()) == m["train_tokens"] + m["val_tokens"]
    assert {s["dataset"]: s["constellation"] for s in m["sources"]} == {"ru-uk": "кириллица", "mixed": "world"}
    assert all(len(s["sha256"]) == 64 for s in m["sources"])
    assert {s["dataset"]: s["tokens"] for s in m["sources"]} == {
        "ru-uk": m["tokens_by_constellation"]["кириллица"], "mixed": m["tokens_by_constellation"]["world"]}
    assert len(m["data_id"]) == 64 and m["val_split"]["method"] == "unit-hash"
    # Byte-level BPE with end-of-text between documents: every document comes back exactly.
    assert tok.token_to_id(prep.EOT) == m["eot_id"]
    train_docs, val_docs = split_docs(out, tok, "train.bin"), split_docs(out, tok, "val.bin")
    assert sorted(train_docs + val_docs) == sorted(ru + other)
    assert tok.decode(tok.encode("Ёжик видит звезду; 猫 sieht ein Haus.").ids) == "Ёжик видит звезду; 猫 sieht ein Haus."
    # ... and never the same text in both (the duplicated documents go the same way).
    assert not set(train_docs) & set(val_docs)
    # Progress reached the end of every phase, in order.
    phases = [p.phase for p in seen]
    assert phases.index("tokenizer") < phases.index("tokenize") < phases.index("split") < phases.index("done")
    assert any(p.phase == "tokenize" and p.fraction == 1.0 for p in seen)
    # The trainer reads it (its own reader, the real contract).
    from trainer.run.data import eval_offsets, open_prepared

    data = open_prepared(out)
    assert data.vocab_size == 600 and data.data_id == m["data_id"] and len(data.val) == m["val_tokens"]
    assert len(eval_offsets(len(data.val), 32, 96)) == 96
    # The library now knows the token counts.
    assert {d.name: d.tokens for d in lib.datasets()}["ru-uk"] == m["tokens_by_constellation"]["кириллица"]


def test_held_out_size_rule(lib, tmp_path):
    jsonl(tmp_path / "big" / "a.jsonl", documents(400, seed=5))
    lib.add(tmp_path / "big", name="big", constellation="big")
    # Short context: 1 % of the tokens is more than 96 segments, so val is about 1 %.
    m = prepare(["big"], out=tmp_path / "o1", vocab=400, context=8, library=lib).meta
    total = m["train_tokens"] + m["val_tokens"]
    assert 96 * 8 < 0.01 * total
    assert 0.01 <= m["val_tokens"] / total < 0.02
    assert m["val_split"]["segments"] >= 96
    # Longer context: 96 segments is more than 1 %: val holds at least 96 segments.
    m = prepare(["big"], out=tmp_path / "o2", vocab=400, context=128, library=lib).meta
    assert m["val_tokens"] >= 96 * 128 + 1 and m["val_tokens"] / total > 0.03
    assert m["val_split"]["segments"] >= 96 and m["warnings"] == []
    # Very long context: the data does not allow 96 segments; val stops at 10 %, and says so.
    m = prepare(["big"], out=tmp_path / "o3", vocab=400, context=4096, library=lib).meta
    assert 0.05 < m["val_tokens"] / total <= 0.10
    assert any("96" in w for w in m["warnings"])


def test_same_request_is_cached_and_deterministic(lib, tmp_path, two_constellations, monkeypatch):
    a = prepare(["world"], out=tmp_path / "a", vocab=500, context=32, library=lib)
    b = prepare(["world"], out=tmp_path / "b", vocab=500, context=32, library=lib, use_cache=False)
    assert not b.cached and a.meta["data_id"] == b.meta["data_id"]
    for name in ("tokenizer.json", "train.bin", "val.bin"):
        assert (a.path / name).read_bytes() == (b.path / name).read_bytes()

    def boom(*args, **kwargs):
        raise AssertionError("the cache should have answered")

    monkeypatch.setattr(prep, "_train_tokenizer", boom)
    monkeypatch.setattr(prep, "encode_and_split", boom)
    again = prepare(["world"], out=tmp_path / "a", vocab=500, context=32, library=lib)
    assert again.cached and again.meta == a.meta
    # The same request into another folder: linked from the cache, not computed.
    c = prepare(["world"], out=tmp_path / "c", vocab=500, context=32, library=lib)
    assert c.cached and (c.path / "train.bin").read_bytes() == (a.path / "train.bin").read_bytes()
    # A damaged cached folder is not trusted.
    (tmp_path / "a" / "val.bin").write_bytes(b"\x00\x00")
    (tmp_path / "c" / "val.bin").write_bytes(b"\x00\x00")
    (tmp_path / "b" / "val.bin").write_bytes(b"\x00\x00")
    with pytest.raises(AssertionError, match="cache should have answered"):
        prepare(["world"], out=tmp_path / "a", vocab=500, context=32, library=lib)


def test_new_data_gives_new_sample_and_id(lib, tmp_path, two_constellations):
    first = prepare(["world"], out=tmp_path / "a", vocab=500, context=32, library=lib)
    jsonl(tmp_path / "src" / "other" / "more.jsonl", documents(80, seed=99, lang="de"))
    second = prepare(["world"], out=tmp_path / "a", vocab=500, context=32, library=lib)
    assert not second.cached
    assert second.meta["data_id"] != first.meta["data_id"]
    assert second.meta["sources"][0]["sha256"] != first.meta["sources"][0]["sha256"]
    assert any("more.jsonl" in w for w in second.warnings)  # the change is reported
    # the folder was replaced whole; no temporary or old folders are left
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_reused_tokenizer_is_kept_byte_for_byte(lib, tmp_path, two_constellations):
    a = prepare(["кириллица"], out=tmp_path / "a", vocab=500, context=32, library=lib)
    given = a.path / "tokenizer.json"
    b = prepare(["world"], out=tmp_path / "b", tokenizer=given, vocab=4000, context=32, library=lib)
    assert (b.path / "tokenizer.json").read_bytes() == given.read_bytes()
    assert a.meta["vocab_size"] == 500
    assert b.meta["tokenizer_trained"] is False and b.meta["vocab_size"] == 500
    assert b.meta["tokenizer_sha256"] == a.meta["tokenizer_sha256"]
    assert any("500" in w for w in b.warnings)  # --vocab 4000 was not what it got
    # Asking for more tokens than the text supports gets what it supports, and says so.
    small = prepare(["кириллица"], out=tmp_path / "s", vocab=5000, context=32, library=lib)
    assert small.meta["vocab_size"] < 5000 and any("5000" in w for w in small.warnings)
    # A tokenizer without the end-of-text token, a missing file and a non-tokenizer are refused.
    from tokenizers import Tokenizer as T
    from tokenizers import models, pre_tokenizers, trainers

    plain = T(models.BPE())
    plain.pre_tokenizer = pre_tokenizers.ByteLevel()
    plain.train_from_iterator(["abc abd"], trainers.BpeTrainer(vocab_size=300, show_progress=False))
    plain.save(str(tmp_path / "plain.json"))
    with pytest.raises(PrepareError, match="<\\|endoftext\\|>"):
        prepare(["world"], tokenizer=tmp_path / "plain.json", library=lib)
    with pytest.raises(PrepareError) as e:
        prepare(["world"], tokenizer=tmp_path / "missing.json", library=lib)
    assert e.value.exit_code == 2
    (tmp_path / "junk.json").write_text("{not a tokenizer")
    with pytest.raises(PrepareError, match="junk.json"):
        prepare(["world"], tokenizer=tmp_path / "junk.json", library=lib)


# 65,536 tokens is the largest vocabulary whose ids (0…65,535) fit uint16: the trainer's
# own limit (trainer.config.run_config.MAX_VOCAB), which preparing data takes too.
@pytest.mark.parametrize("vocab", [0, 255, 65537, 100_000])
def test_vocabulary_outside_uint16_or_bytes_is_refused(lib, vocab):
    with pytest.raises(PrepareError, match=str(vocab)) as e:
        prepare(["demo"], vocab=vocab, library=lib)
    assert e.value.exit_code == 2


def test_smallest_vocabulary_works(lib, tmp_path, two_constellations):
    m = prepare(["world"], out=tmp_path / "v", vocab=256, context=16, library=lib).meta
    # 256 bytes + end-of-text: the tokenizer's actual size is what meta.json says
    assert m["vocab_size"] == 257 and m["vocab_requested"] == 256


def test_empty_and_unknown_constellations_are_named(lib, tmp_path):
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "empty.txt").write_text("Был текст.\n", encoding="utf-8")
    (tmp_path / "e" / "bin.txt").write_bytes(b"\x00\x01\x02" * 100)
    lib.add(tmp_path / "e", name="nothing", constellation="пустое")
    (tmp_path / "e" / "empty.txt").write_text("")  # emptied after adding (no text is refused at add)
    with pytest.raises(PrepareError, match="пустое"):
        prepare(["demo", "пустое"], library=lib)
    lib.create_constellation("hollow")
    with pytest.raises(PrepareError, match="hollow"):
        prepare(["hollow"], library=lib)
    with pytest.raises(LibraryError, match="ghost"):
        prepare(["ghost"], library=lib)


def test_too_little_text_is_a_clear_error(lib, tmp_path):
    (tmp_path / "one.txt").write_text("Только один короткий документ.\n", encoding="utf-8")
    lib.add(tmp_path / "one.txt", name="one", constellation="tiny")
    with pytest.raises(PrepareError, match="validation|проверочн"):
        prepare(["tiny"], out=tmp_path / "o", vocab=300, library=lib)
    assert not (tmp_path / "o").exists()


def test_vanished_dataset_path_is_reported(lib, tmp_path):
    f = tmp_path / "gone.txt"
    f.write_text("Текст.\n", encoding="utf-8")
    lib.add(f, constellation="c")
    f.unlink()
    with pytest.raises(LibraryError) as e:
        prepare(["c"], library=lib)
    assert e.value.exit_code == 2 and "gone" in str(e.value)


def test_out_folder_that_is_not_prepared_data_is_never_overwritten(lib, tmp_path):
    precious = tmp_path / "docs"
    precious.mkdir()
    (precious / "thesis.txt").write_text("do not delete")
    with pytest.raises(PrepareError, match="docs"):
        prepare(["demo"], out=precious, library=lib)
    assert (precious / "thesis.txt").read_text() == "do not delete"


def test_cancel_leaves_nothing_and_keeps_the_old_folder(lib, tmp_path, two_constellations):
    old = prepare(["world"], out=tmp_path / "out", vocab=400, context=32, library=lib)
    jsonl(tmp_path / "src" / "other" / "more.jsonl", documents(50, seed=7))  # new content
    token = CancelToken()

    def on_progress(p):
        if p.phase == "tokenize":
            token.cancel()

    with pytest.raises(Cancelled):
        prepare(["world"], out=tmp_path / "out", vocab=400, context=32, library=lib,
                progress=on_progress, cancel=token)
    assert json.loads((tmp_path / "out" / "meta.json").read_text())["data_id"] == old.meta["data_id"]
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []


def test_killed_prepare_leaves_no_complete_looking_folder(tmp_path):
    """SIGKILL in the middle (the real process): no folder at --out; the next run cleans up."""
    home = tmp_path / "home"
    src = tmp_path / "src"
    jsonl(src / "a.jsonl", documents(200, seed=3))
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from app.data.library import Library
        from app.data.prepare import prepare
        lib = Library()
        lib.add({str(src)!r}, name="a", constellation="a")
        def progress(p):
            if p.phase == "tokenize":
                print("TOKENIZING", flush=True)
                sys.stdin.readline()  # wait here until the test kills us
        prepare(["a"], out={str(tmp_path / "out")!r}, vocab=300, context=16, progress=progress)
    """)
    env = {**os.environ, "TERNIT_HOME": str(home)}
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=env, text=True)
    try:
        assert proc.stdout.readline().strip() == "TOKENIZING"
        proc.kill()
    finally:
        proc.wait(timeout=30)
    assert not (tmp_path / "out").exists()
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(".out.tmp-")]
    assert len(leftovers) == 1 and not (leftovers[0] / "meta.json").exists()
    # The next prepare removes the dead process's temporary folder and succeeds.
    st = open_state(home / "data" / "state.sqlite")
    try:
        res = prepare(["a"], out=tmp_path / "out", vocab=300, context=16, library=Library(st))
    finally:
        st.close()
    assert (res.path / "meta.json").exists()
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".out.")] == []


def test_demo_prepares_with_the_defaults(lib):
    res = prepare(["demo"], library=lib)
    m = res.meta
    assert res.path.parent.name == "prepared"  # under the lab's data folder
    assert m["vocab_size"] == 4000 and m["context"] == 1024
    assert m["tokens_by_constellation"]["demo"] > 50_000
    assert m["val_tokens"] >= 1025  # at least one segment of the default context


def test_window_style_worker_thread_with_cancel_and_progress(lib, tmp_path, two_constellations):
    """The window runs prepare in a worker thread, reads the library from its own thread
    meanwhile, and cancels from the UI thread: all on one Library (one connection per thread)."""
    import threading

    token = CancelToken()
    started, go = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def progress(p):
        if p.phase == "tokenize":
            started.set()
            go.wait(timeout=60)  # hold the worker mid-way until the "UI" has acted

    def work():
        try:
            outcome["result"] = prepare(["кириллица", "world"], out=tmp_path / "w", vocab=400, context=32,
                                        library=lib, progress=progress, cancel=token)
        except BaseException as exc:  # noqa: BLE001 - inspected below
            outcome["error"] = exc

    th = threading.Thread(target=work)
    th.start()
    assert started.wait(timeout=60)
    assert {d.name for d in lib.datasets()} >= {"ru-uk", "mixed"}  # reading while it works
    token.cancel()
    go.set()
    th.join(timeout=60)
    assert isinstance(outcome.get("error"), Cancelled)
    assert not (tmp_path / "w").exists()
    # and a fresh run in a thread completes
    token2 = CancelToken()
    th = threading.Thread(target=lambda: outcome.update(result=prepare(
        ["world"], out=tmp_path / "w", vocab=400, context=32, library=lib, cancel=token2)))
    th.start()
    th.join(timeout=60)
    assert (outcome["result"].path / "meta.json").exists()


def test_dataset_with_no_text_is_skipped_with_a_note(lib, tmp_path, two_constellations):
    (tmp_path / "blank.txt").write_text("Был текст.\n", encoding="utf-8")
    lib.add(tmp_path / "blank.txt", name="blank", constellation="world")
    (tmp_path / "blank.txt").write_text("\n\n")  # emptied after adding (no text is refused at add)
    res = prepare(["world"], out=tmp_path / "o", vocab=400, context=32, library=lib)
    assert any("blank" in w for w in res.warnings)
    assert [s["dataset"] for s in res.meta["sources"]] == ["mixed"]


def test_tokenizer_trains_on_a_fixed_sample_of_large_inputs(lib, tmp_path, two_constellations, monkeypatch):
    """Above TOKENIZER_SAMPLE_CHARS the tokenizer sees a hash-chosen part of the text (its
    memory grows with the words it sees); everything is still encoded."""
    total = lib.dataset("mixed").characters
    monkeypatch.setattr(prep, "TOKENIZER_SAMPLE_CHARS", total // 4)
    fed: list[int] = []
    real = prep.new_tokenizer

    class Counting:
        def __init__(self, tok):
            self.tok = tok

        def train_from_iterator(self, it, trainer):
            def counted():
                for text in it:
                    fed.append(len(text))
                    yield text
            self.tok.train_from_iterator(counted(), trainer)

        def __getattr__(self, name):
            return getattr(self.tok, name)

    monkeypatch.setattr(prep, "new_tokenizer", lambda vocab: (Counting(real(vocab)[0]), real(vocab)[1]))
    m = prepare(["world"], out=tmp_path / "o", vocab=400, context=32, library=lib).meta
    assert 0.1 * total < sum(fed) < 0.45 * total
    assert m["sources"][0]["documents"] == lib.dataset("mixed").documents


def test_one_tokenizer_instance_per_content_is_reused(lib, tmp_path, two_constellations):
    """tokenizers keeps memory per dropped instance: the lab reuses one per tokenizer.json."""
    a = prepare(["world"], out=tmp_path / "a", vocab=400, context=32, library=lib)
    first = prep.load_tokenizer(a.path / "tokenizer.json")
    copy = tmp_path / "copy.json"
    copy.write_bytes((a.path / "tokenizer.json").read_bytes())
    assert prep.load_tokenizer(copy) is first  # same content, same instance (the trained one)


def test_choose_val_keeps_equal_hashes_together_and_respects_cap_and_target():
    h = np.array([50, 10, 30, 10, 20, 40], dtype=np.uint64)
    n = np.array([5, 3, 4, 3, 2, 6], dtype=np.int64)
    # smallest hashes first: 10 (two units, 6 tokens), 20 (2), 30 (4) ...
    assert encode.choose_val(h, n, 1 << 64, target=7, cap=100).tolist() == [False, True, False, True, True, False]
    # target 1 still takes the whole first group (both units with hash 10): never split text
    assert encode.choose_val(h, n, 1 << 64, target=1, cap=100).tolist() == [False, True, False, True, False, False]
    # a cap below the first group: nothing fits
    assert not encode.choose_val(h, n, 1 << 64, target=1, cap=5).any()
    # only below the limit are all units known to be candidates
    assert encode.choose_val(h, n, 25, target=100, cap=100).tolist() == [False, True, False, True, True, False]


def test_a_full_disk_is_a_clear_error_and_no_thread_is_left(lib, tmp_path, two_constellations, monkeypatch):
    import errno
    import threading

    before = threading.active_count()
    real = encode.Writer.write
    calls = []

    def failing(self, arr):
        calls.append(len(arr))
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, arr)

    monkeypatch.setattr(encode.Writer, "write", failing)
    monkeypatch.setattr(encode, "BATCH_CHARS", 20_000)  # several batches, so it fails mid-way
    with pytest.raises(PrepareError, match="No space left") as e:
        prepare(["world"], out=tmp_path / "o", vocab=300, context=32, library=lib)
    assert "--out" in str(e.value)
    assert not (tmp_path / "o").exists() and [p for p in tmp_path.iterdir() if ".tmp-" in p.name] == []
    assert threading.active_count() == before  # reader and encoder threads ended
