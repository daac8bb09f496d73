"""Generated memory ids: time-ordered (UUIDv7), so a batch's inserts share index pages."""

from __future__ import annotations

import types
import uuid

import pytest

from tiered_memory import models
from tiered_memory.models import new_id


def test_ids_made_later_sort_after_earlier_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    ids = []
    for millis in range(1_700_000_000_000, 1_700_000_000_050):
        monkeypatch.setattr(
            models, "time", types.SimpleNamespace(time_ns=lambda m=millis: m * 10**6)
        )
        ids.append(new_id())
    assert ids == sorted(ids)


def test_an_id_is_a_uuid7_in_the_shape_of_a_v4_hex_id() -> None:
    made = new_id()
    parsed = uuid.UUID(made)
    assert (parsed.version, parsed.variant) == (7, uuid.RFC_4122)
    assert made == parsed.hex  # 32 lowercase hex digits, no dashes


def test_ids_made_in_the_same_millisecond_differ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        models, "time", types.SimpleNamespace(time_ns=lambda: 1_700_000_000_000 * 10**6)
    )
    made = {new_id() for _ in range(10_000)}
    assert len(made) == 10_000
    assert {m[:12] for m in made} == {f"{1_700_000_000_000:012x}"}
