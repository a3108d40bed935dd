"""The session database's tables (SQLite, WAL). Plain data only: no pickles, no code is run on open.

One file per session. ``nodes`` is the tree; a verdict lives in ``verdicts`` (one per node, all
fields as JSON plus the key columns a query sorts by); every LLM exchange is in ``llm_calls``;
``events`` is the session log; ``search_state`` holds the strategy, budget, seed and RNG state of
each problem's search so that ``resume`` continues it.
"""

from __future__ import annotations

SCHEMA_VERSION = 1

DDL = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL                -- JSON
);

CREATE TABLE IF NOT EXISTS problems (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    source     TEXT NOT NULL,
    path       TEXT,
    digest     TEXT NOT NULL,
    device     TEXT NOT NULL DEFAULT 'cpu',
    language   TEXT NOT NULL DEFAULT 'cpp',
    info       TEXT NOT NULL DEFAULT '{}', -- JSON: scaffold facts, op label, share of runtime, ...
    created_at REAL NOT NULL
);

CREATE TABLE IF NOT EXISTS nodes (
    id            INTEGER PRIMARY KEY,
    problem_id    INTEGER NOT NULL REFERENCES problems(id),
    parent_id     INTEGER REFERENCES nodes(id),
    origin        TEXT NOT NULL,           -- root | seed | llm | user
    kind          TEXT NOT NULL,           -- root | seed | whole | edit | repair | user
    state         TEXT NOT NULL,           -- pending | evaluating | evaluated | no_code | duplicate
    language      TEXT NOT NULL,
    directive     TEXT NOT NULL DEFAULT '',
    source        TEXT NOT NULL DEFAULT '',
    kernel_source TEXT NOT NULL DEFAULT '',
    norm_code     TEXT NOT NULL DEFAULT '', -- normalised code, for duplicate detection
    note          TEXT NOT NULL DEFAULT '',
    pinned        INTEGER NOT NULL DEFAULT 0,
    excluded      INTEGER NOT NULL DEFAULT 0,
    visits        INTEGER NOT NULL DEFAULT 0,
    value         REAL NOT NULL DEFAULT 0.0,
    reward        REAL,                    -- this node's own reward once evaluated
    duplicate_of  INTEGER REFERENCES nodes(id),
    llm_call_id   INTEGER REFERENCES llm_calls(id),
    created_at    REAL NOT NULL,
    rev           INTEGER NOT NULL DEFAULT 0 -- bumped on every change: views poll changed_since(rev)
);
CREATE INDEX IF NOT EXISTS nodes_problem ON nodes(problem_id, id);
CREATE INDEX IF NOT EXISTS nodes_parent ON nodes(parent_id);
CREATE INDEX IF NOT EXISTS nodes_rev ON nodes(rev);
CREATE INDEX IF NOT EXISTS nodes_norm ON nodes(problem_id, norm_code);

CREATE TABLE IF NOT EXISTS verdicts (
    node_id     INTEGER PRIMARY KEY REFERENCES nodes(id),
    status      TEXT NOT NULL,
    speedup     REAL,
    latency_ms  REAL,
    baseline_ms REAL,
    build_s     REAL,
    verify_s    REAL,
    time_s      REAL,
    json        TEXT NOT NULL,            -- Verdict.to_json(): every field and the logs
    created_at  REAL NOT NULL
);

CREATE TABLE IF NOT EXISTS llm_calls (
    id                INTEGER PRIMARY KEY,
    problem_id        INTEGER REFERENCES problems(id),
    purpose           TEXT NOT NULL,       -- whole | edit | repair | sample
    model             TEXT NOT NULL,
    prompt            TEXT NOT NULL,       -- the rendered prompt (chat messages as JSON when chat)
    response          TEXT NOT NULL,
    prompt_tokens     INTEGER,
    completion_tokens INTEGER,
    seconds           REAL,
    params            TEXT NOT NULL DEFAULT '{}', -- JSON: temperature, seed, max_tokens, trimmed parts
    created_at        REAL NOT NULL
);

CREATE TABLE IF NOT EXISTS events (
    id         INTEGER PRIMARY KEY,
    problem_id INTEGER,
    t          REAL NOT NULL,
    kind       TEXT NOT NULL,               -- log | node_added | node_evaluated | pin | ... | finished
    level      TEXT NOT NULL DEFAULT 'info',
    message    TEXT NOT NULL DEFAULT '',
    payload    TEXT NOT NULL DEFAULT '{}'   -- JSON
);
CREATE INDEX IF NOT EXISTS events_problem ON events(problem_id, id);

CREATE TABLE IF NOT EXISTS search_state (
    problem_id        INTEGER PRIMARY KEY REFERENCES problems(id),
    strategy          TEXT NOT NULL,
    budget_candidates INTEGER,
    budget_minutes    REAL,
    seed              INTEGER NOT NULL DEFAULT 0,
    rng_state         TEXT NOT NULL DEFAULT 'null', -- JSON
    config            TEXT NOT NULL DEFAULT '{}',   -- JSON: the SearchConfig
    status            TEXT NOT NULL DEFAULT 'new',  -- new | running | paused | finished | stopped
    elapsed_s         REAL NOT NULL DEFAULT 0.0,    -- search time spent over all runs
    updated_at        REAL NOT NULL
);
"""
