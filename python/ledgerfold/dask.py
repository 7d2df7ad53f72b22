"""Distributed batch revalidation of a Parquet export on Dask (the `dask` extra).

`revalidate_parquet(path, client=...)` turns an export of `ledgerfold export --parquet`
(`ledgerfold.export`) into a Dask dataframe with one partition per part. Each partition
reads its part's four files with pyarrow, keeps the live turns and each conversation's
current summary, and checks them with the same native batch revalidation as
`ledgerfold revalidate` (every cited body re-hashed; stored digests never read). Parts hold
whole conversations, so partitions are independent: Dask schedules them over whatever
cluster `client` is connected to (a `LocalCluster`, or `Client("tcp://scheduler:8786")`);
the workers need this package and read access to `path` (a shared directory, or any URI
pyarrow's filesystems understand, e.g. ``s3://bucket/export``).

The aggregate equals `revalidate_database(db, mark_stale=False).as_json()` on the exported
database in every field but `seconds` and `workers`. Revalidating an export marks nothing
stale: the export is a copy; apply the verdicts to the source store if it is yours.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Sequence
from typing import Any

from ledgerfold import _native, _validate
from ledgerfold import _revalidate_runs as revalidate_runs
from ledgerfold import _sealed as sealed
from ledgerfold._errors import InvalidInput
from ledgerfold._optional import require
from ledgerfold._revalidate_runs import RECORD_REASONS
from ledgerfold.export import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    NOT_UTF8,
    STORED_AS,
    TABLES,
    _part_name,
)
from ledgerfold.revalidate import MAX_THREADS
from ledgerfold.store._batch_reads import NotUtf8
from ledgerfold.store._schema import TURN_LIVE, TURN_PURGED

__all__ = ["RESULT_COLUMNS", "check_part", "read_manifest", "revalidate_parquet"]

#: Columns of the result frame: one row per current summary checked.
RESULT_COLUMNS = (
    "conversation",
    "summary",
    "status",  # 'current' | 'stale'
    # None when current, else the check's reason (e.g. 'source-modified'), or why the summary
    # was not checked against its sources ('damaged-record', 'conversation-mismatch')
    "reason",
    "turn",  # the offending source where the check names one
    "turns_hashed",  # distinct cited live turns re-hashed for this summary
    "bytes_hashed",  # their body bytes
)
_STRINGS = ("conversation", "summary", "status", "reason", "turn")

_TURN_COLUMNS = [
    "conversation_id",
    "id",
    "sequence",
    "role",
    "body",
    "protected",
    "protection_reason",
    "group",
    "meta",
    "state",
]


def _require(module: str) -> Any:
    return require(
        module,
        needed_by="ledgerfold.dask",
        install="'ledgerfold[dask]' (dask[dataframe,distributed] and pyarrow)",
    )


def _filesystem(path: str) -> tuple[Any, str]:
    """A pyarrow filesystem and the base path inside it: local paths are made absolute
    (workers resolve them as given), URIs go to `pyarrow.fs.FileSystem.from_uri`."""
    fs = _require("pyarrow.fs")
    if "://" in path:
        filesystem, base = fs.FileSystem.from_uri(path)
        return filesystem, base.rstrip("/")
    return fs.LocalFileSystem(), os.path.abspath(path)


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The `_manifest.json` of the export at `path`; `InvalidInput` when there is none or
    it is not a ledgerfold export of a format version this release reads."""
    if isinstance(path, bool) or not isinstance(path, str | os.PathLike):
        raise InvalidInput(
            f"path: must be str or os.PathLike, got {type(path).__name__}",
            field="path",
            problem="wrong-type",
        )
    location = os.fspath(path)
    filesystem, base = _filesystem(location)
    try:
        with filesystem.open_input_stream(f"{base}/{MANIFEST}") as stream:
            manifest = json.loads(stream.read().decode("utf-8"))
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise InvalidInput(
            f"path: {location} is not a ledgerfold Parquet export (no {MANIFEST})",
            field="path",
            problem="not-allowed",
        ) from None
    except (ValueError, UnicodeDecodeError) as error:
        raise InvalidInput(
            f"path: {location}/{MANIFEST} is not valid JSON ({type(error).__name__})",
            field="path",
            problem="not-allowed",
        ) from None
    except RecursionError:
        raise InvalidInput(
            f"path: {location}/{MANIFEST} is not valid JSON (nested too deeply)",
            field="path",
            problem="not-allowed",
        ) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise InvalidInput(
            f"path: {location} is not a ledgerfold Parquet export",
            field="path",
            problem="not-allowed",
        )
    if manifest.get("format_version") != FORMAT_VERSION:
        raise InvalidInput(
            f"path: export format version {manifest.get('format_version')!r} is not supported"
            f" (this release reads version {FORMAT_VERSION}: export the database again)",
            field="path",
            problem="unknown-value",
        )
    _check_layout(manifest, location, filesystem, base)
    return manifest


