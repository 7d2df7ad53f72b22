"""File names for the report's inspector pages: a conversation ID is data (it can hold `/`,
`..`, `<`, NUL, any Unicode, any length), so a name keeps only a short ASCII slug of it for
the reader and a hash of the whole ID for uniqueness."""

from __future__ import annotations

import re
from collections.abc import Iterable
from hashlib import blake2b

__all__ = ["PAGE_NAME", "page_names"]

#: Characters of the ID kept in a name (the hash makes it unique, the slug readable).
SLUG_CHARS = 40
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
#: Every name `page_names` gives, and no other (the report removes such pages it did not
#: write: a conversation deleted since the last run leaves no page behind).
PAGE_NAME = re.compile(r"[a-z0-9_-]{1,40}-[0-9a-f]{16}\.html")


def _name(conversation_id: str, salt: int) -> str:
    slug = _UNSAFE.sub("_", conversation_id)[:SLUG_CHARS].strip("_") or "conversation"
    data = conversation_id.encode("utf-8", "surrogatepass") + (b"\0%d" % salt if salt else b"")
    digest = blake2b(data, digest_size=8).hexdigest()
    # Lower case only: two names never differ by case alone (case-insensitive file systems).
    return f"{slug.lower()}-{digest}.html"


def page_names(conversation_ids: Iterable[str]) -> dict[str, str]:
    """A distinct, safe file name (`[a-z0-9_-]+-<16 hex>.html`, at most 62 characters) for
    each ID."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    for conversation_id in conversation_ids:
        salt = 0
        name = _name(conversation_id, salt)
        while name in taken:  # a 64-bit hash collision: never seen, still handled
            salt += 1
            name = _name(conversation_id, salt)
        taken.add(name)
        names[conversation_id] = name
    return names
