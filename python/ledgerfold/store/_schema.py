"""The SQLite schema of `SQLiteStore` and its migrations.

Each migration runs in its own write transaction together with the row that records it, so a
crash mid-migration leaves the previous version intact. `PRAGMA application_id` marks a file
as a ledgerfold database; `PRAGMA user_version` mirrors the newest applied migration.
"""

from __future__ import annotations

__all__ = [
    "ACCEPTED",
    "ADDED_INDEXES",
    "ANSWERS_INDEX",
    "APPLICATION_ID",
    "CALLS_ARE",
    "CALLS_BEYOND",
    "CALLS_INDEX",
    "CALL_AT",
    "CALL_KEY",
    "CURRENT",
    "FAILED",
    "INDEXED_CALLS",
    "LIVE_ACCEPTED",
    "MANY_CALLS_INDEX",
    "MIGRATIONS",
    "READABLE_VERSION",
    "RECALL_HISTORY_INDEX",
    "RECALL_SHAPE",
    "RECALL_TURNS_INDEX",
    "REJECTED",
    "SCHEMA_VERSION",
    "STALE",
    "SUMMARY_STATUSES",
    "SUPERSEDED",
    "TURN_LIVE",
    "TURN_PURGED",
    "TURN_RETRACTED",
]

#: "LDGF" in ASCII: marks an SQLite file as a ledgerfold store.
APPLICATION_ID = 0x4C444746

#: `turns.state` values. Rows are never deleted: a retracted turn keeps its body, a purged
#: one loses body and meta (retention) but keeps its ID, sequence and digest.
TURN_LIVE = 0
TURN_RETRACTED = 1
TURN_PURGED = 2

#: `summaries.status` values (SPEC §9), the one spelling of each: queries put them in their
#: text with these names (literal, not bound, so SQLite can use the partial index over the
#: accepted ones), and a misspelt name fails at import instead of matching no row.
CURRENT = "current"
SUPERSEDED = "superseded"
STALE = "stale"
FAILED = "failed"
REJECTED = "rejected"
SUMMARY_STATUSES = (CURRENT, SUPERSEDED, STALE, FAILED, REJECTED)
#: SQL lists of statuses: every accepted version, and the accepted ones not yet stale.
ACCEPTED = f"('{CURRENT}', '{SUPERSEDED}', '{STALE}')"
LIVE_ACCEPTED = f"('{CURRENT}', '{SUPERSEDED}')"

