"""Rows of the bad-input table (`bad_input_table.py`): Parquet export and its Dask
revalidation."""

from __future__ import annotations

from bad_input_support import (
    _COUNTS,
    _COUNTS_8_TURNS,
    _MANIFEST_HEAD,
    _PART,
    DEEP_JSON,
    INVALID,
    BadInput,
    _link,
    on_export,
    on_manifest,
    row,
)

ROWS: tuple[BadInput, ...] = (
    # ---- Parquet export and its Dask revalidation
    row(
        "export_parquet: out_dir without a directory name",
        "export_parquet(db, '.')  # in an empty directory",
        on_export(lambda base: "."),
        INVALID,
        "out_dir",
    ),
    row(
        "export_parquet: out_dir a symbolic link",
        "export_parquet(db, 'link')  # link -> an empty directory",
        on_export(lambda base: _link(base, "empty")),
        INVALID,
        "out_dir",
    ),
    row(
        "export_parquet: out_dir a dangling symbolic link",
        "export_parquet(db, 'link')  # link -> nothing",
        on_export(lambda base: _link(base, "nowhere")),
        INVALID,
        "out_dir",
    ),
    row(
        "read_manifest: JSON nested too deeply",
        "read_manifest(path)  # _manifest.json of 100,000 nested arrays",
        on_manifest(DEEP_JSON),
        INVALID,
        "path",
    ),
    row(
        "read_manifest: parts not a list",
        "read_manifest(path)  # _manifest.json with 'parts': 5",
        on_manifest(_MANIFEST_HEAD + f'"counts": {_COUNTS}, "parts": 5}}'),
        INVALID,
        "path",
    ),
    row(
        "read_manifest: counts not the parts' total",
        "read_manifest(path)  # 'counts': {'turns': 8, ...}, parts of 0 turns",
        on_manifest(_MANIFEST_HEAD + f'"counts": {_COUNTS_8_TURNS}, "parts": [{_PART}]}}'),
        INVALID,
        "path",
    ),
    row(
        "read_manifest: a listed part file missing",
        "read_manifest(path)  # part-00000.parquet not there",
        on_manifest(_MANIFEST_HEAD + f'"counts": {_COUNTS}, "parts": [{_PART}]}}'),
        INVALID,
        "path",
    ),
)
