"""The lab with a sharded run's checkpoints (the DCP form, step-XXXXXXXX.dcp/ with its list
of SHA-256s beside it): one real 2-process FSDP run under torchrun (gloo, CPU, tiny model)
shared by the tests, continued by `ternit run continue` on one process, a changed shard
passed over and said, `ternit export ID` writing safetensors; the Kaggle outputs copy of
a .dcp folder with a hand-made one."""

from __future__ import annotations

import pytest

from app.base import run_status as status
from app.cli import main as cli
from app.runs import Registry, RunManager
from app.runs.checkpoints import choose_checkpoint, damage, latest_checkpoint
from tests.test_runs_local import config, no_orphans, one_thread  # noqa: F401 (fixtures)
from tests.trainer_run import events, torchrun
from trainer.state import checkpoint_index as index

pytestmark = pytest.mark.timeout(300)
STEPS = 4


@pytest.fixture(scope="module")
def sharded_run(tiny_data, tmp_path_factory):
    """A finished lab run trained on two processes: checkpoints at steps 3 and 4, both .dcp;
    the lab's folders in a home of their own that the module's tests share."""
    home = tmp_path_factory.mktemp("dcp-lab")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TERNIT_HOME", str(home))
        return home, _train_sharded(tiny_data)


@pytest.fixture
def sharded(sharded_run, monkeypatch):
    home, rec = sharded_run
    monkeypatch.setenv("TERNIT_HOME", str(home))
    return rec


