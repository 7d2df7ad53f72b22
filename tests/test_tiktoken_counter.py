"""`tiktoken_counter`: tiktoken's count when it works offline, else `approx_tokens`."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import tiktoken

from ledgerfold import CompactionPolicy
from ledgerfold.tokens import approx_tokens, tiktoken_counter


def byte_encoding() -> tiktoken.Encoding:
    """A tiny real tiktoken encoding (one token per byte), built here: no download."""
    return tiktoken.Encoding(
        name="bytes",
        pat_str=r"[\s\S]",
        mergeable_ranks={bytes([value]): value for value in range(256)},
        special_tokens={"<|endoftext|>": 256},
    )


def test_an_encoding_object_is_used_as_is() -> None:
    counter = tiktoken_counter(byte_encoding())
    assert counter is not approx_tokens
    assert counter("héllo") == len("héllo".encode())  # 6 bytes, approx would say 2
    assert counter("<|endoftext|>") == len("<|endoftext|>")  # ordinary text
    assert CompactionPolicy("v1", token_counter=counter).counter("abcd") == 4


def test_falls_back_when_the_encoding_file_is_not_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))

    def no_download(name: str) -> tiktoken.Encoding:
        raise AssertionError("must not try to load (and download) an uncached encoding")

    monkeypatch.setattr(tiktoken, "get_encoding", no_download)
    assert tiktoken_counter() is approx_tokens
    assert tiktoken_counter(model="gpt-4o") is approx_tokens
    assert tiktoken_counter(model="no-such-model") is approx_tokens
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # caching disabled: every load downloads
    assert tiktoken_counter("cl100k_base") is approx_tokens


def test_a_cached_encoding_is_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    (tmp_path / hashlib.sha1(url.encode()).hexdigest()).write_bytes(b"cached")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    loaded: list[str] = []

    def from_cache(name: str) -> tiktoken.Encoding:
        loaded.append(name)
        return byte_encoding()

    monkeypatch.setattr(tiktoken, "get_encoding", from_cache)
    counter = tiktoken_counter(model="gpt-4o")  # gpt-4o's encoding is o200k_base
    assert loaded == ["o200k_base"]
    assert counter("abc") == 3


def test_a_failing_load_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    (tmp_path / hashlib.sha1(url.encode()).hexdigest()).write_bytes(b"corrupt")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))

    def broken(name: str) -> tiktoken.Encoding:
        raise ValueError("hash mismatch")

    monkeypatch.setattr(tiktoken, "get_encoding", broken)
    assert tiktoken_counter("cl100k_base") is approx_tokens
