"""Archived memories obey the query (issue 16, item 7).

A filtered deep search or recall returns no archived record outside the filter, and a
plain recall injects an archived summary only when it is close to the query
(`RetrievalPolicy.archive_min_cosine`), always marked as archived.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.matrix import MemoryFactory
from tests.schema_7 import put_texts_back
from tiered_memory import HashingEmbedder, ManualClock, Policy, TieredMemory
from tiered_memory.backends.sqlite.migrations import SCHEMA_VERSION
from tiered_memory.models import MemoryType, Tier
from tiered_memory.policy import ArchivalPolicy, RetrievalPolicy
from tiered_memory.ports import MemoryPatch, MetadataFilter

from .conftest import START

NS = "archq"
QUERY = "archived travel notebook entry"
TOPICS = ("work", "home", "travel")
TAGS = ("red", "blue", "green")
TYPES = tuple(MemoryType)


def _catalogue() -> list[dict[str, Any]]:
    """Twelve memories of every type, topic, year and tag mix, all near QUERY."""
    out = []
    for i in range(12):
        metadata: dict[str, Any] = {"topic": TOPICS[i % 3], "year": 2000 + i}
        if i % 4:
            metadata["tags"] = [TAGS[j] for j in range(3) if (i >> j) & 1]
        out.append(
            {
                "content": f"Archived travel notebook entry {i}: item number {i * 7} was noted",
                "memory_type": TYPES[i % len(TYPES)],
                "metadata": metadata,
            }
        )
    return out


def _matches(memory: dict[str, Any], condition: MetadataFilter) -> bool:
    """The port's metadata semantics, for the plain values this test uses."""
    meta = memory["metadata"]
    present = condition.key in meta
    value = meta.get(condition.key)
    op, wanted = condition.op, condition.value
    if op == "exists":
        return present == (wanted is None or bool(wanted))
    if op == "eq":
        return present and value == wanted
    if op == "ne":
        return not (present and value == wanted)
    if op == "in":
        return present and value in wanted
    if op == "nin":
        return not (present and value in wanted)
    if op == "contains":
        return present and isinstance(value, list) and wanted in value
    if not present:
        return False
    return {
        "gt": value > wanted,
        "gte": value >= wanted,
        "lt": value < wanted,
        "lte": value <= wanted,
    }[op]


conditions = st.one_of(
    st.builds(
        MetadataFilter,
        st.just("topic"),
        st.sampled_from(["eq", "ne"]),
        st.sampled_from(TOPICS),
    ),
    st.builds(
        MetadataFilter,
        st.just("topic"),
        st.sampled_from(["in", "nin"]),
        st.lists(st.sampled_from(TOPICS), min_size=1, max_size=2, unique=True),
    ),
    st.builds(
        MetadataFilter,
        st.just("year"),
        st.sampled_from(["eq", "gt", "gte", "lt", "lte"]),
        st.integers(1998, 2013),
    ),
    st.builds(MetadataFilter, st.just("tags"), st.just("contains"), st.sampled_from(TAGS)),
    st.builds(MetadataFilter, st.just("tags"), st.just("exists"), st.booleans()),
)


class Archive:
    """One store: every catalogue memory archived (two of them forgotten, two
    superseded first), and two live memories that match nothing in particular."""

    def __init__(self, memories: MemoryFactory, tmp_path: Path) -> None:
        self.mem = memories.open_sync(
            tmp_path / "memory.db", embedder=HashingEmbedder(), clock=ManualClock(START)
        )
        self.catalogue = _catalogue()
        self.by_id: dict[str, dict[str, Any]] = {}
        for item in self.catalogue:
            memory = self.mem.add(namespace=NS, **item)
            self.by_id[memory.id] = item
        ids = list(self.by_id)
        self.forgotten = set(ids[:2])
        self.superseded = set(ids[2:4])
        for memory_id in self.forgotten:
            self.mem.forget(memory_id, namespace=NS)
        store = self.mem.aio.store
        self.mem.run(
            store.patch_many(NS, sorted(self.superseded), MemoryPatch(superseded_by=ids[-1]))
        )
        assert self.mem.archive(ids, namespace=NS) == len(ids)
        self.mem.add("Quarterly budget spreadsheet reviewed", namespace=NS)
        self.mem.add("Dentist appointment moved to Friday", namespace=NS)

    def allowed(
        self,
        memory_types: list[MemoryType] | None,
        metadata: list[MetadataFilter],
        ids: list[str] | None,
        *,
        forgotten: bool,
        superseded: bool,
    ) -> set[str]:
        return {
            i
            for i, item in self.by_id.items()
            if (memory_types is None or item["memory_type"] in memory_types)
            and all(_matches(item, c) for c in metadata)
            and (ids is None or i in ids)
            and (forgotten or i not in self.forgotten)
            and (superseded or i not in self.superseded)
        }


