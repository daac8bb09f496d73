"""What must hold of an embedded store after any crash, race or outage.

`check_store` reads the whole state of a store on the SQLite file (memories, archive
records, links, archived originals) and asserts, for a manifest of every memory ever
added (namespace -> id -> content):

- every id is in exactly one place: live (HOT/WARM/COLD) with its content intact, or
  ARCHIVED with an original whose sha256 and size match the record and whose content
  is the memory's;
- no id is both live and archived; no archive record lacks its original;
- an original without a record (a run that stopped between writing it and writing
  the record) belongs to a live memory (COLD when the sweep wrote it; any tier for an
  explicit `archive()`), holds that memory's content, and is named in the memory's
  archival journal (so the next attempt, or deleting the memory, deletes it);
- journal rows belong to live memories, and only a killed process leaves a claim;
- no link touches an id that is not live in the link's namespace, and every link is
  stored in both directions (on the SQLite graph; a Bolt graph is read through the
  port: every link of every id the namespace ever held);
- the counts of `stats()` and `namespaces()` agree with what is there;
- the file passes SQLite's integrity check.

Ids the library itself creates (consolidation summaries) are allowed besides the
manifest, and reported.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from tiered_memory import ArchiveRecord, AsyncTieredMemory, Memory, Tier
from tiered_memory.archival import exited
from tiered_memory.archive import decode_document, key_owner, original_key, sha256_hex
from tiered_memory.backends.sqlite.graph import SQLiteAssociationGraph
from tiered_memory.backends.sqlite.store import SQLiteMemoryStore
from tiered_memory.models import LIVE_TIERS
from tiered_memory.ports import ScanQuery

Manifest = Mapping[str, Mapping[str, str]]  # namespace -> id -> content
PAGE = 1000
LIBRARY_SOURCES = frozenset({"consolidation"})


@dataclass
class Snapshot:
    """The state `check_store` found (after its assertions passed)."""

    live: dict[tuple[str, str], Memory] = field(default_factory=dict)
    archived: dict[tuple[str, str], ArchiveRecord] = field(default_factory=dict)
    orphans: set[tuple[str, str]] = field(default_factory=set)  # originals without records
    extras: set[tuple[str, str]] = field(default_factory=set)  # ids the library created
    claims: set[tuple[str, str]] = field(default_factory=set)  # held by killed processes
    links: int = 0

    def tiers(self) -> Counter[Tier]:
        counts: Counter[Tier] = Counter(m.tier for m in self.live.values())
        counts[Tier.ARCHIVED] = len(self.archived)
        return counts

    def ids(self, namespace: str) -> set[str]:
        return {i for ns, i in (*self.live, *self.archived) if ns == namespace}


async def all_live(engine: AsyncTieredMemory, ns: str) -> list[Memory]:
    out: list[Memory] = []
    after: str | None = None
    while True:
        page = await engine.store.scan(ns, ScanQuery(tiers=LIVE_TIERS, after_id=after, limit=PAGE))
        out.extend(page)
        if len(page) < PAGE:
            return out
        after = page[-1].id


async def all_archived(engine: AsyncTieredMemory, ns: str) -> list[ArchiveRecord]:
    out: list[ArchiveRecord] = []
    after: str | None = None
    while True:
        page = await engine.store.scan_archives(ns, after_id=after, limit=PAGE)
        out.extend(page)
        if len(page) < PAGE:
            return out
        after = page[-1].id


def sqlite_store(engine: AsyncTieredMemory) -> SQLiteMemoryStore:
    store = engine.store
    inner = getattr(store, "_inner", store)  # the crash child's tracing proxy
    assert isinstance(inner, SQLiteMemoryStore), type(inner)
    return inner


async def check_store(
    engine: AsyncTieredMemory,
    manifest: Manifest,
    *,
    verified: dict[tuple[str, str], str] | None = None,
) -> Snapshot:
    """Assert every invariant of the module docstring; returns what was found.

    `verified` caches (namespace, id) -> checksum of originals already read back and
    checked by an earlier call, so repeated checks over a remote object store only
    fetch what is new (a record never changes its checksum once written).
    """
    snap = Snapshot()
    db = sqlite_store(engine).database
    with db.read() as conn:
        assert [r[0] for r in conn.execute("PRAGMA integrity_check")] == ["ok"]
        both = conn.execute(
            "SELECT m.namespace, m.id FROM memories AS m JOIN archives AS a "
            "ON a.namespace = m.namespace AND a.id = m.id"
        ).fetchall()
        assert not both, f"live and archived at once: {[tuple(r) for r in both][:5]}"
        # schema 3: a memory and its vector are written and deleted in one transaction
        orphans = conn.execute(
            "SELECT count(*) FROM memory_vectors AS v "
            "WHERE NOT EXISTS (SELECT 1 FROM memories AS m WHERE m.pk = v.pk)"
        ).fetchone()[0]
        assert orphans == 0, f"{orphans} vectors without their memory"
        bare = conn.execute(
            "SELECT m.namespace, m.id FROM memories AS m "
            "WHERE NOT EXISTS (SELECT 1 FROM memory_vectors AS v WHERE v.pk = m.pk)"
        ).fetchall()
        assert not bare, f"memories without their vector: {[tuple(r) for r in bare][:5]}"
        link_rows = {
            (r[0], r[1], r[2])
            for r in conn.execute("SELECT namespace, source, target FROM links").fetchall()
        }
    graph = getattr(engine.graph, "_inner", engine.graph)  # the crash child's tracing proxy
    in_file = isinstance(graph, SQLiteAssociationGraph)

    stored_namespaces = set(await engine.store.namespaces())
    namespaces = set(manifest) | stored_namespaces
    for ns in sorted(namespaces):
        expected = manifest.get(ns, {})
        live = {m.id: m for m in await all_live(engine, ns)}
        archived = {r.id: r for r in await all_archived(engine, ns)}
        for memory_id in expected:
            where = (memory_id in live) + (memory_id in archived)
            assert where == 1, f"{ns}/{memory_id} is in {where} places (lost if 0)"
        for memory_id, memory in live.items():
            assert memory.namespace == ns
            assert memory.tier in LIVE_TIERS
            if memory_id in expected:
                assert memory.content == expected[memory_id], f"{ns}/{memory_id} content changed"
            else:
                assert memory.source in LIBRARY_SOURCES, f"unknown live id {ns}/{memory_id}"
                snap.extras.add((ns, memory_id))
            snap.live[(ns, memory_id)] = memory
        for memory_id, record in archived.items():
            if memory_id not in expected:
                assert record.source in LIBRARY_SOURCES, f"unknown archived id {ns}/{memory_id}"
                snap.extras.add((ns, memory_id))
            assert record.storage_verified
            snap.archived[(ns, memory_id)] = record

        stored = set(await engine.objects.list(ns))
        journal = await engine.store.archival_states(ns)
        for memory_id, record in archived.items():
            key = original_key(memory_id, record.checksum)
            assert key in stored or memory_id in stored, (
                f"archive record without its original: {ns}/{memory_id}"
            )
            stored.discard(key if key in stored else memory_id)
            if verified is not None and verified.get((ns, memory_id)) == record.checksum:
                continue
            data = await engine.archiver.verified_original(ns, record)  # size and sha256
            document = decode_document(data, expected_id=memory_id)
            assert document["namespace"] == ns
            if memory_id in expected:
                assert document["content"] == expected[memory_id]
            if verified is not None:
                verified[(ns, memory_id)] = record.checksum
        for key in stored:  # originals no record points at: unfinished attempts
            memory_id = key_owner(key)
            assert memory_id in live, f"an original of {ns}/{memory_id}, which is nowhere else"
            checksum = key[len(memory_id) + 1 :]
            written = journal[memory_id].written if memory_id in journal else ()
            assert checksum in written, f"an original of {ns}/{memory_id} the journal lost"
            data = await engine.objects.get(ns, key)
            assert sha256_hex(data) == checksum
            document = decode_document(data, expected_id=memory_id)
            assert document["content"] == live[memory_id].content
            snap.orphans.add((ns, memory_id))
        for memory_id, state in journal.items():
            assert memory_id in live, f"a journal row of {ns}/{memory_id}, which is not live"
            if state.claimant is not None:  # only a killed process leaves its claims
                assert exited(state.claimant), f"{ns}/{memory_id} claimed by {state.claimant}"
                snap.claims.add((ns, memory_id))

        if not in_file:  # links live on a server: read those of every id ever held here
            ids = sorted(set(expected) | set(live) | set(archived) | set(journal))
            for link in await graph.links_of(ns, ids):
                link_rows.add((ns, link.source, link.target))

        stats = await engine.stats(namespace=ns)
        assert stats.total == len(live) + len(archived)
        assert stats.tiers[Tier.ARCHIVED].count == len(archived)
        by_tier = Counter(m.tier for m in live.values())
        for tier in LIVE_TIERS:
            assert stats.tiers[tier].count == by_tier[tier], (ns, tier)

    for ns, source, target in link_rows:
        for end in (source, target):
            assert (ns, end) in snap.live, f"dangling link {ns}: {source} - {target} ({end})"
        assert (ns, target, source) in link_rows, f"one-way link {ns}: {source} -> {target}"
    snap.links = len(link_rows) // 2
    assert stored_namespaces == {ns for ns, _ in (*snap.live, *snap.archived)}
    return snap
