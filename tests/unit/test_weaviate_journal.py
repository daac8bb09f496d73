"""The Weaviate store's archival journal, offline: the row mapping, and a claim that
another process overwrote before it was read back (Weaviate has no compare-and-set)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

from tiered_memory import journal
from tiered_memory.backends.weaviate.mapping import archival_from_properties, archival_to_properties
from tiered_memory.backends.weaviate.store import WeaviateMemoryStore
from tiered_memory.models import Memory
from tiered_memory.ports import ArchivalState

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_a_journal_row_round_trips() -> None:
    state = ArchivalState(
        id="m-1 ünï",
        claimant="host/42/abc",
        claimed_until=T0 + timedelta(minutes=15, microseconds=7),
        written=("a" * 64, "b" * 64),
        failures=2,
        error="SummarizerRequestError: Claude rejected it (400)",
        failed_at=T0,
        quarantined=True,
    )
    assert archival_from_properties(archival_to_properties(state)) == state
    bare = ArchivalState(id="x")
    assert archival_from_properties(archival_to_properties(bare)) == bare


class Raced(WeaviateMemoryStore):
    """The journal in a dict; `rival` overwrites a claim right after ours is written."""

    def __init__(self, live: set[str], rival: str | None = None) -> None:
        super().__init__(url="http://localhost:1", prefix="TmUnit")
        self.rows: dict[str, ArchivalState] = {}
        self.live, self.rival = live, rival

    async def _current(
        self, namespace: str, ids: Sequence[str], *, vectors: bool
    ) -> tuple[dict[str, Memory], dict[str, list[Memory]]]:
        found = {
            i: Memory(id=i, namespace=namespace, content=i, created_at=T0, updated_at=T0)
            for i in ids
            if i in self.live
        }
        return found, {i: [m] for i, m in found.items()}

    async def _journal(self, namespace: str, ids: Sequence[str] | None) -> dict[str, ArchivalState]:
        return {i: s for i, s in self.rows.items() if ids is None or i in ids}

    async def _journal_apply(self, namespace: str, changes: journal.Changes) -> None:
        self.rows.update((s.id, s) for s in changes.write)
        for memory_id in changes.delete:
            self.rows.pop(memory_id, None)
        if self.rival is not None:
            for memory_id in list(self.rows):
                self.rows[memory_id] = ArchivalState(id=memory_id, claimant=self.rival)


async def test_a_claim_overwritten_before_the_read_back_is_not_held() -> None:
    store = Raced({"a", "b"}, rival="other-process")
    until = T0 + timedelta(minutes=15)
    assert await store.claim_archival("ns", ["a", "b"], claimant="me", until=until, now=T0) == {}


async def test_a_claim_read_back_intact_is_held() -> None:
    store = Raced({"a"})
    until = T0 + timedelta(minutes=15)
    claimed = await store.claim_archival("ns", ["a", "ghost"], claimant="me", until=until, now=T0)
    assert set(claimed) == {"a"}
    assert store.rows["a"].claimant == "me"
    assert await store.note_archival("ns", "me", {"a": "c" * 64}) == {"a"}
    assert await store.release_archival("ns", "me", ["a"], now=T0, quarantine_after=3) == []
    assert store.rows["a"] == ArchivalState(id="a", written=("c" * 64,))