def test_filtered_deep_search_and_recall_return_no_archived_record_outside_the_filter(
    tmp_path: Path, memories: MemoryFactory
) -> None:
    archive = Archive(memories, tmp_path)
    mem, all_ids = archive.mem, sorted(archive.by_id)

    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        database=None,
    )
    @given(
        memory_types=st.none() | st.lists(st.sampled_from(TYPES), min_size=1, unique=True),
        metadata=st.lists(conditions, max_size=2),
        ids=st.none() | st.lists(st.sampled_from(all_ids), unique=True),
        include_forgotten=st.booleans(),
    )
    def check(
        memory_types: list[MemoryType] | None,
        metadata: list[MetadataFilter],
        ids: list[str] | None,
        include_forgotten: bool,
    ) -> None:
        query: dict[str, Any] = {
            "namespace": NS,
            "memory_types": memory_types,
            "metadata": metadata or None,
            "ids": ids,
        }
        # deep: superseded memories are searched too; forgotten ones only when asked
        deep_ok = archive.allowed(
            memory_types, metadata, ids, forgotten=include_forgotten, superseded=True
        )
        hits = mem.search(QUERY, deep=True, k=50, include_forgotten=include_forgotten, **query)
        archived = {h.memory.id for h in hits if h.archived}
        assert archived <= deep_ok
        assert bool(archived) == bool(deep_ok)  # the filter did not hide the ones it allows

        # explicit tiers: every allowed record, filtered before k (not deep: no superseded)
        plain_ok = archive.allowed(
            memory_types, metadata, ids, forgotten=include_forgotten, superseded=False
        )
        only = mem.search(
            QUERY, tiers=["archived"], k=50, include_forgotten=include_forgotten, **query
        )
        assert {h.memory.id for h in only} == plain_ok
        assert all(h.tier is Tier.ARCHIVED and h.phase == 4 for h in only)

        # recall cannot include forgotten memories: they are never injected
        never_forgotten = archive.allowed(
            memory_types, metadata, ids, forgotten=False, superseded=True
        )
        injection = mem.recall(QUERY, deep=True, record_use=False, **query)
        assert {h.memory.id for h in injection.items if h.archived} <= never_forgotten

    try:
        check()
    finally:
        mem.close()


def test_forgotten_memories_stay_out_of_recall_once_archived(
    tmp_path: Path, memories: MemoryFactory
) -> None:
    archive = Archive(memories, tmp_path)
    mem = archive.mem
    try:
        for memory_id in archive.forgotten:
            summary = archive.by_id[memory_id]["content"]
            for deep in (False, True):
                injection = mem.recall(summary, namespace=NS, deep=deep, record_use=False)
                assert memory_id not in {h.memory.id for h in injection.items}
                hits = mem.search(summary, namespace=NS, deep=deep)
                assert memory_id not in {h.memory.id for h in hits}
            hits = mem.search(summary, namespace=NS, deep=True, include_forgotten=True)
            assert memory_id in {h.memory.id for h in hits if h.archived}
    finally:
        mem.close()


def test_superseded_archives_join_only_deep_searches(
    tmp_path: Path, memories: MemoryFactory
) -> None:
    archive = Archive(memories, tmp_path)
    mem = archive.mem
    try:
        for memory_id in archive.superseded:
            summary = archive.by_id[memory_id]["content"]
            injection = mem.recall(summary, namespace=NS, record_use=False)
            assert memory_id not in {h.memory.id for h in injection.items}
            deep = mem.recall(summary, namespace=NS, deep=True, record_use=False)
            assert memory_id in {h.memory.id for h in deep.items if h.archived}
    finally:
        mem.close()


# -- the relevance threshold of a plain recall -------------------------------------------


