"""Where a memory came from, kept through the two merges: consolidation (fading
near-duplicates become one summary memory) and deduplication at `add` (a near-duplicate
strengthens the memory it repeats instead of being stored). An app that stored a
session id, a URL or a speaker with each memory can still cite them afterwards.

The rule, in the memory's metadata:

- a consolidated memory keeps every top-level key on which all its originals agree
  (so a metadata filter that found each original finds the summary), and lists each
  original under `consolidated_from`: `{"id", "source", "created_at", "metadata"}`, in
  group order (at most `ConsolidationPolicy.max_group` of them);
- a memory a near-duplicate merged into keeps its own metadata and appends the
  duplicate's under `merged_from`: `{"source", "added_at", "metadata"}`, when that
  metadata is not empty and says something the memory and its list do not already
  say. The list keeps the newest `MAX_MERGED` entries.

Both stay within `Limits.max_metadata_bytes`: past it, the oldest entries lose their
`metadata` first (ids and times stay), then go.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from .models import Memory

CONSOLIDATED_FROM = "consolidated_from"
MERGED_FROM = "merged_from"
MAX_MERGED = 20
RESERVED = frozenset({CONSOLIDATED_FROM, MERGED_FROM})


def consolidated(originals: Sequence[Memory], max_bytes: int) -> dict[str, Any]:
    """The metadata of the memory `originals` are consolidated into."""
    shared: dict[str, Any] = {}
    if originals:
        first = originals[0].metadata
        shared = {
            key: value
            for key, value in first.items()
            if key not in RESERVED
            and all(m.metadata.get(key, _MISSING) == value for m in originals)
        }
    entries = [
        {
            "id": m.id,
            "source": m.source,
            "created_at": m.created_at.isoformat(),
            "metadata": dict(m.metadata),
        }
        for m in originals
    ]
    return _fit(shared, CONSOLIDATED_FROM, entries, max_bytes)


def merged(
    metadata: Mapping[str, Any],
    incoming: Mapping[str, Any],
    *,
    source: str,
    at: datetime,
    max_bytes: int,
) -> dict[str, Any] | None:
    """`metadata` of a memory once a near-duplicate with `incoming` metadata merged
    into it at `at`; None when there is nothing new to keep."""
    if not incoming:
        return None
    own = {k: v for k, v in metadata.items() if k != MERGED_FROM}
    previous = metadata.get(MERGED_FROM)
    entries: list[Any] = list(previous) if isinstance(previous, list) else []
    if dict(incoming) == own or any(
        isinstance(e, dict) and e.get("metadata") == dict(incoming) for e in entries
    ):
        return None
    entries.append({"source": source, "added_at": at.isoformat(), "metadata": dict(incoming)})
    return _fit(own, MERGED_FROM, entries[-MAX_MERGED:], max_bytes)


class _Missing:
    pass


_MISSING = _Missing()


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _fit(base: dict[str, Any], key: str, entries: list[Any], max_bytes: int) -> dict[str, Any]:
    """`base` with `entries` under `key`, within `max_bytes` of JSON: the oldest
    entries lose their metadata first, then go (`base` itself already fitted once)."""
    entries = [dict(e) if isinstance(e, dict) else e for e in entries]
    out = {**base, key: entries}
    for entry in entries:
        if _size(out) <= max_bytes:
            return out
        if isinstance(entry, dict) and "metadata" in entry:
            del entry["metadata"]
    while entries and _size(out) > max_bytes:
        entries.pop(0)
    return out