_V1 = """
CREATE TABLE schema_migrations (
    version     INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    applied_at  TEXT NOT NULL
);
CREATE TABLE conversations (
    id               TEXT PRIMARY KEY,
    revision         INTEGER NOT NULL,
    last_sequence    INTEGER NOT NULL,   -- highest sequence ever written; never reused
    current_summary  INTEGER REFERENCES summaries(pk)
);
CREATE TABLE turns (
    pk                 INTEGER PRIMARY KEY,
    conversation_id    TEXT NOT NULL REFERENCES conversations(id),
    id                 TEXT NOT NULL,
    sequence           INTEGER NOT NULL,
    role               TEXT NOT NULL,
    body               TEXT NOT NULL,
    protected          INTEGER NOT NULL,
    protection_reason  TEXT,
    grp                TEXT,
    meta               TEXT,             -- JSON object, or NULL
    digest             BLOB NOT NULL,    -- SPEC §3 turn digest of the row as it is now
    state              INTEGER NOT NULL DEFAULT 0,
    UNIQUE (conversation_id, id),
    UNIQUE (conversation_id, sequence)
);
-- Earlier versions of edited turns: the ledger is append-only.
CREATE TABLE turn_history (
    pk                 INTEGER PRIMARY KEY,
    turn_pk            INTEGER NOT NULL REFERENCES turns(pk),
    replaced_at_revision INTEGER NOT NULL,
    role               TEXT NOT NULL,
    body               TEXT NOT NULL,
    protected          INTEGER NOT NULL,
    protection_reason  TEXT,
    grp                TEXT,
    meta               TEXT,
    digest             BLOB NOT NULL,
    replaced_at        TEXT NOT NULL
);
CREATE INDEX turn_history_by_turn ON turn_history (turn_pk);
CREATE TABLE plans (
    pk                INTEGER PRIMARY KEY,
    id                TEXT NOT NULL UNIQUE,
    conversation_id   TEXT NOT NULL,
    policy_version    TEXT NOT NULL,
    source_revision   INTEGER NOT NULL,
    through_sequence  INTEGER NOT NULL,
    compacted_count   INTEGER NOT NULL,
    created_at        TEXT NOT NULL
);
CREATE TABLE active_plans (
    conversation_id  TEXT PRIMARY KEY,
    plan_pk          INTEGER NOT NULL REFERENCES plans(pk)
);
-- Every attempt: accepted versions (current / superseded / stale), rejected results
-- (envelope kept, no index rows) and failures (no envelope: id and envelope fields NULL).
CREATE TABLE summaries (
    pk                  INTEGER PRIMARY KEY,
    id                  TEXT UNIQUE,
    conversation_id     TEXT NOT NULL,
    plan_id             TEXT NOT NULL,
    status              TEXT NOT NULL
        CHECK (status IN ('current', 'superseded', 'stale', 'failed', 'rejected')),
    reason              TEXT,
    created_at          TEXT NOT NULL,
    source_revision     INTEGER,
    source_fingerprint  TEXT,
    policy_version      TEXT,
    text                TEXT,
    source_count        INTEGER,
    through_sequence    INTEGER,
    rejected_source_ids TEXT              -- JSON array, rejected results only
);
CREATE INDEX summaries_by_conversation ON summaries (conversation_id, pk);
-- The evidence index: summary -> sources by position, turn -> citing summaries by turn_id.
CREATE TABLE summary_sources (
    summary_pk   INTEGER NOT NULL REFERENCES summaries(pk),
    position     INTEGER NOT NULL,
    turn_id      TEXT NOT NULL,
    turn_digest  BLOB NOT NULL,
    PRIMARY KEY (summary_pk, position)
) WITHOUT ROWID;
CREATE INDEX summary_sources_by_turn ON summary_sources (turn_id);
-- Live non-source turns below a summary's through_sequence when it was committed, so
-- context() never has to scan the summarised rows to find them.
CREATE TABLE summary_kept (
    summary_pk  INTEGER NOT NULL REFERENCES summaries(pk),
    turn_pk     INTEGER NOT NULL REFERENCES turns(pk),
    PRIMARY KEY (summary_pk, turn_pk)
) WITHOUT ROWID;
CREATE TABLE history_boundaries (
    pk                INTEGER PRIMARY KEY,
    conversation_id   TEXT NOT NULL,
    through_sequence  INTEGER NOT NULL,
    reason            TEXT NOT NULL,
    purged_at         TEXT NOT NULL
);
CREATE INDEX history_boundaries_by_conversation ON history_boundaries (conversation_id, pk);
"""

# v1.1, the agent loop (SPEC §15): rolling summaries name their parent; a plan keeps what it
# may compact (the summary it extends plus the IDs it adds) and the roles it preserved;
# pruned versions leave a count; groups are looked up per conversation (group-split).
_V2 = """
ALTER TABLE summaries ADD COLUMN parent_id TEXT;
ALTER TABLE plans ADD COLUMN base_summary_pk INTEGER;
ALTER TABLE plans ADD COLUMN compacted_ids TEXT;
ALTER TABLE plans ADD COLUMN preserve_roles TEXT NOT NULL DEFAULT '[]';
ALTER TABLE plans ADD COLUMN ended INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN pruned_count INTEGER NOT NULL DEFAULT 0;
CREATE INDEX turns_by_group ON turns (conversation_id, grp) WHERE grp IS NOT NULL;
CREATE INDEX plans_by_conversation ON plans (conversation_id, pk);
"""

# v1.1 retention (SPEC §15.5): when each turn was written, so `retain_days` can tell its
# age (NULL for turns written before: their age is unknown and they are never aged out).
_V3 = """
ALTER TABLE turns ADD COLUMN created_at TEXT;
"""

