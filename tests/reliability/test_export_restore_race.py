"""An export that meets a restore of another process (a leftover of issue 16's snapshot
reads).

An export reads the namespace in one snapshot, then the original of each archived
memory from object storage. A restore elsewhere brings a memory back live and deletes
its original right after its commit. An export whose snapshot still saw the memory
archived then found no original, wrote the record without it, and an import of that
document had lost the memory's text. Now the export reads such a memory again after
its snapshot: restored, it is exported as the live memory it has become.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tiered_memory import HashingEmbedder, ManualClock, TieredMemory
from tiered_memory.models import ArchiveRecord
from tiered_memory.transfer import export_namespace, import_document

from .harness import T0

NS = "race"


def test_a_memory_restored_while_an_export_reads_is_exported_whole(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    reader = TieredMemory.embedded(db, embedder=HashingEmbedder(), clock=ManualClock(T0))
    writer = TieredMemory.embedded(db, embedder=HashingEmbedder(), clock=ManualClock(T0))
    target = TieredMemory.embedded(
        tmp_path / "copy.db", embedder=HashingEmbedder(), clock=ManualClock(T0)
    )
    try:
        kept = reader.add("the boat is moored at pier nine", namespace=NS)
        moved = reader.add("the vault code is 4512, changed every March", namespace=NS)
        assert reader.archive([kept.id, moved.id], namespace=NS) == 2
        archiver = reader.aio.archiver
        real = archiver.original
        restored: list[str] = []

        async def restored_meanwhile(ns: str, record: ArchiveRecord) -> Any:
            if record.id == moved.id and not restored:
                # another connection restores it after the export's snapshot began
                restored.append(record.id)
                assert writer.restore_archive([record.id], namespace=NS) == 1
            return await real(ns, record)

        archiver.original = restored_meanwhile  # type: ignore[method-assign]
        document = reader.run(export_namespace(reader.aio, NS))
        assert restored == [moved.id]

        ids = [m["id"] for m in document["memories"]]
        ids += [a["record"]["id"] for a in document["archives"]]
        assert sorted(ids) == sorted([kept.id, moved.id])  # each once
        assert all(a["original"] is not None for a in document["archives"])

        target.run(import_document(target.aio, document, namespace=NS))
        back = target.get(moved.id, namespace=NS)
        assert back is not None
        assert back.content == moved.content
        assert target.expand(kept.id, namespace=NS)["content"] == kept.content
    finally:
        for mem in (reader, writer, target):
            mem.close()