def _one_archived(
    memories: MemoryFactory, tmp_path: Path, policy: Policy | None = None
) -> tuple[TieredMemory, str]:
    mem = memories.open_sync(
        tmp_path / "threshold.db",
        embedder=HashingEmbedder(),
        clock=ManualClock(START),
        policy=policy,
    )
    old = mem.add("The user's first employer was Acme Rockets in Leeds", namespace=NS)
    assert mem.archive([old.id], namespace=NS) == 1
    mem.add("Weekly grocery list: oat milk and rye bread", namespace=NS)
    return mem, old.id


WEAK = "what is the weather like on mars today"  # cosine ~0.13 to the archived summary
STRONG = "Acme Rockets in Leeds was the user's first employer"


def test_a_weakly_related_archive_is_never_injected_by_a_plain_recall(
    tmp_path: Path, memories: MemoryFactory
) -> None:
    mem, archived_id = _one_archived(memories, tmp_path)
    try:
        injection = mem.recall(WEAK, namespace=NS, record_use=False)
        assert [h for h in injection.items if h.archived] == []
        assert "[archived" not in injection.text
        assert [h for h in mem.search(WEAK, namespace=NS) if h.archived] == []
        # asking for the archive still finds it (above the noise floor)
        for kwargs in ({"deep": True}, {"include_archived": True}):
            hits = mem.search(WEAK, namespace=NS, **kwargs)
            assert archived_id in {h.memory.id for h in hits if h.archived}
    finally:
        mem.close()


def test_a_strongly_related_archive_joins_a_plain_recall_marked(
    tmp_path: Path, memories: MemoryFactory
) -> None:
    mem, archived_id = _one_archived(memories, tmp_path)
    try:
        injection = mem.recall(STRONG, namespace=NS, record_use=False)
        archived = [h for h in injection.items if h.archived]
        assert [h.memory.id for h in archived] == [archived_id]
        hit = archived[0]
        assert (hit.tier, hit.phase) == (Tier.ARCHIVED, 4)
        assert hit.terms.cosine >= mem.policy.retrieval.archive_min_cosine
        assert f"- [archived id={archived_id}] The user's first employer" in injection.text
    finally:
        mem.close()


def test_the_threshold_is_the_policy_field(tmp_path: Path, memories: MemoryFactory) -> None:
    """The archived summary's cosine to the query decides, against the policy's bar."""
    mem, archived_id = _one_archived(memories, tmp_path)
    try:
        hits = mem.search(WEAK, namespace=NS, include_archived=True)
        cosine = next(h.terms.cosine for h in hits if h.memory.id == archived_id)
    finally:
        mem.close()
    for bar, joins in ((cosine - 0.01, True), (cosine + 0.01, False)):
        policy = Policy(retrieval=RetrievalPolicy(archive_min_cosine=bar))
        mem, archived_id = _one_archived(memories, tmp_path / f"{bar:.3f}", policy)
        try:
            injection = mem.recall(WEAK, namespace=NS, record_use=False)
            assert (archived_id in {h.memory.id for h in injection.items}) is joins
        finally:
            mem.close()


# -- records archived before they kept their memory's flags --------------------------------


def _as_before_flags(path: Path) -> None:
    """Turn the file's archive table back into its layout before the flag columns."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("DROP INDEX IF EXISTS archives_flags_unknown")
        conn.execute("ALTER TABLE archives DROP COLUMN do_not_inject")
        conn.execute("ALTER TABLE archives DROP COLUMN superseded")
        conn.commit()
    finally:
        conn.close()


def test_an_older_file_gets_the_flags_from_the_originals(
    tmp_path: Path, memories: MemoryFactory
) -> None:
    """Opening a file whose records predate the flags adds them as unknown (searched as
    before); the next sweep reads them from the verified originals, and from then on a
    forgotten memory's summary stays out of recall."""
    path = tmp_path / "memory.db"
    mem = memories.open_sync(path, embedder=HashingEmbedder(), clock=ManualClock(START))
    gone = mem.add("The locker combination is four seven one nine", namespace=NS)
    kept = mem.add("The bike lock code is two two eight", namespace=NS)
    mem.forget(gone.id, namespace=NS)
    assert mem.archive([gone.id, kept.id], namespace=NS) == 2
    mem.close()
    _as_before_flags(path)

    mem = memories.open_sync(path, embedder=HashingEmbedder(), clock=ManualClock(START))
    try:
        records = mem.run(mem.aio.store.get_archives(NS, [gone.id, kept.id]))
        assert {(r.do_not_inject, r.superseded) for r in records.values()} == {(None, None)}
        # unknown flags read as not forgotten: the old behaviour, until the sweep
        hits = mem.search(gone.content, namespace=NS, deep=True)
        assert gone.id in {h.memory.id for h in hits}

        report = mem.maintain()
        assert report.count("archive_flags_filled") == 2
        assert not report.errors
        records = mem.run(mem.aio.store.get_archives(NS, [gone.id, kept.id]))
        assert (records[gone.id].do_not_inject, records[gone.id].superseded) == (True, False)
        assert (records[kept.id].do_not_inject, records[kept.id].superseded) == (False, False)
        assert mem.maintain().count("archive_flags_filled") == 0  # nothing left to fill

        for deep in (False, True):
            injection = mem.recall(gone.content, namespace=NS, deep=deep, record_use=False)
            assert gone.id not in {h.memory.id for h in injection.items}
        injection = mem.recall(kept.content, namespace=NS, record_use=False)
        assert kept.id in {h.memory.id for h in injection.items if h.archived}
    finally:
        mem.close()


