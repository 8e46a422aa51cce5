-- Runs: the index the run history reads fast. The run folders stay the truth for events.
--
-- status is a text column with this documented set (app/runs/status.py, STATUSES):
--   local:  created, starting, running, stopping, finished, stopped, time_limit, failed
--   kaggle: uploading, queued, running_kaggle, downloading (then finished, stopped,
--           time_limit or failed like a local run)
-- A chain is one training carried across legs: a local «Продолжить» or Kaggle continuing
-- on another account makes a new run with parent_id set, the same chain_id and leg + 1.
CREATE TABLE IF NOT EXISTS runs (
    id                TEXT PRIMARY KEY,
    name              TEXT NOT NULL,
    folder            TEXT NOT NULL,
    parent_id         TEXT REFERENCES runs(id) ON DELETE SET NULL,
    chain_id          TEXT NOT NULL,
    leg               INTEGER NOT NULL DEFAULT 1,
    target_kind       TEXT NOT NULL DEFAULT 'local',
    target_gpu        TEXT,
    target_account    TEXT,
    status            TEXT NOT NULL DEFAULT 'created',
    created_at        REAL NOT NULL,
    updated_at        REAL NOT NULL,
    started_at        REAL,
    ended_at          REAL,
    pid               INTEGER,
    pid_started_at    REAL,          -- the process's start time: a reused pid is not our run
    stop_requested_at REAL,
    last_step         INTEGER,
    steps_to          INTEGER,
    tokens_seen       INTEGER,
    best_val_loss     REAL,
    last_loss         REAL,
    params            INTEGER,
    end_reason        TEXT,
    last_message      TEXT,
    kaggle_kernel_ref TEXT,
    events_offset     INTEGER NOT NULL DEFAULT 0   -- bytes of events.jsonl already indexed
);
CREATE INDEX IF NOT EXISTS runs_by_chain ON runs(chain_id, leg);
CREATE INDEX IF NOT EXISTS runs_by_status ON runs(status);
CREATE INDEX IF NOT EXISTS runs_by_created ON runs(created_at);
