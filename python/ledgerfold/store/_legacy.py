"""The import policy for legacy records (SPEC §9): what lacks a role or provenance comes in
protected as `unverified-provenance`, never silently made compactable."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ledgerfold import _validate
from ledgerfold._errors import InvalidInput
from ledgerfold._model import ROLES
from ledgerfold.store._ledger import mappings

__all__ = ["legacy_specs"]

_LEGACY_KEYS = frozenset({"id", "role", "body", "provenance", "meta", "group"})


def legacy_specs(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """`append` specs for legacy records (see `SQLiteStore.import_legacy`)."""
    specs: list[Mapping[str, Any]] = []
    for field, record in mappings("records", records, _LEGACY_KEYS):
        raw_meta = record.get("meta")
        if raw_meta is not None and not isinstance(raw_meta, Mapping):
            raise InvalidInput(
                f"{field}.meta: must be a mapping", field=f"{field}.meta", problem="wrong-type"
            )
        meta = dict(raw_meta) if raw_meta is not None else {}
        role = record.get("role")
        if role is not None and not isinstance(role, str):
            raise InvalidInput(
                f"{field}.role: must be str, got {type(role).__name__}",
                field=f"{field}.role",
                problem="wrong-type",
            )
        provenance = record.get("provenance")
        if provenance is not None:
            provenance = _validate.text(f"{field}.provenance", provenance, blank_ok=True)
            if provenance.strip():
                meta["provenance"] = provenance
            else:
                provenance = None
        verified = True
        if role not in ROLES:
            meta["legacy_role"] = "missing" if role is None else role
            role = "user"
            verified = False
        if provenance is None:
            verified = False
        specs.append(
            {
                "id": record.get("id"),
                "role": role,
                "body": record.get("body", ""),
                "group": record.get("group"),
                "meta": meta or None,
                "protected": not verified,
                "protection_reason": None if verified else "unverified-provenance",
            }
        )
    return specs
