"""The native module under inputs that lie about themselves: no `PanicException` and no
process abort reaches Python; the answer is the documented one (`InvalidInput` naming the
field, or the result the real items give).

- An iterable whose `__len__` says more than it holds (2**40, `sys.maxsize`): its length is
  a hint, never room reserved up front (a capacity overflow panics; a failed allocation
  aborts the process).
- `_native.audit_columns` with a summary count no packed key can name.
- A `meta` mapping whose `items()` gives no pairs.

Each call runs in a child process: without the fix it aborts, which must fail the test, not
end the test run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

_PRELUDE = textwrap.dedent(
    """
    import json, sys
    from collections.abc import Mapping
    import ledgerfold as lf
    from ledgerfold import _native

    class Lying:
        "An iterable of `items` whose `__len__` says `claimed`."
        def __init__(self, items, claimed):
            self.items, self.claimed = list(items), claimed
        def __iter__(self):
            return iter(self.items)
        def __len__(self):
            return self.claimed

    class LyingMapping(Mapping):
        def __init__(self, items, claimed):
            self.data, self.claimed = dict(items), claimed
        def __getitem__(self, key):
            return self.data[key]
        def __iter__(self):
            return iter(self.data)
        def __len__(self):
            return self.claimed

    def report(call):
        try:
            value = call()
        except lf.LedgerfoldError as err:
            out = {"error": type(err).__name__, "field": err.field}
        except BaseException as err:
            out = {"error": type(err).__module__ + "." + type(err).__name__}
        else:
            out = {"value": repr(value)}
        print(json.dumps(out))
    """
)

_TURN = "lf.Turn('a', 1, 'user', 'hello')"
_ROW = "('a', 1, 'user', 'hello', False, None, None, None, lf.Turn('a', 1, 'user', 'hello').digest)"

#: (name, call with `CLAIMED` for the claimed length, the same call on the plain items)
_LYING_CALLS = [
    (
        "fingerprint_turns",
        f"lf.fingerprint_turns(Lying([{_TURN}], CLAIMED))",
        f"lf.fingerprint_turns([{_TURN}])",
    ),
    (
        "Conversation",
        f"lf.Conversation('c', 0, Lying([{_TURN}], CLAIMED))",
        f"lf.Conversation('c', 0, [{_TURN}])",
    ),
    (
        "Conversation._from_rows",
        f"_native.Conversation._from_rows('c', 0, Lying([{_ROW}], CLAIMED))",
        f"_native.Conversation._from_rows('c', 0, [{_ROW}])",
    ),
    (
        "SourceIds",
        "_native.SourceIds(Lying(['a', 'b'], CLAIMED))",
        "_native.SourceIds(['a', 'b'])",
    ),
    (
        "same_ordered_ids",
        "lf.same_ordered_ids(Lying(['a', 'b'], CLAIMED), ['a', 'b'])",
        "lf.same_ordered_ids(['a', 'b'], ['a', 'b'])",
    ),
    (
        "Turn meta",
        "lf.Turn('a', 1, 'user', 'x', meta=LyingMapping({'name': 'n'}, CLAIMED)).meta",
        "lf.Turn('a', 1, 'user', 'x', meta={'name': 'n'}).meta",
    ),
]


def _run(call: str) -> dict[str, object]:
    script = _PRELUDE + f"\nreport(lambda: {call})\n"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.mark.parametrize("claimed", [2**40, sys.maxsize])
@pytest.mark.parametrize(("name", "lying", "plain"), _LYING_CALLS, ids=[c[0] for c in _LYING_CALLS])
def test_a_length_that_lies_is_only_a_hint(name: str, lying: str, plain: str, claimed: int) -> None:
    expected = _run(plain)
    assert "value" in expected, expected
    assert _run(lying.replace("CLAIMED", str(claimed))) == expected


@pytest.mark.parametrize("count", [-1, 257, 2**34, 2**62, True])
def test_an_audit_of_more_summaries_than_a_key_can_name_is_invalid_input(count: object) -> None:
    columns = "(None,) * 10, (None,) * 3"
    assert _run(f"_native.audit_columns({columns}, {count!r}, 1)") == {
        "error": "InvalidInput",
        "field": "summaries",
    }


def test_an_audit_of_up_to_256_summaries_still_runs() -> None:
    columns = "(None,) * 10, (None,) * 3"
    for count in (0, 1, 256):
        assert _run(f"_native.audit_columns({columns}, {count}, 1)") == {
            "value": repr(([], [], 0, 0))
        }


_BROKEN_ITEMS = {
    "not pairs": "[1, 2]",
    "triples": "[('name', 'n', 'x')]",
    "not iterable": "5",
}


@pytest.mark.parametrize("items", list(_BROKEN_ITEMS.values()), ids=list(_BROKEN_ITEMS))
@pytest.mark.parametrize(
    "call",
    [
        "lf.Turn('a', 1, 'user', 'x', meta=meta)",
        "lf.SQLiteStore().append('c', 'user', 'x', meta=meta)",
        "lf.Turn('a', 1, 'user', 'x').replace(meta=meta)",
    ],
)
def test_a_meta_whose_items_are_no_pairs_is_invalid_input(items: str, call: str) -> None:
    """A `dict` subclass whose `items()` says something else than its pairs."""
    meta = f"type('Broken', (dict,), {{'items': lambda self: {items}}})(name='n')"
    assert _run(f"(lambda meta: {call})({meta})") == {"error": "InvalidInput", "field": "meta"}
