"""Ranking builds its hits and score terms without validating them a second time: a
recall scores ~150 candidates, and pydantic's validation of each Hit and ScoreTerms
cost more than the scoring itself. The objects must still be what validation would
have made (the same types, every field set)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tiered_memory import HashingEmbedder, ManualClock, MemoryInput, Tier, TieredMemory
from tiered_memory.models import Hit, ScoreTerms


@pytest.fixture
def mem(tmp_path: Path, clock: ManualClock) -> TieredMemory:
    engine = TieredMemory.embedded(tmp_path / "m.db", embedder=HashingEmbedder(), clock=clock)
    engine.add_many(
        [MemoryInput(content=f"note {i} about the garden and the {i % 7} roses") for i in range(40)]
    )
    clock.advance(timedelta(days=3))
    return engine


def test_recall_validates_no_hit_and_no_score_terms(
    mem: TieredMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    validated: list[str] = []
    for model in (Hit, ScoreTerms):
        original = model.__pydantic_validator__

        class Counting:
            def __init__(self, inner: object, name: str) -> None:
                self.inner, self.name = inner, name

            def validate_python(self, *args: object, **kwargs: object) -> object:
                validated.append(self.name)
                return self.inner.validate_python(*args, **kwargs)  # type: ignore[attr-defined]

            def __getattr__(self, attr: str) -> object:
                return getattr(self.inner, attr)

        monkeypatch.setattr(model, "__pydantic_validator__", Counting(original, model.__name__))
    injection = mem.recall("garden roses", budget_tokens=400, record_use=False)
    assert injection.items
    assert validated == []
    mem.close()


def test_hits_equal_validated_ones(mem: TieredMemory) -> None:
    hits = mem.search("garden roses", k=10)
    assert hits
    for hit in hits:
        again = Hit.model_validate(hit.model_dump())
        assert again == hit
        assert all(type(v) is float for v in hit.terms.model_dump().values())
        assert type(hit.score) is float
        assert isinstance(hit.tier, Tier)
    mem.close()
