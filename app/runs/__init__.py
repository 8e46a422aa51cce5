"""Runs: start, follow, stop and continue training runs; the run history.

Everything the window and `ternit run` do with runs goes through here; nothing imports
torch (the trainer is always its own process: `python -m trainer --run DIR`).

API overview (names are stable):

    from app.runs import RunManager, Registry, EventTail

    runs = RunManager()                  # over the lab's state.sqlite; re-attaches at once:
                                         # runs still going are followed again, runs whose
                                         # process vanished are settled from their events
    rec = runs.start(config_dict_or_path)           # -> RunRecord (status "starting")
          runs.start(cfg, target="kaggle", account="auto")   # via app.kaggle.runner
    runs.poll() -> list[RunUpdate]       # call from a timer: new events per active run,
                                         # rows updated, ended runs settled
    runs.add_listener(fn)                # fn(RunEnded) when a run ends/fails/hits its limit:
                                         # .run, .status, .failure, .title(), .text()
    runs.stop(run_id)                    # STOP file, SIGTERM after a grace; status
                                         # "stopping" (label "сохранение…") until `end`
    runs.wait(run_id, on_event=print)    # follow until it ends (the CLI's --wait); a Kaggle
                                         # chain is followed into its next leg
    runs.launch(run_id, resume="latest") # resume a time-limited local run in its own folder
    runs.history() -> list[HistoryRow]   # the table: status_label, where, steps,
                                         # best_val_loss, tokens_seen, params, can_continue
    runs.series(run_id) -> LossSeries    # steps/tokens/loss, eval_steps/val_loss/val_low/
                                         # val_high/eval_segment, markers (data_changed,
                                         # pause, leg), across the chain (parents first)
    runs.continue_config(run_id, steps_to=None) -> dict      # «Продолжить»: the new run.json
    runs.check_continue(run_id, cfg) -> ContinueCheck        # model locked, validation_anew,
                                                             # warning text
    runs.start_continue(run_id, cfg=None, steps_to=None) -> RunRecord
    runs.failure(run_id) -> Failure | None   # kind oom/nan/data/other/vanished, advice
                                             # (interface language), suggested_batch/lr,
                                             # retry_label(), retry_config(cfg)
    runs.retry_config(run_id) -> dict;  runs.retry(run_id) -> RunRecord
    runs.registry                        # the Registry below

    Registry(state=None, runs_root=None)     # the `runs` table (app/migrations/002_runs.sql)
      .create_run(config, parent_id=None)    # new folder + run.json (atomic) + row
      .create_leg(parent_id, config)         # next leg of a chain (same chain_id, leg + 1)
      .get(id) / .find(id_or_prefix) / .list_runs() / .active() / .lineage(id) / .chain(cid)
      .update(id, **columns) / .set_status(id, status, message) / .set_kernel_ref(id, ref)
      .ingest(id) -> new events folded into the row (offset kept in the row)

    EventTail(path).read() -> new complete events since the last call (partial line kept)
    series.SeriesBuilder(series=None): .begin_run(run_id), .add(event) — live plot feeding;
        made over a loaded LossSeries it carries on from its end
    checkpoints.latest_checkpoint(run_dir) / checkpoint_step(path) — no torch needed
    export.export_checkpoint(ckpt, out) -> ExportResult  (runs `python -m trainer.model.export`)
    process.plan_launch(run_dir, gpu) -> LaunchPlan (argv, env, processes, device, note)

Statuses: app/base/run_status.py (STATUSES, ENDED, ACTIVE, label()). Run folders:
runs_dir()/<YYYYmmdd-HHMM-name>/ run.json, events.jsonl, trainer.log, checkpoints/, outputs/.
Kaggle runs: see app/runs/kaggle_bridge.py for the functions app.kaggle.runner provides.
"""

from __future__ import annotations

from .continuing import ContinueCheck, ContinueError
from .events import EventTail, iter_events, read_events
from .failure import Failure
from .history import HistoryRow
from .manager import RunEnded, RunError, RunManager, RunUpdate
from .registry import Registry, RunNotFound, RunRecord
from .series import LossSeries, Marker

__all__ = [
    "ContinueCheck", "ContinueError", "EventTail", "Failure", "HistoryRow", "LossSeries", "Marker",
    "Registry", "RunEnded", "RunError", "RunManager", "RunNotFound", "RunRecord", "RunUpdate",
    "iter_events", "read_events",
]
