-- 005: the run queue (issue 26): runs that wait for this PC's card or a Kaggle account,
-- in the user's order, and the series they may belong to (app/queue/).
--
-- queue_items.state: waiting -> starting -> running -> done | failed
--   (a failed run retried as its advice says goes back to waiting with attempt 2).
-- queue_items.step is the runner's intent while an item is starting, written BEFORE each
-- side effect so that a runner killed at any moment finishes the start on its restart
-- without doing anything twice:
--   claimed   the machine is chosen and the run's id (its folder name) reserved
--   created   the run's folder and history row exist
--   launching the trainer process is being spawned / the Kaggle leg uploaded and pushed
CREATE TABLE IF NOT EXISTS queue_series (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    vary        TEXT NOT NULL,               -- JSON [[run.json key, [values...]], ...]
    created_at  REAL NOT NULL
);

CREATE TABLE IF NOT EXISTS queue_items (
    id            INTEGER PRIMARY KEY,
    position      INTEGER NOT NULL,          -- the order among all items; lower starts first
    name          TEXT NOT NULL,
    config        TEXT NOT NULL,             -- the run.json (JSON), data.dir absolute
    target        TEXT NOT NULL DEFAULT 'any',   -- local | kaggle | any
    account       TEXT NOT NULL DEFAULT 'auto',  -- auto or a Kaggle account's name
    series_id     INTEGER REFERENCES queue_series(id) ON DELETE SET NULL,
    series_values TEXT,                      -- JSON {run.json key: value} of the series' varied fields
    state         TEXT NOT NULL DEFAULT 'waiting',
    step          TEXT,                      -- the start's intent (above); NULL when not starting
    machine       TEXT,                      -- 'local' or 'kaggle:<account>' once claimed
    run_id        TEXT,                      -- the current run (reserved at the claim; a chain's last leg)
    parent_id     TEXT,                      -- a retry continues this run's checkpoint
    attempt       INTEGER NOT NULL DEFAULT 1,
    runs          TEXT NOT NULL DEFAULT '[]',    -- every run id the item made, in order (JSON)
    held          INTEGER NOT NULL DEFAULT 0,    -- 1: the user held it back; the queue passes it by
    refused       TEXT,                      -- JSON {"local"|"kaggle": why the pre-check refuses it there}
    message       TEXT,
    created_at    REAL NOT NULL,
    claimed_at    REAL,
    started_at    REAL,
    ended_at      REAL,
    updated_at    REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS queue_items_by_state ON queue_items(state, position);
CREATE INDEX IF NOT EXISTS queue_items_by_series ON queue_items(series_id);

-- queue_flags: the queue's own switches (key 'paused': '1' while paused).
CREATE TABLE IF NOT EXISTS queue_flags (
    key    TEXT PRIMARY KEY,
    value  TEXT NOT NULL
);