# v1.1 shared source index (SPEC §15.8 cost): a rolling version appends its new sources to
# its parent's *source run* instead of copying the parent's rows, so a compaction writes
# O(new sources) rows. A version uses the first `source_count` rows of its run; a rebase
# starts a new run. AUTOINCREMENT: a run's pk is never reused, even after the newest run is
# deleted, so rows of a deleted run can never be read as another's. Existing versions each
# get their own run (pk = summary pk) holding their rows. `summary_sources` becomes a view
# with the old columns: every version's sources, as before.
_V4 = """
CREATE TABLE source_runs (
    pk               INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id  TEXT NOT NULL
);
CREATE INDEX source_runs_by_conversation ON source_runs (conversation_id);
CREATE TABLE run_sources (
    run_pk       INTEGER NOT NULL REFERENCES source_runs(pk),
    position     INTEGER NOT NULL,
    turn_id      TEXT NOT NULL,
    turn_digest  BLOB NOT NULL,
    PRIMARY KEY (run_pk, position)
) WITHOUT ROWID;
CREATE INDEX run_sources_by_turn ON run_sources (turn_id);
ALTER TABLE summaries ADD COLUMN source_run INTEGER REFERENCES source_runs(pk);
INSERT INTO source_runs (pk, conversation_id)
    SELECT pk, conversation_id FROM summaries
    WHERE status IN ('current', 'superseded', 'stale')
        OR pk IN (SELECT summary_pk FROM summary_sources);
UPDATE summaries SET source_run = pk WHERE pk IN (SELECT pk FROM source_runs);
INSERT INTO run_sources (run_pk, position, turn_id, turn_digest)
    SELECT summary_pk, position, turn_id, turn_digest FROM summary_sources;
DROP TABLE summary_sources;
CREATE INDEX summaries_by_run ON summaries (source_run, source_count);
CREATE VIEW summary_sources (summary_pk, position, turn_id, turn_digest) AS
    SELECT s.pk, r.position, r.turn_id, r.turn_digest
    FROM summaries AS s JOIN run_sources AS r
        ON r.run_pk = s.source_run AND r.position < s.source_count;
"""

# v1.2 recall (SPEC §16, §17.9): the search index's state. The FTS5 table itself
# (`search_fts`) is created by `_search_index.build` after the migrations, only where SQLite
# has FTS5 (the store opens without it); the build then indexes the existing turns in
# batches that commit as they go.
_V5 = """
CREATE TABLE search_state (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    index_version   INTEGER NOT NULL,   -- the segmenter's INDEX_VERSION; 0: not kept here
    built_through   INTEGER NOT NULL,   -- turns with pk <= this are indexed
    complete        INTEGER NOT NULL    -- 1: every turn is indexed (the write paths keep it)
);
-- Passage bounds of an indexed body that is not one passage from start to end: int64
-- (start, end) pairs by slot, in code points (numbers only, no text).
CREATE TABLE search_offsets (
    turn_pk  INTEGER PRIMARY KEY,
    bounds   BLOB NOT NULL
);
"""

#: (version, name, DDL) in ascending order; append new migrations, never edit old ones.
MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (1, "initial", _V1),
    (2, "agent-loop", _V2),
    (3, "retention", _V3),
    (4, "source-runs", _V4),
    (5, "search-index", _V5),
)

#: Tool results by the call they answer (SPEC §17.2): a call appended after results of its
#: ID finds them with one probe (`_call_pairs.results_before`), so the common append, a call
#: with a fresh ID, stays O(log n). Not a migration: every writing open creates it if it is
#: missing (one statement; older files get it at their next writing open), and nothing
#: needs it to be there (without it that probe reads the conversation's tool turns), so a
#: file with it stays a v5 file every reader and writer of v5 opens. `json_valid` keeps a
#: damaged meta out of the index (it would make `json_extract` fail the write).
ANSWERS_INDEX = (
    "CREATE INDEX IF NOT EXISTS turns_by_answer ON turns"
    " (conversation_id, json_extract(meta, '$.tool_call_id'), sequence)"
    " WHERE role = 'tool' AND json_valid(meta)"
)

#: The call ID an assistant turn making exactly one call is indexed by (`CALLS_INDEX`); NULL
#: for a turn making several (or a `tool_calls` that is no list of one call).
CALL_KEY = (
    "CASE WHEN json_array_length(json_extract(meta, '$.tool_calls')) = 1"
    " THEN json_extract(json_extract(meta, '$.tool_calls'), '$[0].id') END"
)

#: Assistant turns by the call they make (SPEC §17.2), `CALL_KEY`: the nearest call of an ID
#: before or after a sequence is one probe (`_call_index.nearest_call`) plus, for the turns
#: making several calls (key NULL), a read of the nearest few and then the indexes by
#: position below, where a walk of every assistant turn read the ledger to its start for an
#: ID made once (an edit taking a call away, a result whose call is gone). Created at every
#: writing open when missing, not a migration, and nothing needs it (without it the same
#: queries read the assistant turns), exactly as `ANSWERS_INDEX`; the `json_valid` terms
#: keep a damaged meta out of it.
CALLS_INDEX = (
    "CREATE INDEX IF NOT EXISTS turns_by_call ON turns"
    f" (conversation_id, {CALL_KEY}, sequence)"
    " WHERE role = 'assistant' AND json_valid(meta)"
    " AND json_valid(json_extract(meta, '$.tool_calls'))"
)


