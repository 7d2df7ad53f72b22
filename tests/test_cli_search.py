"""`ledgerfold search DB CONVERSATION QUERY [--all] [--limit N] [--json]`:
scope, limit, JSON shape, terminal-safe text, user errors, and that it changes no file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import ledgerfold as lf
from cli_support import run, run_json
from test_search_migration import v4_turns, write_v4_database


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store:
        store.append("c", "system", "You are a courier assistant.")
        store.append("c", "user", "Ship parcel QZ-704 to the Lyon depot, not Marseille.")
        store.append("c", "user", "Also \x1b[31mred\x1b[0m parcel QZ-705 goes to Lyon.")
        for n in range(10):
            store.append("c", "assistant" if n % 2 else "user", f"Chat {n} about the weather.")
        store.append("c", "user", "Latest: the Lyon depot closes at 6.")
        policy = lf.CompactionPolicy("cli-search", keep_tail=3, min_new_turns=1)
        lf.Compactor(store, policy).compact("c")
    return path


def snapshot(directory: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.iterdir())
        if p.is_file()
    }


def test_search_json_covers_the_summarised_turns_only(db: Path) -> None:
    before = snapshot(db.parent)
    out = run_json("search", str(db), "c", "Lyon depot", "--json")
    assert snapshot(db.parent) == before  # a read-only command creates or changes no file
    assert (out["conversation"], out["scope"]) == ("c", "covered")
    sequences = [hit["sequence"] for hit in out["hits"]]
    assert sorted(sequences) == [2, 3]  # the newest Lyon turn (seq 14) is raw in the context
    for hit in out["hits"]:
        assert set(hit) == {"turn_id", "sequence", "role", "summary_id", "score", "text"}
        assert hit["summary_id"] is not None and isinstance(hit["score"], float)
    everything = run_json("search", str(db), "c", "Lyon depot", "--all", "--json")
    assert 14 in [hit["sequence"] for hit in everything["hits"]]
    one = run_json("search", str(db), "c", "Lyon", "--all", "--limit", "1", "--json")
    assert len(one["hits"]) == 1


def test_search_table_escapes_terminal_control_characters(db: Path) -> None:
    result = run("search", str(db), "c", "QZ-705")
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\\x1b" in result.stdout
    assert "QZ-705" in result.stdout


def test_no_match_says_so(db: Path) -> None:
    result = run("search", str(db), "c", "zeppelin")
    assert result.exit_code == 0 and "no covered turn of c matches" in result.stdout
    assert run_json("search", str(db), "c", '"NEAR( * AND', "--json")["hits"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", "{db}", "nobody", "x"], "unknown conversation"),
        (["search", "{db}", "c", "x", "--limit", "0"], "--limit"),
        (["search", "{db}", "c", "x", "--limit", "101"], "--limit"),
        (["search", "{missing}", "c", "x"], "no such database"),
    ],
)
def test_user_errors_are_one_line_and_exit_2(
    db: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    filled = [a.format(db=db, missing=tmp_path / "missing.db") for a in args]
    result = run(*filled)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "missing.db").exists()


def test_json_output_is_strict(db: Path) -> None:
    result = run("search", str(db), "c", "parcel", "--all", "--json")
    json.loads(result.stdout, parse_constant=lambda name: pytest.fail(name))


def test_search_of_an_older_schema_names_the_upgrade(tmp_path: Path) -> None:
    """A v4 file reads, but has no search index until it is migrated: the line says which
    command does that, and the file stays as it was."""
    path = tmp_path / "v4.db"
    write_v4_database(path, v4_turns(12))
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    result = run("search", str(path), "c", "mango", "--all")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"ledgerfold: error: {path}: schema version 4 has no search index yet;"
        f" run `ledgerfold upgrade {path}` first"
    ]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert run("upgrade", str(path)).exit_code == 0
    assert run_json("search", str(path), "c", "mango", "--all", "--json")["hits"]


def test_without_a_current_summary_the_table_says_every_turn_was_searched(tmp_path: Path) -> None:
    """Default scope with nothing summarised searches every live turn (SPEC §16.5): the
    table said "(covered)" over hits no summary covers."""
    path = tmp_path / "raw.db"
    with lf.SQLiteStore(path) as store:
        store.append("raw", "user", "Ship parcel QZ-704 to the Lyon depot.")
        store.append("raw", "assistant", "Done.")
    result = run("search", str(path), "raw", "Lyon")
    assert result.exit_code == 0, result.output
    assert "1 hit in raw (every turn: no current summary)" in result.stdout
    assert "(covered)" not in result.stdout
    missing = run("search", str(path), "raw", "zeppelin")
    assert "no turn of raw matches (every turn: no current summary)" in missing.stdout


def test_no_covered_match_points_to_all(db: Path) -> None:
    result = run("search", str(db), "c", "closes")  # only the raw tail says it
    assert "no covered turn of c matches (--all also searches" in result.stdout
    assert "1 hit in c (all)" in run("search", str(db), "c", "closes", "--all").stdout


@pytest.mark.parametrize("query", ["", "???", " - "])
def test_a_query_without_a_word_is_a_user_error(db: Path, query: str) -> None:
    """It printed "no covered turn of c matches", as if it had searched."""
    for extra in ([], ["--json"]):
        result = run("search", str(db), "c", query, *extra)
        assert result.exit_code == 2 and result.stdout == ""
        assert result.stderr == (
            f"ledgerfold: error: QUERY {query!r} has no word to search for"
            " (plain words, numbers or codes)\n"
        )


def test_a_long_query_without_a_word_is_not_echoed_whole(db: Path) -> None:
    """A pasted 120,000 characters of punctuation were echoed whole in the error."""
    query = "!?" * 60_000
    result = run("search", str(db), "c", query)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (
        f"ledgerfold: error: QUERY {query[:79]!r}… (120,000 characters) has no word to search"
        " for (plain words, numbers or codes)\n"
    )
