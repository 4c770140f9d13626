-- The daemon store as attrib wrote it before issue 16 (schema 1, no deliveries table): a state
-- directory from then must open and work unchanged (tests/test_daemon_store.py).
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    state TEXT NOT NULL,
    repo TEXT NOT NULL,            -- what was flagged: a local path or a git URL
    repo_path TEXT NOT NULL,       -- the local repository the job reads (the path, or our mirror of the URL)
    good TEXT NOT NULL,            -- full shas, resolved at submission
    bad TEXT NOT NULL,
    good_rev TEXT NOT NULL,        -- as flagged
    bad_rev TEXT NOT NULL,
    recipe TEXT NOT NULL,
    benchmark TEXT NOT NULL,
    dedup_key TEXT NOT NULL,
    source TEXT,
    file_issue TEXT,
    seed INTEGER NOT NULL,         -- the engine is deterministic given this and the runs
    attempts INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_expires REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    progress TEXT NOT NULL DEFAULT '{}',
    result TEXT,
    error TEXT,
    filing TEXT
);
-- One active job per (repo, good, bad, benchmark): the database itself refuses a second one.
CREATE UNIQUE INDEX IF NOT EXISTS jobs_active ON jobs (dedup_key) WHERE state IN ('queued', 'running');
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state, created);
CREATE TABLE IF NOT EXISTS transitions (
    id INTEGER PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs (id),
    at REAL NOT NULL,
    from_state TEXT,
    to_state TEXT NOT NULL,
    owner TEXT,
    note TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS flags (
    id TEXT PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs (id),
    received REAL NOT NULL,
    route TEXT NOT NULL,
    duplicate INTEGER NOT NULL,
    body TEXT NOT NULL
);
-- Runner call n (0-based) for one checkout key within a job (seq orders all calls of the job).
CREATE TABLE IF NOT EXISTS samples (
    job_id TEXT NOT NULL REFERENCES jobs (id),
    key TEXT NOT NULL,
    n INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    samples TEXT NOT NULL,
    error TEXT NOT NULL,
    duration_s REAL NOT NULL,
    excluded TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (job_id, key, n)
);
CREATE TABLE IF NOT EXISTS builds (
    id INTEGER PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs (id),
    attempt INTEGER NOT NULL,
    commit_sha TEXT NOT NULL,
    key TEXT NOT NULL,
    ok INTEGER NOT NULL,
    cached INTEGER NOT NULL,
    reason TEXT NOT NULL,
    duration_s REAL NOT NULL,
    log_path TEXT NOT NULL,
    at REAL NOT NULL
);