def _recall_shape(body: str) -> str:
    """SQL: whether the text `body` is JSON with a non-empty `hits` array (the shape of a
    recall result that can quote a turn, which `_recall_results` looks in for an erased
    turn's ID): one expression that never fails (the JSON is read only when valid) and
    parses only a body holding `hits` (or a `\\u` escape, which may spell it)."""
    return (
        f"json_array_length(CASE WHEN instr({body}, 'hits') > 0 OR instr({body}, '\\u') > 0"
        f" THEN CASE WHEN json_valid({body}) THEN {body} END END, '$.hits') > 0"
    )


#: `_recall_shape` of the `body` column, the condition of the two indexes below.
RECALL_SHAPE = _recall_shape("body")

#: Tool turns shaped as recall results, by conversation (SPEC §16.5, §17.7): an erasure finds
#: the results that returned the erased turn among them (`_recall_results`), where it read
#: every turn of the conversation and parsed every tool body. Created at every writing open
#: when missing, not a migration, and nothing needs it, exactly as `ANSWERS_INDEX`.
RECALL_TURNS_INDEX = (
    "CREATE INDEX IF NOT EXISTS turns_by_recall_shape ON turns (conversation_id)"
    f" WHERE role = 'tool' AND {RECALL_SHAPE}"
)

#: Earlier versions shaped as recall results (a result edited since it returned a turn still
#: holds the quote in its history): few in any file, so an erasure walks them all.
RECALL_HISTORY_INDEX = (
    "CREATE INDEX IF NOT EXISTS turn_history_by_recall_shape ON turn_history (turn_pk)"
    f" WHERE role = 'tool' AND {RECALL_SHAPE}"
)

#: The calls of a turn making several (2 to `INDEXED_CALLS`) that `CALLS_INDEX` does not key,
#: each indexed by its position: `CALL_AT[k]` is the ID of its call at position k.
INDEXED_CALLS = 8
_TOOL_CALLS = "json_extract(meta, '$.tool_calls')"
#: The condition of `CALLS_INDEX` and of the indexes below, `meta` holding a `tool_calls`.
CALLS_ARE = f"role = 'assistant' AND json_valid(meta) AND json_valid({_TOOL_CALLS})"
CALL_AT = tuple(f"json_extract({_TOOL_CALLS}, '$[{k}].id')" for k in range(INDEXED_CALLS))
#: The condition of `calls_at_index(k)`: a turn making several calls, more than k.
CALLS_BEYOND = tuple(
    f"{CALLS_ARE} AND json_array_length({_TOOL_CALLS}) > {max(k, 1)}"
    for k in range(INDEXED_CALLS + 1)
)


def calls_at_index(k: int) -> tuple[str, str]:
    """(name, DDL) of the index of the turns making several calls by their call at position
    k (SPEC §17.2): with `CALLS_INDEX`, the nearest call of an ID is one probe of each
    (`_call_index.nearest_call`), turns making several calls included. Created at every
    writing open when missing, not a migration, and nothing needs them, as `CALLS_INDEX`."""
    return (
        f"turns_by_call_at_{k}",
        f"CREATE INDEX IF NOT EXISTS turns_by_call_at_{k} ON turns"
        f" (conversation_id, {CALL_AT[k]}, sequence) WHERE {CALLS_BEYOND[k]}",
    )


#: The turns making more than `INDEXED_CALLS` calls, walked for an ID at a later position.
MANY_CALLS_INDEX = (
    "CREATE INDEX IF NOT EXISTS turns_by_many_calls ON turns (conversation_id, sequence)"
    f" WHERE {CALLS_BEYOND[INDEXED_CALLS]}"
)

#: The indexes every writing open creates when missing: (name, DDL).
ADDED_INDEXES = (
    ("turns_by_answer", ANSWERS_INDEX),
    ("turns_by_call", CALLS_INDEX),
    *(calls_at_index(k) for k in range(INDEXED_CALLS)),
    ("turns_by_many_calls", MANY_CALLS_INDEX),
    ("turns_by_recall_shape", RECALL_TURNS_INDEX),
    ("turn_history_by_recall_shape", RECALL_HISTORY_INDEX),
)


#: The oldest schema a read-only open serves (everything but search: SPEC §17.9).
READABLE_VERSION = 4

SCHEMA_VERSION = MIGRATIONS[-1][0]