def _train_sharded(tiny_data):
    reg = Registry()
    # A checkpoint at every step, the last two kept: two .dcp checkpoints from one torchrun
    # (a stop-and-resume on two processes is test_fsdp's).
    cfg = config(tiny_data, steps_to=STEPS, eval_every=STEPS, sharding="fsdp", precision="fp16",
                 checkpoint_every_min=0, keep_checkpoints=2)
    rec = reg.create_run(cfg)
    p = torchrun(rec.path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert events(rec.path, "start")[0]["world_size"] == 2
    reg.ingest(rec.id)
    reg.update(rec.id, status=status.FINISHED)
    reg.close()
    return rec


def test_a_sharded_run_continues_on_one_process(sharded, capsys):
    folder = sharded.path / "checkpoints"
    assert [p.name for p in index.checkpoint_files(folder)] == [f"step-{s:08d}.dcp" for s in (STEPS - 1, STEPS)]
    assert latest_checkpoint(sharded.path).name == f"step-{STEPS:08d}.dcp"
    m = RunManager()
    assert next(r for r in m.history() if r.id == sharded.id).can_continue
    assert cli.main(["run", "continue", sharded.id, "--steps-to", str(STEPS + 2), "--wait"]) == 0
    child = m.registry.children(sharded.id)[0]
    assert (child.status, child.last_step) == ("finished", STEPS + 2)
    assert child.config()["resume_from"] == str((folder / f"step-{STEPS:08d}.dcp").resolve())
    assert events(child.path, "start")[-1]["world_size"] == 1
    assert [s["step"] for s in events(child.path, "step")] == [STEPS + 1, STEPS + 2]
    assert "saved sharded over 2 processes: read whole here" in child.log_path.read_text(encoding="utf-8")
    assert latest_checkpoint(child.path).name == f"step-{STEPS + 2:08d}.pt"  # one process: the file form
    m.registry.close()


def test_a_changed_shard_is_passed_over_for_the_newest_intact_and_said_and_exported(sharded, tmp_path, capsys):
    newest = sharded.path / "checkpoints" / f"step-{STEPS:08d}.dcp"
    shard = newest / "__1_0.distcp"
    good = shard.read_bytes()
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0xFF
    shard.write_bytes(bytes(bad))
    try:
        said = damage(newest)
        assert said and "__1_0.distcp" in said and newest.name in said
        checked = choose_checkpoint(sharded.path)
        assert checked.path.name == f"step-{STEPS - 1:08d}.dcp" and checked.passed_over == [said]
        reg = Registry()
        notes: list[str] = []
        from app.runs.continuing import continue_config

        cfg = continue_config(reg, sharded.id, STEPS + 2, notes=notes)
        reg.close()
        assert cfg["resume_from"].endswith(f"step-{STEPS - 1:08d}.dcp")
        assert len(notes) == 1 and "__1_0.distcp" in notes[0] and f"step-{STEPS - 1:08d}.dcp" in notes[0]
        # The export passes over it too, and says so.
        out = tmp_path / "w.safetensors"
        assert cli.main(["export", sharded.id, str(out)]) == 0
        err = capsys.readouterr().err
        assert "__1_0.distcp" in err and f"step-{STEPS - 1:08d}.dcp" in err
        from app.runs.export import _metadata

        meta = _metadata(out)
        assert meta["step"] == str(STEPS - 1) and int(meta["params"]) > 0
        # `ternit export ID` of a sharded run writes safetensors: the DCP form read whole.
        from safetensors.numpy import load_file

        weights = load_file(str(out))
        assert "tok.weight" in weights and str(weights["tok.weight"].dtype) == "float32"
    finally:
        shard.write_bytes(good)
    assert damage(newest) is None


def test_export_of_a_sharded_run_takes_its_newest_checkpoint_and_a_dcp_folder_is_one(sharded):
    # Which checkpoint `ternit export ID` takes is choose_checkpoint's (app/runs/export_cli.py):
    # the newest one here, intact. The export process itself, its safetensors read whole from
    # the DCP form, runs in the test above (of the newest intact one there, step STEPS - 1):
    # one export process, not two of the same kind.
    checked = choose_checkpoint(sharded.path)
    assert checked.path.name == f"step-{STEPS:08d}.dcp" and checked.passed_over == []
    # The folder itself is a checkpoint `ternit sample`/`eval` and export accept by path.
    from app.text.generation import resolve

    assert resolve(str(sharded.path / "checkpoints" / f"step-{STEPS:08d}.dcp")).checkpoint.name.endswith(".dcp")


@pytest.fixture
def english():
    from app.base.i18n import set_language

    set_language("en")
    yield
    set_language(None)


def _hand_made_dcp(root, name: str = "step-00000007.dcp"):
    folder = root / "run" / "checkpoints" / name
    (folder / "sub").mkdir(parents=True)
    for rel, data in ((".metadata", b"meta"), ("__0_0.distcp", b"shard0" * 100), ("__1_0.distcp", b"shard1" * 100),
                      ("extra.pt", b"extra"), ("sub/x", b"nested")):
        (folder / rel).write_bytes(data)
    index.hash_path(folder).write_text(index.dcp_manifest(folder), encoding="utf-8")
    return folder, [{"event": "checkpoint", "step": 7, "path": f"/kaggle/working/run/checkpoints/{name}",
                     "sha256": index.file_sha256(folder)}]


def test_the_kaggle_copy_takes_a_dcp_folder_with_its_hash_list(tmp_path, english):
    from app.kaggle.outputs import take_checkpoint

    out = tmp_path / "outputs"
    src, evs = _hand_made_dcp(out)
    run_dir = tmp_path / "run"
    message, path, sha = take_checkpoint(run_dir, out, evs)
    dst = run_dir / "checkpoints" / src.name
    assert (message, path, sha) == ("", str(dst), evs[0]["sha256"])
    assert sorted(p.relative_to(dst).as_posix() for p in dst.rglob("*") if p.is_file()) == \
        [".metadata", "__0_0.distcp", "__1_0.distcp", "extra.pt", "sub/x"]
    assert index.hash_path(dst).read_text(encoding="utf-8") == index.hash_path(src).read_text(encoding="utf-8")
    assert (run_dir / "checkpoints" / "latest").read_text().strip() == src.name
    assert choose_checkpoint(run_dir).path == dst and not list((run_dir / "checkpoints").glob(".*tmp"))
    assert take_checkpoint(run_dir, out, evs)[1] == str(dst)  # already there and intact: kept

    # A shard damaged in the download is not copied, and said.
    (src / "__1_0.distcp").write_bytes(b"shard1" * 99 + b"shardX")
    other = tmp_path / "other"
    message, path, _ = take_checkpoint(other, out, evs)
    assert path is None and "damaged in the download" in message and not (other / "checkpoints" / src.name).exists()
    # ...nor a folder whose list did not come.
    (src / "__1_0.distcp").write_bytes(b"shard1" * 100)
    index.hash_path(src).unlink()
    message, path, _ = take_checkpoint(other, out, evs)
    assert path is None and "missing from the kernel's outputs" in message
