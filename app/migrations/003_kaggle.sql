-- Kaggle (issue 6). PUBLIC details only: no key, token or password ever goes in here
-- (keys live in the lab's credentials file, mode 0600; app/kaggle/credentials.py).
--
-- kaggle_accounts: one row per added account, with the last known key status and quota.
--   key_status: unknown | ok | invalid (401/403, key_reason says why) | unreachable
CREATE TABLE IF NOT EXISTS kaggle_accounts (
    username          TEXT PRIMARY KEY,
    added_at          REAL NOT NULL,
    key_status        TEXT NOT NULL DEFAULT 'unknown',
    key_reason        TEXT,
    checked_at        REAL,
    quota_total_s     REAL,
    quota_used_s      REAL,
    quota_reserved_s  REAL,
    quota_refresh_at  REAL,          -- unix seconds of the weekly reset
    quota_checked_at  REAL
);

-- kaggle_datasets: what each account already holds, by content hash, so that the same
-- data, trainer code or checkpoint is uploaded once per account and reused after.
--   kind: code | data | checkpoint
CREATE TABLE IF NOT EXISTS kaggle_datasets (
    account       TEXT NOT NULL,
    content_hash  TEXT NOT NULL,
    kind          TEXT NOT NULL,
    ref           TEXT NOT NULL,     -- owner/slug
    label         TEXT,              -- what it is, for the accounts dialog
    bytes         INTEGER,
    uploaded_at   REAL NOT NULL,
    PRIMARY KEY (account, content_hash)
);

-- kaggle_legs: one row per Kaggle leg (= one run of the registry), the state of a kernel in
-- flight. Restarting the lab reads this to resume following; `state` moves forward only:
--   planned -> uploading -> pushing -> pushed -> running -> downloading -> done | failed
-- A row in `pushing` after a crash is checked against Kaggle before any second push.
CREATE TABLE IF NOT EXISTS kaggle_legs (
    run_id            TEXT PRIMARY KEY,
    run_dir           TEXT NOT NULL,
    chain_id          TEXT,
    leg               INTEGER NOT NULL DEFAULT 1,
    account           TEXT NOT NULL,
    account_choice    TEXT NOT NULL DEFAULT 'auto',   -- 'auto' or the account the user named
    pick_reason       TEXT,
    kernel_slug       TEXT NOT NULL,
    kernel_ref        TEXT,                            -- owner/slug
    kernel_url        TEXT,
    kernel_version    INTEGER,
    state             TEXT NOT NULL DEFAULT 'planned',
    kernel_status     TEXT,
    limit_min         REAL,
    code_hash         TEXT,
    data_hash         TEXT,
    checkpoint_hash   TEXT,
    log_lines_done    INTEGER NOT NULL DEFAULT 0,      -- log lines already turned into events
    follower_pid      INTEGER,
    pushed_at         REAL,
    ended_at          REAL,
    end_reason        TEXT,
    message           TEXT,
    last_step         INTEGER,
    checkpoint_path   TEXT,
    checkpoint_sha256 TEXT,
    next_run_id       TEXT,                            -- the leg that continues this one
    stop_requested_at REAL,                            -- the user asked to stop: no next leg
    updated_at        REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS kaggle_legs_by_state ON kaggle_legs(state);
CREATE INDEX IF NOT EXISTS kaggle_legs_by_chain ON kaggle_legs(chain_id, leg);

-- kaggle_hash_cache: content hashes of big local files (prepared data, checkpoints) keyed
-- by size and mtime, so that the form's «Авто» line can say what an account holds
-- without reading gigabytes on every change.
CREATE TABLE IF NOT EXISTS kaggle_hash_cache (
    path      TEXT PRIMARY KEY,
    size      INTEGER NOT NULL,
    mtime_ns  INTEGER NOT NULL,
    sha256    TEXT NOT NULL
);