def _bad_manifest(location: str, detail: str) -> InvalidInput:
    # Names the manifest key, never its value (a damaged file may hold anything).
    return InvalidInput(
        f"path: {location}/{MANIFEST}: {detail}", field="path", problem="not-allowed"
    )


def _is_count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _check_layout(manifest: dict[str, Any], location: str, filesystem: Any, base: str) -> None:
    """`counts` and `parts` as `export_parquet` writes them, and every part file present, so
    a damaged or hand-edited manifest is one `InvalidInput` here, not a raw error in a
    worker."""
    counts = manifest.get("counts")
    if not isinstance(counts, dict):
        raise _bad_manifest(location, "counts: must be an object")
    for table in TABLES:
        if not _is_count(counts.get(table)):
            raise _bad_manifest(location, f"counts.{table}: must be a non-negative integer")
    parts = manifest.get("parts")
    if not isinstance(parts, list) or not parts:
        raise _bad_manifest(location, "parts: must be a non-empty list")
    totals = dict.fromkeys(TABLES, 0)
    for index, part in enumerate(parts):
        where = f"parts[{index}]"
        if not isinstance(part, dict):
            raise _bad_manifest(location, f"{where}: must be an object")
        if type(part.get("index")) is not int or part["index"] != index:
            raise _bad_manifest(location, f"{where}.index: must be {index}")
        if part.get("file") != _part_name(index):
            raise _bad_manifest(location, f"{where}.file: must be {_part_name(index)}")
        for table in TABLES:
            if not _is_count(part.get(table)):
                raise _bad_manifest(location, f"{where}.{table}: must be a non-negative integer")
            totals[table] += part[table]
    for table in TABLES:
        if totals[table] != counts[table]:
            raise _bad_manifest(
                location, f"counts.{table}: {counts[table]} is not the parts' total {totals[table]}"
            )
    files = [f"{table}/{_part_name(index)}" for index in range(len(parts)) for table in TABLES]
    fs = _require("pyarrow.fs")
    try:
        infos = filesystem.get_file_info([f"{base}/{name}" for name in files])
    except OSError as error:
        raise InvalidInput(
            f"path: {location}: cannot list the part files ({type(error).__name__})",
            field="path",
            problem="not-allowed",
        ) from None
    for name, info in zip(files, infos, strict=True):
        if info.type != fs.FileType.File:
            raise InvalidInput(
                f"path: {location}: the part file {name} (listed in {MANIFEST}) is missing",
                field="path",
                problem="not-allowed",
            )


def _empty_frame() -> Any:
    pd = _require("pandas")
    return _frame(pd, {name: [] for name in RESULT_COLUMNS})


def _frame(pd: Any, columns: dict[str, Sequence[Any]]) -> Any:
    data = {
        name: pd.Series(
            columns[name], dtype="string" if name in _STRINGS else "int64", name=name
        ).reset_index(drop=True)
        for name in RESULT_COLUMNS
    }
    return pd.DataFrame(data)


