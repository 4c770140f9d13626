"""The nightly history's tables in SQLite, their indexes and the migrations between versions:
stated here and nowhere else (history/store.py creates and migrates them)."""

HISTORY_SCHEMA = 4  # meta key 'history_schema'; the daemon's own tables have their own version
# From version N to N + 1. 1 -> 2 (issue 20): history_series.pending and the indexes on it and
# on history_changes.flag. 2 -> 3 (issue 33): history_series.scale, the scale detection read it
# on (NULL until its next detection). 3 -> 4 (issue 41): history_results.environment, where
# each value was measured ('{}': nothing said, as every row stored before).
MIGRATIONS = {
    "1": ("ALTER TABLE history_series ADD COLUMN pending INTEGER NOT NULL DEFAULT 0",
          "UPDATE history_series SET pending = 1"),  # detected again once: cheap, and nothing is missed
    "2": ("ALTER TABLE history_series ADD COLUMN scale TEXT",),
    "3": ("ALTER TABLE history_results ADD COLUMN environment TEXT NOT NULL DEFAULT '{}'",),
}  # fmt: skip

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- One series per (project, benchmark, configuration): config is canonical JSON (sorted keys).
CREATE TABLE IF NOT EXISTS history_series (
    id INTEGER PRIMARY KEY,
    project TEXT NOT NULL,
    benchmark TEXT NOT NULL,
    config TEXT NOT NULL,
    unit TEXT NOT NULL,
    direction TEXT NOT NULL,
    pending INTEGER NOT NULL DEFAULT 0, -- > 0: rows stored since its last successful detection
    scale TEXT,                        -- DetectScale its last detection read it on (NULL: none yet)
    UNIQUE (project, benchmark, config)
);
-- Every file ingested. digest = sha256 of the project and the file's rows (idempotency).
CREATE TABLE IF NOT EXISTS history_files (
    digest TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    format TEXT NOT NULL,
    received REAL NOT NULL,
    rows INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS history_results (
    file_digest TEXT NOT NULL REFERENCES history_files (digest),
    row TEXT NOT NULL,             -- where in the file (CSV row, JSON path)
    series_id INTEGER NOT NULL REFERENCES history_series (id),
    commit_sha TEXT NOT NULL,      -- full sha, resolved at ingestion
    value REAL NOT NULL,
    measured_at REAL NOT NULL,     -- the file's timestamp, else when it was received
    environment TEXT NOT NULL DEFAULT '{}', -- canonical JSON: where it ran (toolkit, driver), never the series' identity
    PRIMARY KEY (file_digest, row)
);
CREATE INDEX IF NOT EXISTS history_results_by_series ON history_results (series_id, commit_sha);
-- A decided change point: between two consecutive measured commits of the series' line.
CREATE TABLE IF NOT EXISTS history_changes (
    id INTEGER PRIMARY KEY,
    series_id INTEGER NOT NULL REFERENCES history_series (id),
    before_sha TEXT NOT NULL,
    after_sha TEXT NOT NULL,
    direction TEXT NOT NULL,       -- ChangeDirection
    change_pct REAL NOT NULL,
    ci_lo REAL NOT NULL,
    ci_hi REAL NOT NULL,
    p_value REAL NOT NULL,
    before_mean REAL NOT NULL,
    after_mean REAL NOT NULL,
    detected_at REAL NOT NULL,
    recovered_sha TEXT,            -- first commit of the segment that went back, once seen
    flag TEXT NOT NULL,            -- FlagState
    job_id TEXT,                   -- the bisection (queued, or the one it duplicates)
    note TEXT NOT NULL DEFAULT '',
    flagged_at REAL,
    UNIQUE (series_id, before_sha, after_sha)
);
"""
# Created after the tables (and after a migration added the column they name).
INDEXES = """
CREATE INDEX IF NOT EXISTS history_series_pending ON history_series (project, pending);
CREATE INDEX IF NOT EXISTS history_changes_by_flag ON history_changes (flag);
"""
