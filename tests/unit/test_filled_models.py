"""`models.filled`: the library's own rows become models without a second validation,
and a mapping that lacks a field the model has is validated instead (never a model
with a field missing)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from pydantic import ValidationError as PydanticValidationError

from tiered_memory.models import Link, LinkKind, filled

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _values() -> dict[str, object]:
    return {
        "source": "a",
        "target": "b",
        "weight": 0.5,
        "kind": LinkKind.SIMILAR,
        "created_at": NOW,
        "updated_at": NOW,
    }


def test_every_field_given_equals_a_validated_model() -> None:
    made = filled(Link, _values())
    assert made == Link.model_validate(_values())
    assert made.model_fields_set == set(Link.model_fields)
    assert made.model_dump() == Link.model_validate(_values()).model_dump()


def test_a_missing_field_is_validated_not_left_out() -> None:
    values = _values()
    del values["weight"]  # required: validation refuses it
    with pytest.raises(PydanticValidationError):
        filled(Link, values)
    values = _values()
    del values["updated_at"]  # has a default: validation fills it
    made = filled(Link, values)
    assert "updated_at" in made.__dict__