def check_part(index: int, *, path: str, threads: int | None = 1, run: str | None = None) -> Any:
    """Revalidate part `index` of the export at `path`: a pandas frame of `RESULT_COLUMNS`,
    one row per current summary, in conversation order. This is the function every Dask
    partition runs; it is usable on its own (one part, one process). `run` is ignored: it
    only makes each `revalidate_parquet` call's task keys unique."""
    del run
    pq = _require("pyarrow.parquet")
    pd = _require("pandas")
    filesystem, base = _filesystem(path)

    def read(
        table: str,
        columns: list[str],
        prepare: Any = None,
        by: str | None = None,
        key: str | None = None,
    ) -> list[list[Any]]:
        """The part's `columns` of `table` (its rows through `prepare`, a filter or a sort
        by column `by`), each a list, a value that is not UTF-8 text (null in its column)
        put back from the bytes the export carried (`not_utf8`) as the command reads it:
        text stored not UTF-8 and a blob as the bytes (what the native check takes as
        damage), a number (`stored_as`) as itself; in column `key`, a conversation key,
        text stored not UTF-8 is `NotUtf8`, never the blob of the same bytes (another key,
        ordered after every text one)."""
        data = pq.read_table(
            f"{base}/{table}/{_part_name(index)}",
            columns=[*columns, *([by] if by else []), NOT_UTF8, STORED_AS],
            filesystem=filesystem,
        )
        if prepare is not None:
            data = prepare(data)
        lists = [data.column(name).to_pylist() for name in columns]
        carried = data.column(NOT_UTF8)
        if carried.null_count < len(carried):
            kinds = data.column(STORED_AS).to_pylist()
            for row, entries in enumerate(carried.to_pylist()):
                storage = dict(kinds[row] or ())
                for name, raw in entries or ():
                    if name in columns:
                        kind = storage.get(name)
                        lists[columns.index(name)][row] = (
                            NotUtf8(raw) if name == key and kind is None else _stored(raw, kind)
                        )
        return lists

    # The current summaries the export found uncheckable, with the command's verdict
    # (`_revalidate_runs.record_verdict`): their conversation's row says why.
    pa = _require("pyarrow")
    try:
        pointers = read(
            "conversations", ["id", "current_summary", "current_summary_verdict"], key="id"
        )
    except pa.ArrowInvalid:  # a column missing: an export of format 1 or 2
        raise InvalidInput(
            f"path: {path}: part {index} lacks columns of format version {FORMAT_VERSION}"
            " (conversations.current_summary_verdict, not_utf8, stored_as: an older export;"
            " export the database again)",
            field="path",
            problem="unknown-value",
        ) from None
    unchecked = [
        (conversation_id, summary_id if isinstance(summary_id, str) else "?", reason, None, 0, 0)
        for conversation_id, summary_id, reason in zip(*pointers, strict=True)
        if reason is not None
    ]
    not_checked = {verdict[0] for verdict in unchecked}
    summaries = read(
        "summaries",
        ["conversation_id", "pk", "id", "status", "source_fingerprint", "current"],
        key="conversation_id",
    )
    current: dict[int, tuple[str, str, str]] = {
        pk: (conversation_id, summary_id, fingerprint)
        for conversation_id, pk, summary_id, status, fingerprint, is_current in zip(
            *summaries, strict=True
        )
        if is_current and status == "current" and conversation_id not in not_checked
    }
    pc = _require("pyarrow.compute")
    summaries_in = [
        (conversation_id, pk, summary_id, fingerprint)
        for pk, (conversation_id, summary_id, fingerprint) in sorted(
            current.items(), key=lambda item: (item[1][0], item[0])
        )
    ]
    rows: list[tuple[Any, ...]] = []
    sources: list[tuple[Any, ...]] = []

    def cited(columns: list[str]) -> list[list[Any]]:
        return read(
            "summary_sources",
            columns,
            lambda t: t.sort_by([("summary_pk", "ascending"), ("position", "ascending")]),
            by="position",
        )

    if summaries_in:
        # Columns to row tuples in C (`zip`), never a Python loop per turn; the native core
        # groups rows by conversation and ignores those without a summary to check.
        live = read(
            "turns",
            _TURN_COLUMNS[:-1],
            lambda t: t.filter(pc.equal(t["state"], TURN_LIVE)),
            by="state",
        )
        rows = list(zip(*live, strict=True))
        sources = list(zip(*cited(["summary_pk", "turn_id"]), strict=True))
    verdicts, turns_hashed, bytes_hashed = (
        _native.revalidate_flat(rows, sources, summaries_in, threads, per_summary=True)
        if summaries_in
        else ([], 0, 0)
    )
    if any(verdict[2] == sealed.SOURCE_MISSING for verdict in verdicts):
        turns = list(zip(*read("turns", _TURN_COLUMNS), strict=True))
        sourced = list(zip(*cited(["summary_pk", "turn_id", "turn_digest"]), strict=True))
        verdicts = _unseal(verdicts, summaries_in, turns, sourced)
    if unchecked:  # one row per conversation: in conversation order with the checked ones
        verdicts = sorted([*verdicts, *unchecked], key=lambda verdict: _key_order(verdict[0]))
    per_turns = [verdict[4] for verdict in verdicts]
    per_bytes = [verdict[5] for verdict in verdicts]
    if sum(per_turns) != turns_hashed or sum(per_bytes) != bytes_hashed:
        raise RuntimeError(
            f"part {index}: per-summary hashing {sum(per_turns)}/{sum(per_bytes)} differs from"
            f" the native totals {turns_hashed}/{bytes_hashed}"
        )
    return _frame(
        pd,
        {
            "conversation": [_key_text(verdict[0]) for verdict in verdicts],
            "summary": [verdict[1] for verdict in verdicts],
            "status": ["current" if verdict[2] is None else "stale" for verdict in verdicts],
            "reason": [verdict[2] for verdict in verdicts],
            "turn": [verdict[3] for verdict in verdicts],
            "turns_hashed": per_turns,
            "bytes_hashed": per_bytes,
        },
    )