def test_the_backfill_keeps_each_record_s_calibrated_score(
    tmp_path: Path, memories: MemoryFactory
) -> None:
    """Filling the flags rewrites the record as read; its summary code (and so its
    score) must stay the one archival wrote, not the code of the read-back vector."""
    path = tmp_path / "memory.db"
    mem = memories.open_sync(path, embedder=HashingEmbedder(), clock=ManualClock(START))
    old = mem.add("Grandmother's apple cake needs six cooking apples", namespace=NS)
    assert mem.archive([old.id], namespace=NS) == 1
    before = mem.search(old.content, namespace=NS, tiers=["archived"])[0].terms.cosine
    mem.close()
    _as_before_flags(path)
    mem = memories.open_sync(path, embedder=HashingEmbedder(), clock=ManualClock(START))
    try:
        assert mem.maintain().count("archive_flags_filled") == 1
        after = mem.search(old.content, namespace=NS, tiers=["archived"])[0].terms.cosine
        assert after == pytest.approx(before, abs=1e-6)
        mem.expand(old.id, namespace=NS)  # an expansion rewrites the record too
        again = mem.search(old.content, namespace=NS, tiers=["archived"])[0].terms.cosine
        assert again == pytest.approx(before, abs=1e-6)
    finally:
        mem.close()


def _as_version_3(path: Path) -> None:
    """Turn the file back into schema version 3: no archival journal, no flag columns,
    the texts in `memories`."""
    _as_before_flags(path)
    conn = sqlite3.connect(path)
    try:
        put_texts_back(conn)
        conn.execute("DROP TRIGGER memories_archival_delete")
        conn.execute("DROP TABLE archival")
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
        conn.commit()
    finally:
        conn.close()


def _under_the_plain_id(mem: TieredMemory, memory_id: str) -> None:
    """Move a record's original to where archival kept it before content addressing
    (`<id>`), and point the record there."""
    amem = mem.aio
    record = mem.run(amem.store.get_archives(NS, [memory_id]))[memory_id]
    key, data = mem.run(amem.archiver.original(NS, record))
    assert key != memory_id  # content-addressed: `<id>@<sha256>`
    mem.run(amem.objects.put(NS, memory_id, data))
    mem.run(amem.objects.delete(NS, key))
    moved = record.model_copy(update={"storage_ref": amem.objects.ref(NS, memory_id)})
    mem.run(amem.store.update_archive(NS, moved))


