"""After a purge (SPEC §15.5) nothing in the summary slot promises originals that recall can
no longer return (SPEC §16.5, §17.7): a rolling extension of a sealed summary writes its
marker of omitted lines for the sequences recall still returns, the summarizer is told the
boundary (`SummaryRequest.purged_through`), and the framing says for which sequences a marker
written before the purge still holds. Without a purge, the marker and framing are SPEC
§16.5's (`...; recall_history returns them]`). Real file databases."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledgerfold import (
    CompactionPolicy,
    Compactor,
    ExtractiveSummarizer,
    SQLiteStore,
    SummaryRequest,
    to_chat_messages,
)
from ledgerfold.summarizers._extractive import OMITTED_LINE

POLICY = CompactionPolicy("v1", keep_tail=4, min_new_turns=1)
NOTE = "Where the summary says that recall_history returns lines it left out, that"


class Recording:
    """The extractive summarizer (at most 5 turn lines: a marker soon), recording requests."""

    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []
        self.inner = ExtractiveSummarizer(max_turns=5)

    def __call__(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        return self.inner(request)


def _append(store: SQLiteStore, start: int, stop: int) -> None:
    for n in range(start, stop):
        role = "user" if n % 2 == 0 else "assistant"
        store.append("c", role, f"message number {n}. more words here", id=f"t{n}")


def _marker(text: str) -> str:
    (line,) = [line for line in text.splitlines() if OMITTED_LINE.match(line)]
    return line


def _framing(store: SQLiteStore, *, recall: bool = True) -> str:
    content = to_chat_messages(store.context("c", "v1"), recall=recall)[0]["content"]
    assert isinstance(content, str)
    return content.split("\n", 1)[0]


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    opened = SQLiteStore(tmp_path / "ledger.db")
    yield opened  # type: ignore[misc]
    opened.close()


def test_without_a_purge_the_marker_and_framing_are_the_specs(store: SQLiteStore) -> None:
    summarizer = Recording()
    _append(store, 0, 30)
    assert Compactor(store, POLICY, summarizer).compact("c", force=True).status == "accepted"
    _append(store, 30, 40)
    assert Compactor(store, POLICY, summarizer).compact("c", force=True).status == "accepted"
    assert summarizer.requests[-1].previous_summary is not None
    assert [request.purged_through for request in summarizer.requests] == [None, None]
    current = store.current_summary("c")
    assert current is not None
    assert _marker(current.text).endswith("; recall_history returns them]")
    assert NOTE not in _framing(store)


def test_an_extension_of_a_sealed_summary_promises_only_what_recall_returns(
    store: SQLiteStore,
) -> None:
    summarizer = Recording()
    _append(store, 0, 30)
    compactor = Compactor(store, POLICY, summarizer)
    assert compactor.compact("c", force=True).status == "accepted"
    sealed = store.current_summary("c")
    assert sealed is not None
    before = _marker(sealed.text)
    assert before == "[21 turn lines omitted among sequences 1–26; recall_history returns them]"
    store.purge_through("c", 10, "retention")
    # The sealed summary keeps its text; the framing says for which sequences it holds.
    framing = _framing(store)
    assert f"{NOTE} holds only for sequences after 10." in framing
    assert f"{NOTE} holds only for sequences after 10." in _framing(store, recall=False)

    _append(store, 30, 45)
    assert compactor.compact("c", force=True).status == "accepted"
    assert summarizer.requests[-1].purged_through == 10
    extension = store.current_summary("c")
    assert extension is not None and extension.parent_id == sealed.id
    marker = _marker(extension.text)
    assert marker.endswith("; recall_history returns only those after sequence 10]")
    assert "[seq" not in marker
    assert NOTE not in _framing(store)  # the marker says it itself

    # A later purge goes further: the extension's marker no longer holds as written.
    store.purge_through("c", 20, "retention")
    assert f"{NOTE} holds only for sequences after 20." in _framing(store)
    _append(store, 45, 60)
    assert compactor.compact("c", force=True).status == "accepted"
    assert summarizer.requests[-1].purged_through == 20
    again = store.current_summary("c")
    assert again is not None
    assert _marker(again.text).endswith("; recall_history returns only those after sequence 20]")


def test_omitted_lines_all_purged_are_not_promised(store: SQLiteStore) -> None:
    summarizer = Recording()
    _append(store, 0, 30)
    compactor = Compactor(store, POLICY, summarizer)
    assert compactor.compact("c", force=True).status == "accepted"
    store.purge_through("c", 26, "retention")  # every source of the summary
    framing = _framing(store)
    assert "the recall_history tool cannot return them." in framing
    assert f"{NOTE} no longer holds." in framing
    _append(store, 30, 36)
    # No bound on lines this time: the new ones are kept, every omitted one was purged.
    extending = Recording()
    extending.inner = ExtractiveSummarizer()
    assert Compactor(store, POLICY, extending).compact("c", force=True).status == "accepted"
    assert extending.requests[-1].purged_through == 26
    extension = store.current_summary("c")
    assert extension is not None and extension.parent_id is not None
    marker = _marker(extension.text)
    assert marker == (
        "[21 turn lines omitted among sequences 1–26; purged: recall_history cannot return them]"
    )
    assert OMITTED_LINE.match(marker) is not None


def test_a_rebase_is_told_no_boundary(store: SQLiteStore) -> None:
    summarizer = Recording()
    _append(store, 0, 30)
    store.purge_through("c", 5, "retention")  # nothing summarised: no parent to extend
    assert Compactor(store, POLICY, summarizer).compact("c", force=True).status == "accepted"
    (request,) = summarizer.requests
    assert request.previous_summary is None and request.purged_through is None
    current = store.current_summary("c")
    assert current is not None
    assert _marker(current.text).endswith("; recall_history returns them]")  # all live


def test_an_old_marker_without_a_range_is_not_promised_past_a_purge() -> None:
    request = SummaryRequest(
        "c",
        "p",
        "v1",
        (),
        previous_summary="[3 earlier turn lines omitted]\n[seq 9 user] hello",
        covered_count=4,
        purged_through=5,
    )
    text = ExtractiveSummarizer()(request)
    assert text.splitlines()[0] == (
        "[3 earlier turn lines omitted: sequences 1–8;"
        " recall_history returns only those after sequence 5]"
    )