def _stored(raw: bytes, storage: str | None) -> Any:
    """A carried value as the command reads it from the database: a number (`stored_as`)
    as itself, text that is not UTF-8 and a blob as its bytes."""
    if storage == "integer":
        return int(raw)
    if storage == "real":
        return float(raw)
    return raw


def _key_order(key: object) -> tuple[int, bytes]:
    """A conversation key's place in the command's verdicts (SQLite's order, in a UTF-8
    file): text, also text that is not UTF-8 (`NotUtf8`), by its bytes, then blobs."""
    return revalidate_runs.key_order(key, "UTF-8")


def _key_text(key: object) -> str:
    """A conversation key as the command's report names it: text that is not UTF-8, or a
    blob, decoded, its bad bytes replaced."""
    if isinstance(key, NotUtf8):
        key = key.raw
    return key.decode("utf-8", errors="replace") if isinstance(key, bytes) else str(key)


def _unseal(
    verdicts: Any, summaries_in: Any, turn_rows: list[Any], source_rows: list[Any]
) -> list[Any]:
    """`source-missing` verdicts redone with the summary's purged sources sealed (as the
    single-machine command does): `turn_rows` every turn of the part (`_TURN_COLUMNS`),
    `source_rows` its `(summary_pk, turn_id, turn_digest)` in position order."""
    fingerprints = {summary_id: fingerprint for _, _, summary_id, fingerprint in summaries_in}
    pks = {summary_id: pk for _, pk, summary_id, _ in summaries_in}
    out = []
    for verdict in verdicts:
        conversation_id, summary_id, reason = verdict[:3]
        if reason == sealed.SOURCE_MISSING:
            mine = [row for row in turn_rows if row[0] == conversation_id]
            rechecked = sealed.recheck(
                conversation_id,
                summary_id,
                fingerprints[summary_id],
                [(row[1], row[2]) for row in source_rows if row[0] == pks[summary_id]],
                {row[1] for row in mine if row[-1] == TURN_PURGED},
                sorted((row[1:-1] for row in mine if row[-1] == TURN_LIVE), key=lambda r: r[1]),
            )
            if rechecked is not None:
                verdict = (conversation_id, summary_id, *rechecked, *verdict[4:])
        out.append(verdict)
    return out