def test_a_version_3_file_gets_the_columns_and_flags_from_originals_under_the_plain_id(
    tmp_path: Path, memories: MemoryFactory
) -> None:
    """A file of schema 3 (no journal, no flag columns) whose originals sit under the
    memory's id, as before content addressing: opened, it is upgraded to this version
    with the flags unknown; the sweep reads them from those originals; restore still
    finds them."""
    path = tmp_path / "memory.db"
    mem = memories.open_sync(path, embedder=HashingEmbedder(), clock=ManualClock(START))
    gone = mem.add("The safe deposit box number is 3141", namespace=NS)
    kept = mem.add("The spare house key is under the blue flowerpot", namespace=NS)
    mem.forget(gone.id, namespace=NS)
    assert mem.archive([gone.id, kept.id], namespace=NS) == 2
    for memory_id in (gone.id, kept.id):
        _under_the_plain_id(mem, memory_id)
    mem.close()
    _as_version_3(path)

    mem = memories.open_sync(path, embedder=HashingEmbedder(), clock=ManualClock(START))
    try:
        with mem.aio.store.database.read() as conn:
            version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'")
            assert int(version.fetchone()[0]) == SCHEMA_VERSION
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
            assert {"archival", "archives_flags_unknown"} <= tables
        records = mem.run(mem.aio.store.get_archives(NS, [gone.id, kept.id]))
        assert {(r.do_not_inject, r.superseded) for r in records.values()} == {(None, None)}

        report = mem.maintain()
        assert report.count("archive_flags_filled") == 2
        assert not report.errors
        records = mem.run(mem.aio.store.get_archives(NS, [gone.id, kept.id]))
        assert (records[gone.id].do_not_inject, records[gone.id].superseded) == (True, False)
        assert (records[kept.id].do_not_inject, records[kept.id].superseded) == (False, False)
        injection = mem.recall(gone.content, namespace=NS, deep=True, record_use=False)
        assert gone.id not in {h.memory.id for h in injection.items}

        assert mem.restore_archive([kept.id], namespace=NS) == 1
        assert mem.get(kept.id, namespace=NS).content == kept.content
    finally:
        mem.close()


def test_an_unreadable_original_is_reported_and_does_not_hold_up_the_rest(
    tmp_path: Path, memories: MemoryFactory
) -> None:
    """The backfill fills `batch_size` records per run; a record whose original is gone
    is reported each run and stays unknown, while the ones after it are still filled."""
    path = tmp_path / "memory.db"
    policy = Policy(archival=ArchivalPolicy(batch_size=2))
    mem = memories.open_sync(
        path, embedder=HashingEmbedder(), clock=ManualClock(START), policy=policy
    )
    added = [
        mem.add(f"Travel journal page {i}: the train left platform {i + 2}", namespace=NS)
        for i in range(4)
    ]
    ids = sorted(m.id for m in added)
    broken, forgotten = ids[0], ids[2]  # the broken one comes first in the scan
    mem.forget(forgotten, namespace=NS)
    assert mem.archive(ids, namespace=NS) == 4
    record = mem.run(mem.aio.store.get_archives(NS, [broken]))[broken]
    mem.run(mem.aio.archiver.delete_original(NS, record))
    mem.close()
    _as_before_flags(path)

    mem = memories.open_sync(
        path, embedder=HashingEmbedder(), clock=ManualClock(START), policy=policy
    )
    try:
        assert mem.maintain(dry_run=True).count("archive_flags_filled") == 0
        filled = []
        for _ in range(3):
            report = mem.maintain()
            filled.append(report.count("archive_flags_filled"))
            (error,) = [e for e in report.errors if "archive flags" in e]
            assert error.startswith(f"{NS}: archive flags {broken}: ArchiveIntegrityError")
        assert filled == [2, 1, 0]
        records = mem.run(mem.aio.store.get_archives(NS, ids))
        assert (records[broken].do_not_inject, records[broken].superseded) == (None, None)
        assert records[forgotten].do_not_inject is True
        assert all(records[i].do_not_inject is False for i in ids[1:] if i != forgotten)
    finally:
        mem.close()


def test_a_strong_archive_joins_beside_live_hits_until_k_are_found(
    tmp_path: Path, memories: MemoryFactory
) -> None:
    """Seed 001's cold path: the archive is searched while the live tiers found fewer
    than k strong hits, not only when they found nothing. A knowledge update ("now Gold")
    stays live while the fact it updates ("Silver before") is archived; a recall asking
    for the earlier state must still reach it."""
    mem, archived_id = _one_archived(memories, tmp_path)
    try:
        live = mem.add(
            "Acme Rockets in Leeds was the user's first employer, said again", namespace=NS
        )
        hits = mem.search(STRONG, namespace=NS, k=1)
        assert hits[0].memory.id == live.id
        assert hits[0].terms.cosine >= mem.policy.retrieval.relevance_threshold
        # k strong live hits: the archive stays out of a plain search
        assert [h for h in hits if h.archived] == []
        # a recall wants more lines than one strong hit: the archived summary joins, marked
        injection = mem.recall(STRONG, namespace=NS, record_use=False)
        ids = [h.memory.id for h in injection.items]
        assert live.id in ids
        assert archived_id in {h.memory.id for h in injection.items if h.archived}
        assert f"[archived id={archived_id}]" in injection.text
    finally:
        mem.close()
