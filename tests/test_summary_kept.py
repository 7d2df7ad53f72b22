"""The turns a full summary write records as kept (`summary_kept`: the live turns below the
summary's slot that it does not cover, which `context()` shows raw before its slot). The
oracle is their definition as one SQL query over the stored rows."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledgerfold import CompactionPolicy, Compactor, SQLiteStore
from ledgerfold.store._schema import TURN_LIVE


def _kept(store: SQLiteStore, summary_id: str) -> set[int]:
    return {
        row[0]
        for row in store._connection().execute(
            "SELECT k.turn_pk FROM summary_kept k JOIN summaries s ON s.pk = k.summary_pk"
            " WHERE s.id = ?",
            (summary_id,),
        )
    }


def _defined(store: SQLiteStore, summary_id: str) -> set[int]:
    """Live turns of the conversation below the summary's slot, not among its sources."""
    return {
        row[0]
        for row in store._connection().execute(
            "SELECT t.pk FROM turns t JOIN summaries s ON s.conversation_id = t.conversation_id"
            " WHERE s.id = ? AND t.state = ? AND t.sequence < s.through_sequence"
            " AND t.id NOT IN (SELECT turn_id FROM summary_sources WHERE summary_pk = s.pk)",
            (summary_id, TURN_LIVE),
        )
    }


_TURNS = st.lists(
    st.tuples(st.sampled_from(["system", "user", "assistant"]), st.booleans()),
    min_size=4,
    max_size=30,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    turns=_TURNS,
    retracted=st.sets(st.integers(0, 29), max_size=5),
    edited=st.integers(0, 29),
    preserve=st.sampled_from([(), ("system",)]),
)
def test_a_full_write_keeps_exactly_the_live_uncovered_turns_below_its_slot(
    tmp_path_factory: object,
    turns: list[tuple[str, bool]],
    retracted: set[int],
    edited: int,
    preserve: tuple[str, ...],
) -> None:
    path = tmp_path_factory.mktemp("kept") / "s.db"  # type: ignore[attr-defined]
    policy = CompactionPolicy("kept-v1", keep_tail=2, min_new_turns=1, preserve_roles=preserve)
    with SQLiteStore(path) as store:
        compactor = Compactor(store, policy)
        written = store.append_many(
            "c",
            [
                {"role": role, "body": f"{role} turn {n}", "protected": protected}
                for n, (role, protected) in enumerate(turns)
            ],
        )
        for index in sorted(retracted):
            if index < len(written) - 2:
                store.retract("c", written[index].id)
        first = compactor.compact("c", force=True)  # the first summary: a full write
        if first.summary is None:
            return
        assert _kept(store, first.summary.id) == _defined(store, first.summary.id)
        # An edit of a covered source makes it stale; the rebase is another full write.
        live = {turn.id for turn in store.load("c").turns}
        sources = [turn_id for turn_id in first.summary.source_ids if turn_id in live]
        store.edit("c", sources[edited % len(sources)], body="edited")
        store.append("c", "user", "after the edit")
        again = compactor.compact("c", force=True)
        if again.summary is not None and again.summary.parent_id is None:
            assert _kept(store, again.summary.id) == _defined(store, again.summary.id)
