"""`archive_preview`: what an explicit archive would take and cost, changing nothing.
The command line's `archive --preview` runs on it, so the archive selection lives in
the core once (it used to be re-implemented by the CLI over the store)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tiered_memory import (
    AsyncTieredMemory,
    ManualClock,
    NotFoundError,
    Tier,
    ValidationError,
)


async def _seed(amem: AsyncTieredMemory, clock: ManualClock) -> dict[str, str]:
    ids = {
        "old": (await amem.add("parked on level 3, bay C12", namespace="n")).id,
        "pinned": (await amem.add("allergic to peanuts", namespace="n", pinned=True)).id,
        "cold": (await amem.add("the boiler was serviced in May", namespace="n")).id,
    }
    await amem.demote(ids["cold"], Tier.COLD, namespace="n")
    clock.advance(timedelta(days=100))
    ids["fresh"] = (await amem.add("Ava starts violin lessons", namespace="n")).id
    return ids


async def _unchanged(amem: AsyncTieredMemory) -> tuple[object, ...]:
    stats = await amem.stats(namespace="n")
    return (stats.model_dump(), [m.id for m in await amem.list(namespace="n")])


async def test_preview_of_ids(amem: AsyncTieredMemory, clock: ManualClock) -> None:
    ids = await _seed(amem, clock)
    before = await _unchanged(amem)
    preview = await amem.archive_preview([ids["fresh"], ids["old"], ids["fresh"]], namespace="n")
    assert [m.id for m in preview.candidates] == [ids["fresh"], ids["old"]]
    assert preview.estimate.candidates == preview.estimate.summarizer_calls == 2
    assert preview.estimate.bytes > 0
    assert await _unchanged(amem) == before
    with pytest.raises(ValidationError, match="pinned or core"):
        await amem.archive_preview([ids["pinned"]], namespace="n")
    with pytest.raises(NotFoundError, match="not found"):
        await amem.archive_preview(["nope"], namespace="n")
    await amem.archive([ids["old"]], namespace="n")
    with pytest.raises(NotFoundError, match="archived"):
        await amem.archive_preview([ids["old"]], namespace="n")


async def test_preview_of_what_went_unused(amem: AsyncTieredMemory, clock: ManualClock) -> None:
    ids = await _seed(amem, clock)
    preview = await amem.archive_preview(older_than=timedelta(days=30), namespace="n")
    assert sorted(m.id for m in preview.candidates) == sorted([ids["old"], ids["cold"]])
    clock.advance(timedelta(minutes=1))
    everything = await amem.archive_preview(older_than=timedelta(seconds=1), namespace="n")
    assert len(everything.candidates) == 3  # every live tier, never the pinned memory
    none = await amem.archive_preview(older_than=timedelta(days=365), namespace="n")
    assert none.candidates == []


async def test_preview_of_what_the_sweep_would_archive(
    amem: AsyncTieredMemory, clock: ManualClock
) -> None:
    ids = await _seed(amem, clock)
    assert (await amem.archive_preview(namespace="n")).candidates == []
    clock.advance(timedelta(days=90))  # COLD for 190 days now
    preview = await amem.archive_preview(namespace="n")
    report = await amem.maintain(dry_run=True, namespace="n")
    assert [m.id for m in preview.candidates] == [ids["cold"]]
    assert report.archive_estimate is not None
    assert preview.estimate.candidates == report.archive_estimate.candidates


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ids": ["x"], "older_than": timedelta(days=1)}, "not both"),
        ({"older_than": timedelta(0)}, "positive timedelta"),
        ({"older_than": timedelta(days=-1)}, "positive timedelta"),
        ({"older_than": "90d"}, "positive timedelta"),
        ({"older_than": timedelta.max}, "before year 1"),
        ({"ids": "abc"}, "list of ids"),
    ],
)
async def test_bad_arguments_are_refused(
    amem: AsyncTieredMemory, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        await amem.archive_preview(**kwargs, namespace="n")  # type: ignore[arg-type]
