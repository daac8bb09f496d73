"""Originals leave object storage through the store's queue (`PendingOriginal`): a
hard delete, a replace or a restore of an archived memory queues its original in the
transaction that lets go of it, deletes it right after, and leaves it queued for the
sweep when the object store is unreachable. An outage never blocks a delete, and no
original is left that nothing names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.engine.clusters import due_cluster, open_clustering
from tests.matrix import MemoryFactory
from tiered_memory import (
    AsyncTieredMemory,
    BackendUnavailableError,
    ManualClock,
)
from tiered_memory.ports import PendingOriginal

NS = "queue"


class Outage:
    """Object storage that fails every read and delete while `down`."""

    def __init__(self, amem: AsyncTieredMemory, monkeypatch: pytest.MonkeyPatch) -> None:
        self.down = True
        self.calls: list[str] = []
        real_get, real_delete = amem.objects.get, amem.objects.delete

        async def get(namespace: str, key: str) -> bytes:
            self.calls.append(f"get {key}")
            if self.down:
                raise BackendUnavailableError("object storage is down")
            return await real_get(namespace, key)

        async def delete(namespace: str, key: str) -> None:
            self.calls.append(f"delete {key}")
            if self.down:
                raise BackendUnavailableError("object storage is down")
            await real_delete(namespace, key)

        monkeypatch.setattr(amem.objects, "get", get)
        monkeypatch.setattr(amem.objects, "delete", delete)


async def _archived(amem: AsyncTieredMemory, memory_id: str = "car", ns: str = NS) -> str:
    await amem.add("Parked on level 3, bay C12", namespace=ns, id=memory_id)
    await amem.archive([memory_id], namespace=ns)
    (key,) = await amem.objects.list(ns)
    return key


async def test_a_hard_delete_is_not_blocked_by_an_unreachable_object_store(
    amem: AsyncTieredMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = await _archived(amem)
    outage = Outage(amem, monkeypatch)
    await amem.forget("car", namespace=NS, hard=True)  # used to raise, writing nothing
    assert await amem.store.get_archives(NS, ["car"]) == {}
    (queued,) = await amem.store.pending_originals(NS)
    assert (queued.id, f"car@{queued.checksum}") == ("car", key)
    assert queued.hand_on  # its summary is handed on once the original is readable
    assert outage.calls  # it tried
    outage.down = False
    assert await amem.objects.list(NS) == [key]
    report = await amem.maintain()
    assert report.count("originals_deleted") == 1
    assert await amem.objects.list(NS) == []
    assert await amem.store.pending_originals(NS) == []
    assert await amem.store.pending_namespaces() == []


async def test_a_failed_deletion_of_the_original_is_retried_by_the_sweep(
    amem: AsyncTieredMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the deletion fails: the record goes, the call succeeds, the original stays
    queued (it used to raise and leave an original nothing named, for ever)."""
    key = await _archived(amem)
    real_delete = amem.objects.delete

    async def unreachable(namespace: str, key: str) -> None:
        raise BackendUnavailableError("object storage is down")

    monkeypatch.setattr(amem.objects, "delete", unreachable)
    assert await amem.forget_many(["car"], namespace=NS, hard=True) == 1
    assert await amem.objects.list(NS) == [key]
    assert [o.id for o in await amem.store.pending_originals(NS)] == ["car"]
    monkeypatch.setattr(amem.objects, "delete", real_delete)
    await amem.maintain()
    assert await amem.objects.list(NS) == []
    assert await amem.store.pending_originals(NS) == []


@pytest.mark.parametrize("write", ["replace", "restore"])
async def test_replace_and_restore_leave_no_unnamed_original(
    amem: AsyncTieredMemory, monkeypatch: pytest.MonkeyPatch, write: str
) -> None:
    await _archived(amem)
    real_delete = amem.objects.delete

    async def unreachable(namespace: str, key: str) -> None:
        raise BackendUnavailableError("object storage is down")

    monkeypatch.setattr(amem.objects, "delete", unreachable)
    if write == "replace":
        await amem.upsert("Parked on level 1, bay A2", id="car", namespace=NS)
    else:
        await amem.restore_archive(["car"], namespace=NS)
    assert (await amem.get("car", namespace=NS)) is not None
    assert [o.id for o in await amem.store.pending_originals(NS)] == ["car"]
    monkeypatch.setattr(amem.objects, "delete", real_delete)
    await amem.maintain()
    assert await amem.objects.list(NS) == []
    assert await amem.store.pending_originals(NS) == []


async def test_an_original_a_record_names_is_never_deleted(amem: AsyncTieredMemory) -> None:
    """A queued original whose record is still there (a store without transactions
    queues before it deletes) stays, and so does its entry."""
    key = await _archived(amem)
    (record,) = (await amem.store.get_archives(NS, ["car"])).values()
    entry = PendingOriginal("car", record.checksum)
    await amem.store.queue_originals(NS, [entry])
    assert await amem.archiver.delete_pending(NS, [entry]) == 0
    assert await amem.objects.list(NS) == [key]
    assert await amem.store.pending_originals(NS) == [entry]
    await amem.forget("car", namespace=NS, hard=True)
    assert await amem.objects.list(NS) == []
    assert await amem.store.pending_originals(NS) == []


async def test_the_queue_is_per_namespace(
    amem: AsyncTieredMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _archived(amem, ns="a")
    await _archived(amem, ns="b")
    Outage(amem, monkeypatch)
    await amem.forget("car", namespace="a", hard=True)
    await amem.forget("car", namespace="b", hard=True)
    assert await amem.store.pending_namespaces() == ["a", "b"]
    assert (await amem.stats(namespace="a")).total == 0
    await amem.store.clear("a")
    assert await amem.store.pending_originals("a") == []
    assert [o.id for o in await amem.store.pending_originals("b")] == ["car"]
    assert await amem.store.pending_namespaces() == ["b"]


async def test_a_cluster_summary_is_handed_on_once_the_object_store_is_back(
    tmp_path: Path, clock: ManualClock, memories: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    amem = await open_clustering(memories, tmp_path / "c.db", clock)
    try:
        added = await due_cluster(amem, clock, NS)
        assert (await amem.maintain()).count("archive_clusters") == 1
        records = await amem.store.get_archives(NS, [m.id for m in added])
        (head,) = [r for r in records.values() if r.summary_embedding is not None]
        (mate,) = [r for r in records.values() if r.summary_embedding is None]
        outage = Outage(amem, monkeypatch)
        await amem.forget(head.id, namespace=NS, hard=True)
        assert (await amem.store.get_archives(NS, [mate.id]))[mate.id].summary_embedding is None
        outage.down = False
        report = await amem.maintain()
        assert report.errors == []
        after = (await amem.store.get_archives(NS, [mate.id]))[mate.id]
        assert after.summary_embedding is not None  # the cluster is found again
        hits: Any = await amem.search("run in the park", namespace=NS, include_archived=True)
        assert mate.id in {h.id for h in hits}
        assert len(await amem.objects.list(NS)) == 1  # the mate's own original stays
    finally:
        await amem.close()