def revalidate_parquet(
    path: str | os.PathLike[str],
    *,
    client: Any = None,
    threads: int | None = 1,
) -> tuple[Any, dict[str, Any]]:
    """Revalidate the Parquet export at `path` with Dask.

    Returns `(frame, aggregate)`: `frame` is a Dask dataframe of `RESULT_COLUMNS` with one
    partition per part, already persisted (computing it again costs nothing); `aggregate`
    is the dict of `ledgerfold revalidate --json` (`conversations`, `summaries_checked`,
    `current`, `stale`, `turns_hashed`, `bytes_hashed`, `stale_summaries`, plus `seconds`,
    `workers` and `partitions`). With `client` (a `dask.distributed.Client`) the work runs
    on its cluster; without, on Dask's current default scheduler. `threads` is the native
    hashing threads per partition task (1: Dask's workers provide the parallelism)."""
    if threads is not None:
        threads = _validate.integer("threads", threads, minimum=1, maximum=MAX_THREADS)
    manifest = read_manifest(path)
    location = os.fspath(path)
    if "://" not in location:
        location = os.path.abspath(location)
    dd = _require("dask.dataframe")
    dask = _require("dask")
    _require("dask.base")
    started = time.perf_counter()
    parts = len(manifest["parts"])
    frame = dd.from_map(
        check_part,
        range(parts),
        meta=_empty_frame(),
        label="ledgerfold-revalidate",
        enforce_metadata=False,
        path=location,
        threads=threads,
        # Fresh task keys every call: a revalidation re-reads and re-hashes, never reuses the
        # results of an earlier call that the cluster still holds.
        run=uuid.uuid4().hex,
    )
    if client is None:
        # A `dask.distributed.Client` made the default (e.g. `with Client(...)`) counts too.
        owner = getattr(dask.base.get_scheduler(), "__self__", None)
        if owner is not None and hasattr(owner, "scheduler_info"):
            client = owner
    if client is not None:
        frame = client.persist(frame)
        stale_rows = frame[frame["status"] == "stale"]
        checked, turns, size, stale = client.compute(
            [frame.shape[0], frame["turns_hashed"].sum(), frame["bytes_hashed"].sum(), stale_rows],
            sync=True,
        )
        workers = len(client.scheduler_info().get("workers", {}))
    else:
        frame = frame.persist()
        stale_rows = frame[frame["status"] == "stale"]
        checked, turns, size, stale = dask.compute(
            frame.shape[0], frame["turns_hashed"].sum(), frame["bytes_hashed"].sum(), stale_rows
        )
        workers = 1
    stale_summaries = [
        {
            "conversation": str(row.conversation),
            "summary": str(row.summary),
            "reason": str(row.reason),
            "turn": None if _missing(row.turn) else str(row.turn),
        }
        for row in stale.itertuples(index=False)
    ]
    # As the command lists them: the summaries not checked against their sources first.
    stale_summaries.sort(key=lambda item: item["reason"] not in RECORD_REASONS)
    checked = int(checked)
    return frame, {
        "conversations": int(manifest["counts"]["conversations"]),
        "summaries_checked": checked,
        "current": checked - len(stale_summaries),
        "stale": len(stale_summaries),
        "turns_hashed": int(turns),
        "bytes_hashed": int(size),
        "seconds": round(time.perf_counter() - started, 6),
        "workers": workers,
        "partitions": parts,
        "stale_summaries": stale_summaries,
    }


def _missing(value: Any) -> bool:
    pd = _require("pandas")
    return bool(pd.isna(value))
