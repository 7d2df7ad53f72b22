"""The shipped `Store` contract suite (`ledgerfold.testing`) against a second backend: an
in-memory store written from the protocol and the public rule functions only
(`memory_store.py`). It passes the whole suite, and each rule bug planted in it makes the
suite fail: the suite really checks the rules, not only that a store answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from ledgerfold.testing import StoreContract  # noqa: E402
from memory_store import BUGS, MemoryStore  # noqa: E402
from protocol_only import ProtocolOnly  # noqa: E402


class TestMemoryStore(StoreContract):
    """The whole suite, as another backend's author runs it (subclassing)."""

    def make_store(self, tmp_path: Path) -> Any:
        return MemoryStore()


#: Per planted bug, one contract test that fails with it (the suite's own names).
CAUGHT_BY = {
    "accept-protected-source": "test_commit_refuses_a_protected_or_preserved_role_source",
    "edit-keeps-current": "test_edit_marks_citing_summaries_stale_at_once",
    "append-keeps-group-split": "test_a_late_result_of_a_covered_call_makes_the_summary_stale",
    "ignore-plan-sources": "test_commit_holds_the_sources_to_the_plan",
    "no-lineage": "test_commit_checks_the_parent",
    "prune-failures": "test_pruning_keeps_the_current_version_and_the_failures_the_back_off_counts",
    "purge-protected": "test_purge_records_the_boundary_and_keeps_protected_turns",
    "retract-keeps-results": "test_retracting_a_calling_turn_retracts_its_results",
    "accept-bad-tool-calls": "test_writes_refuse_tool_calls_that_are_not_calls",
}


def test_every_planted_bug_has_a_contract_test() -> None:
    assert set(CAUGHT_BY) == BUGS
    for name in CAUGHT_BY.values():
        assert callable(getattr(StoreContract, name)), name


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_the_one_command_fails_a_store_with_a_planted_rule_bug(tmp_path: Path, bug: str) -> None:
    """`python -m ledgerfold.testing MODULE:FACTORY` against the store with `bug`: pytest's
    exit status is 1 and the test of that rule is among the failures."""
    (tmp_path / "buggy_backend.py").write_text(
        f"import sys\nsys.path.insert(0, {str(_HERE)!r})\n"
        "from memory_store import MemoryStore\n\n\n"
        f"def make_store(tmp_path):\n    return MemoryStore(bugs=[{bug!r}])\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "ledgerfold.testing", "buggy_backend:make_store", "-q", "-rf"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env=None,
    )
    assert run.returncode == 1, run.stdout[-2000:]
    failed = [line for line in run.stdout.splitlines() if line.startswith("FAILED")]
    assert any(CAUGHT_BY[bug] in line for line in failed), failed


class TestProtocolOnlyStore(StoreContract):
    """The suite itself uses nothing but the protocol: a store that is only the protocol's
    methods (no `close`, no private name) passes it."""

    def make_store(self, tmp_path: Path) -> Any:
        return ProtocolOnly(MemoryStore())


class V11MemoryStore(MemoryStore):
    """A store written to v1.1's protocol (SPEC §17.9: `Store` stays as v1.1 had it): its
    `begin_compaction` takes no `only_due_at_once`."""

    def begin_compaction(  # type: ignore[override]
        self,
        conversation_id: str,
        keep_tail: int,
        policy_version: str,
        *,
        preserve_roles: Any = (),
        min_new_turns: int = 1,
    ) -> Any:
        return super().begin_compaction(
            conversation_id,
            keep_tail,
            policy_version,
            preserve_roles=preserve_roles,
            min_new_turns=min_new_turns,
        )


class TestV11Store(StoreContract):
    """A v1.1 store passes the suite: what only protocol 2 asks is not asked of it."""

    def make_store(self, tmp_path: Path) -> Any:
        return V11MemoryStore()

    def test_begin_compaction_only_due_at_once_registers_only_what_is_due_at_once(
        self, store: Any
    ) -> None:
        """Protocol 2's, which the suite skips for a v1.1 store: here, that the keyword is
        indeed refused (so the skip is the right call)."""
        with pytest.raises(TypeError, match="only_due_at_once"):
            store.begin_compaction("c", 2, "p", only_due_at_once=True)
