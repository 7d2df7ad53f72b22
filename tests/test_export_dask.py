"""Columnar export (`ledgerfold export --parquet`) and distributed revalidation on a real
`dask.distributed.LocalCluster`, compared with the single-machine `revalidate_database` on
the real transcripts of shared/data, one summarised body tampered behind the store's back."""

from __future__ import annotations

import importlib
import json
import os
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli_support import run
from ledgerfold import (
    InvalidInput,
    SQLiteStore,
    StoreError,
)
from ledgerfold.export import MANIFEST, TABLES, _part_name, export_parquet
from ledgerfold.revalidate import revalidate_database

pq = importlib.import_module("pyarrow.parquet")
dask = importlib.import_module("dask")
distributed = importlib.import_module("dask.distributed")
ldask = importlib.import_module("ledgerfold.dask")

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from ledgers import import_and_compact  # noqa: E402

POLICY = "v1"
#: Small parts, so the 244 conversations spread over several partitions and both workers.
TURNS_PER_FILE = 1_500
#: The fields of `ledgerfold revalidate --json` that must be identical (not timing/workers).
SAME = ("conversations", "summaries_checked", "current", "stale", "turns_hashed", "bytes_hashed")


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every real transcript imported and compacted; one conversation purged (its summary
    stale in the store, its first rows no longer live); then one summarised body of another
    conversation tampered with raw SQL, so only a deep revalidation can see it."""
    path = tmp_path_factory.mktemp("export-dask") / "ledger.db"
    import_and_compact(path, POLICY)
    with SQLiteStore(path) as store:
        summarised = [
            (cid, summary.id)
            for cid in store.conversation_ids()
            if (summary := store.current_summary(cid)) is not None
        ]
        purged, _ = summarised[0]
        store.purge_through(purged, 2, "retention")
    conversation, summary = summarised[len(summarised) // 2]
    with sqlite3.connect(path) as conn:
        (turn_id,) = conn.execute(
            "SELECT turn_id FROM summary_sources s JOIN summaries v ON v.pk = s.summary_pk"
            " WHERE v.id = ? ORDER BY position LIMIT 1",
            (summary,),
        ).fetchone()
        changed = conn.execute(
            "UPDATE turns SET body = body || ' (tampered)' WHERE conversation_id = ? AND id = ?",
            (conversation, turn_id),
        ).rowcount
        assert changed == 1
    conn.close()
    return {"db": path, "tampered": (conversation, summary), "purged": purged}


@pytest.fixture(scope="module")
def exported(ledger: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export-dask") / "parquet"
    report = export_parquet(ledger["db"], out, turns_per_file=TURNS_PER_FILE)
    assert report.parts >= 4
    return out


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    cluster = distributed.LocalCluster(
        n_workers=2,
        processes=True,
        threads_per_worker=1,
        host="127.0.0.1",
        dashboard_address=None,
    )
    with cluster, distributed.Client(cluster) as connected:
        connected.wait_for_workers(2, timeout=60)
        yield connected


def _db_rows(path: Path, query: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def _manifest(out: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    return manifest


# ------------------------------------------------------------------ the cluster


def test_cluster_agrees_with_the_single_machine_command(
    ledger: dict[str, Any], exported: Path, client: Any
) -> None:
    expected = revalidate_database(ledger["db"], mark_stale=False).as_json()
    frame, aggregate = ldask.revalidate_parquet(exported, client=client)

    assert {key: aggregate[key] for key in SAME} == {key: expected[key] for key in SAME}
    assert aggregate["stale_summaries"] == expected["stale_summaries"]
    conversation, summary = ledger["tampered"]
    assert expected["stale_summaries"] == [
        {
            "conversation": conversation,
            "summary": summary,
            "reason": "source-modified",
            "turn": None,
        }
    ]
    assert aggregate["workers"] == 2
    assert frame.npartitions == aggregate["partitions"] == len(_manifest(exported)["parts"])

    # The partitions really ran on both worker processes.
    holders = {address for addresses in client.who_has(frame).values() for address in addresses}
    assert len(holders) == 2

    rows = frame.compute()
    assert list(rows.columns) == list(ldask.RESULT_COLUMNS)
    assert len(rows) == expected["summaries_checked"]
    assert rows["conversation"].is_unique and rows["summary"].is_unique
    stale = rows[rows["status"] == "stale"]
    assert list(zip(stale["conversation"], stale["summary"], stale["reason"], strict=True)) == [
        (conversation, summary, "source-modified")
    ]
    current = rows[rows["status"] == "current"]
    assert current["reason"].isna().all() and current["turn"].isna().all()
    assert int(rows["turns_hashed"].sum()) == expected["turns_hashed"]
    assert int(rows["bytes_hashed"].sum()) == expected["bytes_hashed"]
    # The purged conversation's summary is sealed (SPEC §15.5): both paths check its purged
    # sources by their stored digests and find it current.
    assert ledger["purged"] in set(current["conversation"])


def test_a_part_checked_on_its_own_matches_its_partition(exported: Path, client: Any) -> None:
    frame, _ = ldask.revalidate_parquet(exported, client=client)
    for index in (0, frame.npartitions - 1):
        alone = ldask.check_part(index, path=str(exported))
        assert alone.equals(frame.get_partition(index).compute().reset_index(drop=True))


def test_default_scheduler_without_a_client(ledger: dict[str, Any], exported: Path) -> None:
    expected = revalidate_database(ledger["db"], mark_stale=False).as_json()
    # The module's cluster client is the default while it lives: force the local threads.
    with dask.config.set(scheduler="threads"):
        _, aggregate = ldask.revalidate_parquet(str(exported), threads=2)
    assert aggregate["workers"] == 1
    assert {key: aggregate[key] for key in SAME} == {key: expected[key] for key in SAME}
    assert aggregate["stale_summaries"] == expected["stale_summaries"]


# ------------------------------------------------------------------ the export


def test_every_conversation_is_in_exactly_one_part(ledger: dict[str, Any], exported: Path) -> None:
    manifest = _manifest(exported)
    parts = manifest["parts"]
    seen: dict[str, dict[str, int]] = {table: {} for table in TABLES}
    for part in parts:
        index = part["index"]
        ids_in_part: dict[str, set[str]] = {}
        for table in TABLES:
            data = pq.read_table(exported / table / _part_name(index))
            assert data.num_rows == part[table]
            column = "id" if table == "conversations" else "conversation_id"
            ids = data.column(column).to_pylist()
            ids_in_part[table] = set(ids)
            for conversation_id in set(ids):
                assert conversation_id not in seen[table], (table, conversation_id)
                seen[table][conversation_id] = index
        # Part N of every table holds the same conversations.
        assert ids_in_part["turns"] == ids_in_part["conversations"]
        assert ids_in_part["summary_sources"] <= ids_in_part["summaries"]
        assert ids_in_part["summaries"] <= ids_in_part["conversations"]
        assert part["turns"] <= TURNS_PER_FILE or part["conversations"] == 1
    db = ledger["db"]
    counts = {table: _db_rows(db, f"SELECT COUNT(*) FROM {table}")[0][0] for table in TABLES}
    assert manifest["counts"] == counts
    assert len(seen["conversations"]) == counts["conversations"] == 244


def test_rows_are_exported_exactly(ledger: dict[str, Any], exported: Path) -> None:
    turns = pq.read_table(exported / "turns").to_pylist()
    stored = _db_rows(
        ledger["db"],
        "SELECT conversation_id, id, sequence, role, CAST(body AS BLOB), protected,"
        " protection_reason, grp, meta, digest, state FROM turns"
        " ORDER BY conversation_id, sequence",
    )
    assert [
        (
            t["conversation_id"],
            t["id"],
            t["sequence"],
            t["role"],
            t["body"],
            int(t["protected"]),
            t["protection_reason"],
            t["group"],
            t["meta"],
            t["digest"],
            t["state"],
        )
        for t in turns
    ] == stored
    assert {t["state"] for t in turns} == {0, 2}  # the purge left non-live rows
    summaries = pq.read_table(exported / "summaries").to_pylist()
    statuses = {s["id"]: (s["status"], s["current"]) for s in summaries}
    _, summary = ledger["tampered"]
    assert statuses[summary] == ("current", True)  # the store has not noticed the tampering
    # The purge sealed the purged conversation's summary (SPEC §15.5): still current.
    purged = [s for s in summaries if s["conversation_id"] == ledger["purged"]]
    assert [(s["status"], s["reason"], s["current"]) for s in purged] == [("current", None, True)]
    sources = pq.read_table(exported / "summary_sources").to_pylist()
    assert len(sources) == _db_rows(ledger["db"], "SELECT COUNT(*) FROM summary_sources")[0][0]


def test_export_of_an_empty_database(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    SQLiteStore(db).close()
    report = export_parquet(db, tmp_path / "out")
    assert (report.parts, report.conversations, report.turns, report.summaries) == (1, 0, 0, 0)
    for table in TABLES:
        assert pq.read_table(tmp_path / "out" / table / _part_name(0)).num_rows == 0
    frame, aggregate = ldask.revalidate_parquet(tmp_path / "out")
    expected = revalidate_database(db, mark_stale=False).as_json()
    assert {key: aggregate[key] for key in SAME} == {key: expected[key] for key in SAME}
    assert aggregate["stale_summaries"] == [] and len(frame.compute()) == 0


def test_export_cli_json(ledger: dict[str, Any], tmp_path: Path) -> None:
    result = run("export", str(ledger["db"]), "--parquet", str(tmp_path / "p"), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["conversations"] == 244 and report["parts"] == 1
    assert report["turns"] == _manifest(tmp_path / "p")["counts"]["turns"]
    # The export is written beside the target and renamed: nothing else is left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p"]


# ------------------------------------------------------------------ bad arguments


def test_export_refuses_bad_arguments(ledger: dict[str, Any], tmp_path: Path) -> None:
    db = ledger["db"]
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    cases: list[tuple[Any, Any, dict[str, Any], str, str]] = [
        (tmp_path / "missing.db", tmp_path / "a", {}, "db_path", "not-allowed"),
        (tmp_path, tmp_path / "a", {}, "db_path", "not-allowed"),
        (db, full, {}, "out_dir", "not-allowed"),
        (db, full / "x", {}, "out_dir", "not-allowed"),
        (db, tmp_path / "no" / "such", {}, "out_dir", "not-allowed"),
        (db, tmp_path / "a", {"turns_per_file": 0}, "turns_per_file", "out-of-range"),
        (db, tmp_path / "a", {"turns_per_file": True}, "turns_per_file", "wrong-type"),
        (42, tmp_path / "a", {}, "db_path", "wrong-type"),
        (db, None, {}, "out_dir", "wrong-type"),
    ]
    for db_path, out_dir, options, field, problem in cases:
        with pytest.raises(InvalidInput) as caught:
            export_parquet(db_path, out_dir, **options)
        assert (caught.value.field, caught.value.problem) == (field, problem), db_path
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    with pytest.raises(StoreError):
        export_parquet(foreign, tmp_path / "a")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign.db", "full"]


# ------------------------------------------------------------------ staging


def _empty_db(tmp_path: Path) -> Path:
    """A ledgerfold database in a directory of its own (its -wal/-shm files stay there)."""
    db = tmp_path / "db" / "ledger.db"
    db.parent.mkdir()
    SQLiteStore(db).close()
    return db


def test_export_never_removes_a_directory_it_did_not_create(tmp_path: Path) -> None:
    # The old staging name, `.<name>.partial-<pid>`, was removed with everything in it.
    db = _empty_db(tmp_path)
    theirs = tmp_path / f".out.partial-{os.getpid()}"
    theirs.mkdir()
    (theirs / "keep.txt").write_text("someone else's file", encoding="utf-8")
    export_parquet(db, tmp_path / "out")
    assert (theirs / "keep.txt").read_text(encoding="utf-8") == "someone else's file"
    assert sorted(p.name for p in tmp_path.iterdir()) == [theirs.name, "db", "out"]
    assert (tmp_path / "out" / MANIFEST).is_file()


def test_export_never_follows_a_symlink_at_the_staging_name(tmp_path: Path) -> None:
    # A symlink of the old staging name was followed: files written into its target, then
    # the link renamed to the output.
    db = _empty_db(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / f".out.partial-{os.getpid()}"
    link.symlink_to(elsewhere)
    export_parquet(db, tmp_path / "out")
    assert list(elsewhere.iterdir()) == []
    assert link.is_symlink() and link.resolve() == elsewhere.resolve()
    out = tmp_path / "out"
    assert out.is_dir() and not out.is_symlink() and (out / MANIFEST).is_file()


def test_export_directory_has_the_usual_modes(tmp_path: Path) -> None:
    # Staged inside a private `mkdtemp` directory (0700), but the export itself is made
    # like any new directory: its mode follows the umask.
    db = _empty_db(tmp_path)
    umask = os.umask(0o022)
    try:
        export_parquet(db, tmp_path / "out")
    finally:
        os.umask(umask)
    for directory in [tmp_path / "out", *(tmp_path / "out" / table for table in TABLES)]:
        assert directory.stat().st_mode & 0o777 == 0o755, directory


def test_export_failure_removes_only_its_own_staging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _empty_db(tmp_path)
    theirs = tmp_path / f".out.partial-{os.getpid()}"
    theirs.mkdir()

    def fail(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq, "write_table", fail)
    with pytest.raises(OSError, match="No space left"):
        export_parquet(db, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == [theirs.name, "db"]


def _out_dot(tmp_path: Path) -> str:
    return "."


def _out_link_to_empty_dir(tmp_path: Path) -> str:
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    return str(tmp_path / "link")


def _out_dangling_link(tmp_path: Path) -> str:
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    return str(tmp_path / "link")


@pytest.mark.parametrize(
    "out_dir",
    [_out_dot, _out_link_to_empty_dir, _out_dangling_link],
    ids=["dot", "link-to-empty-dir", "dangling-link"],
)
def test_export_to_a_path_it_cannot_rename_into_is_a_clear_error(
    out_dir: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: "Invalid argument" for `.`, a raw NotADirectoryError for the links.
    db = _empty_db(tmp_path)
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "empty")
    target = out_dir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(InvalidInput) as caught:
        export_parquet(db, target)
    assert (caught.value.field, caught.value.problem) == ("out_dir", "not-allowed")
    result = run("export", str(db), "--parquet", target)
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("ledgerfold: error: --parquet: "), line
    assert "Invalid argument" not in line and "Not a directory" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert list((tmp_path / "empty").iterdir()) == []


# ------------------------------------------------------------------ damaged manifests


@pytest.fixture
def small_export(tmp_path: Path) -> Path:
    db = tmp_path / "ledger.db"
    with SQLiteStore(db) as store:
        for conversation in ("a", "b", "c"):
            store.append_many(conversation, [{"role": "user", "body": "x"}] * 3)
    out = tmp_path / "export"
    export_parquet(db, out, turns_per_file=3)
    assert len(_manifest(out)["parts"]) == 3
    return out


def _deep(manifest: dict[str, Any]) -> str:
    return json.dumps(manifest)[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}"


def _edit(change: Any) -> Any:
    def edit(manifest: dict[str, Any]) -> str:
        change(manifest)
        return json.dumps(manifest)

    return edit


DAMAGED_MANIFESTS = [
    ("nested-too-deeply", _deep, "nested too deeply"),
    ("parts-not-a-list", _edit(lambda m: m.update(parts=5)), "parts"),
    ("parts-empty", _edit(lambda m: m.update(parts=[])), "parts"),
    ("part-not-an-object", _edit(lambda m: m["parts"].__setitem__(1, "x")), r"parts\[1\]"),
    ("part-index-wrong", _edit(lambda m: m["parts"][1].update(index=7)), r"parts\[1\]\.index"),
    ("part-index-bool", _edit(lambda m: m["parts"][1].update(index=True)), r"parts\[1\]\.index"),
    ("part-file-wrong", _edit(lambda m: m["parts"][0].update(file="../x")), r"parts\[0\]\.file"),
    ("part-count-str", _edit(lambda m: m["parts"][0].update(turns="3")), r"parts\[0\]\.turns"),
    ("counts-not-an-object", _edit(lambda m: m.update(counts=[])), "counts"),
    ("count-str", _edit(lambda m: m["counts"].update(conversations="x")), "counts.conversations"),
    ("count-negative", _edit(lambda m: m["counts"].update(turns=-1)), "counts.turns"),
    ("counts-not-the-total", _edit(lambda m: m["counts"].update(turns=8)), "counts.turns"),
    (
        "part-missing",
        _edit(
            lambda m: m["parts"].append(
                {**m["parts"][2], "index": 3, "file": _part_name(3), "conversations": 0, "turns": 0}
            )
        ),
        "part-00003.parquet",
    ),
]


@pytest.mark.parametrize(
    ("damage", "named"),
    [case[1:] for case in DAMAGED_MANIFESTS],
    ids=[case[0] for case in DAMAGED_MANIFESTS],
)
def test_a_damaged_manifest_is_invalid_input(small_export: Path, damage: Any, named: str) -> None:
    # Before: raw RecursionError, TypeError, ValueError or FileNotFoundError (in a worker).
    (small_export / MANIFEST).write_text(damage(_manifest(small_export)), encoding="utf-8")
    with pytest.raises(InvalidInput, match=named) as caught:
        ldask.revalidate_parquet(small_export)
    assert (caught.value.field, caught.value.problem) == ("path", "not-allowed")
    with pytest.raises(InvalidInput, match=named):
        ldask.read_manifest(small_export)


def test_a_missing_part_file_is_invalid_input(small_export: Path) -> None:
    (small_export / "summary_sources" / _part_name(1)).unlink()
    with pytest.raises(InvalidInput, match=r"summary_sources/part-00001\.parquet"):
        ldask.revalidate_parquet(small_export)


def test_the_small_export_revalidates(small_export: Path) -> None:
    _, aggregate = ldask.revalidate_parquet(small_export)
    assert (aggregate["conversations"], aggregate["partitions"]) == (3, 3)


def test_revalidate_parquet_refuses_what_is_not_an_export(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="not a ledgerfold Parquet export"):
        ldask.revalidate_parquet(tmp_path)
    (tmp_path / MANIFEST).write_text('{"format": "ledgerfold-parquet", "format_version": 99}')
    with pytest.raises(InvalidInput, match="version 99") as caught:
        ldask.revalidate_parquet(tmp_path)
    assert caught.value.problem == "unknown-value"
    (tmp_path / MANIFEST).write_text("{")
    with pytest.raises(InvalidInput, match="not valid JSON"):
        ldask.revalidate_parquet(tmp_path)
    with pytest.raises(InvalidInput) as caught:
        ldask.revalidate_parquet(tmp_path, threads=0)
    assert caught.value.field == "threads"
    with pytest.raises(InvalidInput):
        ldask.revalidate_parquet(3)


@pytest.mark.parametrize(
    "args",
    [
        ["export", "{base}/missing.db", "--parquet", "{base}/out"],
        ["export", "{base}", "--parquet", "{base}/out"],
        ["export", "{db}", "--parquet", "{base}"],  # not empty
        ["export", "{db}", "--parquet", "{base}/no/such"],
        ["export", "{db}", "--parquet", "{db}"],
        ["export", "{db}", "--parquet", "{base}/out", "--turns-per-file", "0"],
        ["export", "{db}"],
        ["export", "{foreign}", "--parquet", "{base}/out"],
    ],
    ids=[
        "missing-db",
        "dir-as-db",
        "non-empty",
        "no-parent",
        "file-as-dir",
        "zero",
        "no-dir",
        "foreign",
    ],
)
def test_export_cli_user_errors(args: list[str], ledger: dict[str, Any], tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    values = {"base": str(tmp_path), "db": str(ledger["db"]), "foreign": str(foreign)}
    result = run(*(arg.format(**values) for arg in args))
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ledgerfold: error: "), result.stderr
    assert not (tmp_path / "out").exists()


def test_a_utf16_database_exports_its_bodies_as_utf8(tmp_path: Path) -> None:
    """A file whose text is stored as UTF-16 (`PRAGMA encoding` set by another tool) exports
    its bodies as UTF-8 bytes, as the format says, and the cluster's check of the export
    agrees with the single-machine command (the UTF-16 bytes were exported: every summary
    was found stale)."""
    path = tmp_path / "utf16.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA encoding = 'UTF-16le'")
    conn.execute("CREATE TABLE probe (x)")  # the encoding is fixed by the first table
    conn.execute("DROP TABLE probe")
    conn.commit()
    conn.close()
    import_and_compact(path, POLICY)
    with sqlite3.connect(path) as conn:  # one body changed behind the store's back
        conn.execute(
            "UPDATE turns SET body = body || 'é' WHERE pk = (SELECT t.pk FROM summary_sources"
            " AS ss JOIN summaries AS s ON s.pk = ss.summary_pk AND s.status = 'current'"
            " JOIN turns AS t ON t.conversation_id = s.conversation_id AND t.id = ss.turn_id"
            " LIMIT 1)"
        )
    conn.close()
    out = tmp_path / "parquet"
    export_parquet(path, out, turns_per_file=TURNS_PER_FILE)
    bodies = [t["body"] for t in pq.read_table(out / "turns").to_pylist()]
    conn = sqlite3.connect(path)
    try:
        stored = [
            row[0].encode("utf-8")
            for row in conn.execute("SELECT body FROM turns ORDER BY conversation_id, sequence")
        ]
    finally:
        conn.close()
    # (Compared by count: an assertion's diff would print the bodies.)
    assert len(bodies) == len(stored) > 0
    assert sum(found != body for found, body in zip(bodies, stored, strict=True)) == 0
    _, aggregate = ldask.revalidate_parquet(out)
    expected = revalidate_database(path, mark_stale=False).as_json()
    assert {key: aggregate[key] for key in SAME} == {key: expected[key] for key in SAME}
    assert aggregate["stale"] == 1
