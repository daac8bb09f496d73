"""The SQLite store's queue of originals to delete from object storage
(`ports.PendingOriginal`): one row per (namespace, id, checksum), written in the
transaction of the write that let go of the original, removed once it is deleted
(`tiered_memory.archive.Archiver.delete_pending`)."""

from __future__ import annotations

from collections.abc import Sequence

from tiered_memory.ports import PendingOriginal
from tiered_memory.validation import check_namespace

from .database import SQLiteDatabase

_QUEUE = (
    "INSERT INTO pending_originals (namespace, id, checksum, hand_on) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (namespace, id, checksum) DO UPDATE SET "
    "hand_on = max(hand_on, excluded.hand_on)"
)


class PendingOriginals:
    """The `pending_originals` table of one open file (the port's queue calls)."""

    def __init__(self, database: SQLiteDatabase) -> None:
        self._db = database

    async def queue_originals(self, namespace: str, originals: Sequence[PendingOriginal]) -> None:
        ns = check_namespace(namespace)
        if not originals:
            return
        await self._db.gate()
        with self._db.write() as conn:
            conn.executemany(_QUEUE, [(ns, o.id, o.checksum, int(o.hand_on)) for o in originals])

    async def pending_originals(self, namespace: str, *, limit: int = 500) -> list[PendingOriginal]:
        ns = check_namespace(namespace)
        if limit < 1:
            return []
        await self._db.gate()
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT id, checksum, hand_on FROM pending_originals WHERE namespace = ? "
                "ORDER BY id, checksum LIMIT ?",
                (ns, limit),
            ).fetchall()
        return [PendingOriginal(str(r[0]), str(r[1]), bool(r[2])) for r in rows]

    async def drop_pending_originals(
        self, namespace: str, originals: Sequence[PendingOriginal]
    ) -> int:
        ns = check_namespace(namespace)
        if not originals:
            return 0
        await self._db.gate()
        dropped = 0
        with self._db.write() as conn:
            for o in originals:
                dropped += conn.execute(
                    "DELETE FROM pending_originals WHERE namespace = ? AND id = ? AND checksum = ?",
                    (ns, o.id, o.checksum),
                ).rowcount
        return dropped

    async def pending_namespaces(self) -> list[str]:
        await self._db.gate()
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT DISTINCT namespace FROM pending_originals ORDER BY 1"
            ).fetchall()
        return [str(row[0]) for row in rows]
