"""An integration whose extra is missing says what to install, as the Parquet export and
`ledgerfold.dask` do (tests/test_transcripts.py): the README's install line offers a
`langchain` extra (langchain-core alone) beside `langgraph`, which the middleware needs."""

from __future__ import annotations

import importlib
import sys

import pytest


def test_langchain_middleware_without_langchain_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A None entry in sys.modules makes the import fail as if the package were absent
    # (`ledgerfold[langchain]` installs langchain-core, not langchain).
    monkeypatch.setitem(sys.modules, "langchain.agents.middleware", None)
    monkeypatch.delitem(sys.modules, "ledgerfold.integrations.langchain", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'ledgerfold\[langgraph\]'") as caught:
        importlib.import_module("ledgerfold.integrations.langchain")
    assert "ledgerfold.integrations.langchain needs langchain" in str(caught.value)
    assert isinstance(caught.value.__cause__, ImportError)
