-- 001: the data side — datasets, their files and hashes, constellations, prepared data.
-- (002 runs: window; 003 Kaggle accounts' public details, uploaded datasets, kernels.)
-- Times are unix seconds (REAL). JSON columns hold text written by json.dumps.

CREATE TABLE datasets (
    id           INTEGER PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    path         TEXT NOT NULL,              -- absolute path of the file or folder ('' for builtin)
    kind         TEXT NOT NULL CHECK (kind IN ('file', 'folder', 'builtin')),
    sha256       TEXT NOT NULL,              -- content hash: over (relative path, file sha256) in order
    bytes        INTEGER NOT NULL DEFAULT 0, -- on-disk bytes of the files that hold text
    documents    INTEGER NOT NULL DEFAULT 0,
    characters   INTEGER NOT NULL DEFAULT 0,
    files        INTEGER NOT NULL DEFAULT 0, -- files that hold text
    skipped      INTEGER NOT NULL DEFAULT 0, -- files skipped (binary, empty, unreadable)
    replaced     INTEGER NOT NULL DEFAULT 0, -- characters decoded with U+FFFD (not UTF-8)
    added_at     REAL NOT NULL,
    changed_at   REAL NOT NULL,              -- last time the content hash changed
    scanned_at   REAL NOT NULL
);

CREATE TABLE dataset_files (
    dataset_id   INTEGER NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
    relpath      TEXT NOT NULL,              -- '/'-separated, relative to the dataset's path
    size         INTEGER NOT NULL,
    mtime_ns     INTEGER NOT NULL,
    sha256       TEXT NOT NULL,              -- of the file's bytes as stored (the .gz itself)
    status       TEXT NOT NULL CHECK (status IN ('ok', 'empty', 'binary', 'unreadable')),
    documents    INTEGER NOT NULL DEFAULT 0,
    characters   INTEGER NOT NULL DEFAULT 0,
    replaced     INTEGER NOT NULL DEFAULT 0,
    note         TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (dataset_id, relpath)
);

CREATE TABLE constellations (
    id           INTEGER PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    description  TEXT NOT NULL DEFAULT '',
    builtin      INTEGER NOT NULL DEFAULT 0,
    created_at   REAL NOT NULL
);

CREATE TABLE constellation_datasets (
    constellation_id INTEGER NOT NULL REFERENCES constellations(id) ON DELETE CASCADE,
    dataset_id       INTEGER NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
    added_at         REAL NOT NULL,
    PRIMARY KEY (constellation_id, dataset_id)
);
CREATE INDEX constellation_datasets_by_dataset ON constellation_datasets(dataset_id);

-- One row per prepared-data folder the lab made (the cache).
CREATE TABLE prepared (
    id               INTEGER PRIMARY KEY,
    cache_key        TEXT NOT NULL,          -- sha256 of (sources' hashes, tokenizer, vocab, split)
    data_id          TEXT NOT NULL,          -- meta.json's data_id
    path             TEXT NOT NULL UNIQUE,
    constellations   TEXT NOT NULL,          -- JSON list
    vocab_size       INTEGER NOT NULL,
    context          INTEGER NOT NULL,
    train_tokens     INTEGER NOT NULL,
    val_tokens       INTEGER NOT NULL,
    tokenizer_sha256 TEXT NOT NULL,
    created_at       REAL NOT NULL
);
CREATE INDEX prepared_by_key ON prepared(cache_key);

-- What went into each prepared folder: token counts per dataset for `ternit data list`.
CREATE TABLE prepared_sources (
    prepared_id    INTEGER NOT NULL REFERENCES prepared(id) ON DELETE CASCADE,
    dataset_name   TEXT NOT NULL,
    dataset_sha256 TEXT NOT NULL,
    constellation  TEXT NOT NULL,
    tokens         INTEGER NOT NULL,
    documents      INTEGER NOT NULL,
    PRIMARY KEY (prepared_id, dataset_name)
);
CREATE INDEX prepared_sources_by_sha ON prepared_sources(dataset_sha256);
