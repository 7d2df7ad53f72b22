"""Every `--json` that names one conversation names it under the same key, `conversation`
(docs/cli.md); `purge` and `delete` also keep `conversation_id`, their first spelling."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from cli_support import run_json
from ledgerfold import SQLiteStore


def _db(tmp_path: Path) -> str:
    db = tmp_path / "a.db"
    with SQLiteStore(db) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(6)])
    return str(db)


def test_every_command_names_its_conversation_under_one_key(tmp_path: Path) -> None:
    db = _db(tmp_path)
    objects = {
        "compact": run_json("compact", db, "--json")[0],
        "compact --dry-run": run_json("compact", db, "--dry-run", "--json")[0],
        "context": run_json("context", db, "c", "--json"),
        "inspect": run_json("inspect", db, "c", "--json"),
        "list": run_json("list", db, "--json")[0],
        "search": run_json("search", db, "c", "turn", "--all", "--json"),
        "purge --dry-run": run_json(
            "purge", db, "c", "--through", "1", "--reason", "r", "--dry-run", "--json"
        ),
        "purge": run_json("purge", db, "c", "--through", "1", "--reason", "r", "--json"),
        "delete": run_json("delete", db, "c", "--yes", "--json"),
    }
    for command, value in objects.items():
        assert value.get("conversation") == "c", command
    for command in ("purge --dry-run", "purge", "delete"):  # the documented key stays
        assert objects[command]["conversation_id"] == "c", command


# The lists of objects whose keys docs/cli.md names too (`stats` is `stats().as_dict()`,
# `messages` OpenAI chat messages, the rest are described by what they hold).
_NESTED = ("compactions", "hits", "stale_summaries", "wrong_digests", "attention")


def _keys(value: Any) -> set[str]:
    """The keys of a printed object (of each object of a printed list), and of the objects
    in its `_NESTED` lists."""
    if isinstance(value, list):
        return set().union(*(_keys(item) for item in value)) if value else set()
    keys = set(value)
    for name in _NESTED:
        for item in value.get(name) or []:
            keys |= set(item)
    return keys


def test_every_json_key_is_named_in_the_docs(tmp_path: Path) -> None:
    """docs/cli.md names every key a `--json` prints: a stale summary, a repaired digest,
    a purge and a report with attention make every list hold an object."""
    db = _db(tmp_path)
    run_json("compact", db, "--keep-tail", "2", "--json")
    with sqlite3.connect(db) as conn:  # changed outside ledgerfold
        conn.execute("UPDATE turns SET body = body || 'x' WHERE sequence = 1")
    printed = [
        run_json("revalidate", db, "--json"),
        run_json("purge", db, "c", "--through", "1", "--reason", "r", "--force", "--json"),
        run_json("report", db, "--json", "--html", str(tmp_path / "r.html")),
        run_json("list", db, "--json"),
        run_json("inspect", db, "c", "--json"),
        run_json("context", db, "c", "--json"),
        run_json("search", db, "c", "turn", "--all", "--json"),
        run_json("upgrade", db, "--json"),
        run_json("reindex", db, "--json"),
        run_json("export", db, "--parquet", str(tmp_path / "pq"), "--json"),
        run_json("demo", "--json"),
    ]
    docs = (Path(__file__).parent.parent / "docs" / "cli.md").read_text(encoding="utf-8")
    unnamed = {key for value in printed for key in _keys(value) if f"`{key}`" not in docs}
    assert not unnamed, sorted(unnamed)
