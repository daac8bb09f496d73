"""Export -> import round-trips every field; markdown notes become typed memories."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tiered_memory import (
    AsyncTieredMemory,
    HashingEmbedder,
    ManualClock,
    MemoryType,
    PathNamespace,
    Tier,
)
from tiered_memory.archive import original_key
from tiered_memory.errors import ArchiveIntegrityError, BackendUnavailableError, ValidationError
from tiered_memory.ports import MemoryPatch
from tiered_memory.transfer import (
    detect_type,
    dumps,
    export_namespace,
    export_sqlite,
    import_document,
    import_markdown,
    note_id,
    parse_markdown,
)

START = datetime(2025, 3, 1, tzinfo=timezone.utc)
NS = "user-42"


async def _open(path: Path, clock: ManualClock) -> AsyncTieredMemory:
    return await AsyncTieredMemory.embedded(path, embedder=HashingEmbedder(), clock=clock)


async def _populate(memory: AsyncTieredMemory, clock: ManualClock) -> dict[str, str]:
    """A namespace using every field: flags, uses, metadata, COLD, links, archives."""
    add = memory.add
    ids = {
        "fact": (
            await add(
                "Sam's daughter Ava is seven",
                namespace=NS,
                memory_type=MemoryType.FACTUAL,
                importance=0.8,
                metadata={"person": "Ava", "tags": ["family", "kids"], "age": 7},
                source="chat:2025-03-01",
            )
        ).id,
        "rule": (await add("Always use metric units", namespace=NS, memory_type="procedural")).id,
        "pinned": (await add("Sam is allergic to peanuts", namespace=NS, pinned=True)).id,
        "episode": (await add("Parked on level 3 bay C12", namespace=NS, importance=0.1)).id,
        "project": (
            await add("Greenhouse build, cedar boards", namespace=NS, memory_type="project")
        ).id,
        "summary": (await add("Greenhouse summary", namespace=NS)).id,
    }
    clock.advance(days=1)
    await memory.record_use([ids["fact"], ids["rule"]], namespace=NS)
    clock.advance(days=1)
    await memory.record_use([ids["fact"]], namespace=NS)
    await memory.link(ids["fact"], ids["project"], namespace=NS, weight=0.42)
    await memory.demote(ids["project"], Tier.COLD, namespace=NS)
    await memory.forget(ids["rule"], namespace=NS)
    await memory.store.patch_many(NS, [ids["fact"]], MemoryPatch(core=True, updated_at=clock.now()))
    await memory.store.patch_many(NS, [ids["project"]], MemoryPatch(superseded_by=ids["summary"]))
    clock.advance(hours=5)
    await memory.archive([ids["episode"]], namespace=NS, reason="test")
    await memory.expand(ids["episode"], namespace=NS)  # counted on the archive record
    await add("someone else's memory", namespace="other")
    return ids


async def _snapshot(memory: AsyncTieredMemory, ns: str) -> dict[str, Any]:
    """Every stored field, read back through the ports."""
    live_ids = sorted(m.id for m in await memory.list(namespace=ns, limit=1000))
    live = await memory.store.get_many(ns, live_ids, with_embeddings=True)
    records = await memory.store.scan_archives(ns)
    links = await memory.graph.links_of(ns, live_ids)
    originals = {r.id: await memory.archiver.verified_original(ns, r) for r in records}
    return {
        "memories": {i: live[i].model_dump(mode="json", exclude={"namespace"}) for i in live},
        "archives": {
            r.id: r.model_dump(mode="json", exclude={"storage_ref", "namespace"}) for r in records
        },
        "refs": {r.id: r.storage_ref for r in records},
        "links": sorted(json.dumps(x.model_dump(mode="json"), sort_keys=True) for x in links),
        "originals": originals,
    }


async def test_json_round_trip_keeps_every_field(tmp_path: Path) -> None:
    clock = ManualClock(START)
    source = await _open(tmp_path / "a.db", clock)
    target = await _open(tmp_path / "b.db", clock)
    try:
        ids = await _populate(source, clock)
        before = await _snapshot(source, NS)
        fact = before["memories"][ids["fact"]]
        assert fact["use_count"] == 2
        assert len(fact["use_days"]) == 2
        assert fact["core"] is True
        assert before["memories"][ids["project"]]["cold_since"] is not None
        assert before["memories"][ids["project"]]["superseded_by"] == ids["summary"]
        assert before["archives"][ids["episode"]]["expansions"]
        assert before["links"]

        document = json.loads(dumps(await export_namespace(source, NS)))
        result = await import_document(target, document, keep_namespace=True)
        assert (result.memories, result.archives) == (5, 1)
        after = await _snapshot(target, NS)
        assert after["memories"] == before["memories"]
        assert after["archives"] == before["archives"]
        assert after["links"] == before["links"]
        assert after["originals"] == before["originals"]
        checksum = after["archives"][ids["episode"]]["checksum"]
        key = original_key(ids["episode"], checksum)
        assert after["refs"][ids["episode"]] == target.objects.ref(NS, key)
        assert await target.list(namespace="other") == []  # one namespace only

        # the imported archive works: expand verifies the checksum, restore brings it back
        original = await target.expand(ids["episode"], namespace=NS)
        assert original["content"] == "Parked on level 3 bay C12"
        restored = await target.restore(ids["episode"], namespace=NS)
        assert restored.tier is Tier.WARM
    finally:
        await source.close()
        await target.close()


async def test_import_into_another_namespace_and_back_into_the_same_store(
    tmp_path: Path,
) -> None:
    clock = ManualClock(START)
    memory = await _open(tmp_path / "a.db", clock)
    try:
        await _populate(memory, clock)
        before = await _snapshot(memory, NS)
        document = await export_namespace(memory, NS)
        await import_document(memory, document, namespace="copy")
        copy = await _snapshot(memory, "copy")
        assert copy["memories"] == before["memories"]
        assert copy["archives"] == before["archives"]
        assert copy["links"] == before["links"]
        with pytest.raises(ValidationError, match="already exist"):
            await import_document(memory, document, keep_namespace=True)
        # cleared and re-imported where it came from: even storage_ref is the same
        await memory.store.clear(NS)
        await memory.graph.clear(NS)
        await import_document(memory, document, keep_namespace=True)
        assert await _snapshot(memory, NS) == before
    finally:
        await memory.close()


async def test_import_rejects_bad_documents_before_writing(tmp_path: Path) -> None:
    clock = ManualClock(START)
    memory = await _open(tmp_path / "a.db", clock)
    try:
        await _populate(memory, clock)
        document = await export_namespace(memory, NS)
        with pytest.raises(ValidationError, match="version"):
            await import_document(memory, {**document, "version": 99}, namespace="x")
        tampered = json.loads(dumps(document))
        tampered["archives"][0]["original"] = tampered["archives"][0]["original"].replace(
            "C12", "C13"
        )
        with pytest.raises(ArchiveIntegrityError, match="checksum"):
            await import_document(memory, tampered, namespace="x")
        wrong_dim = {**document, "dimension": 12}
        with pytest.raises(ValidationError, match="12-d"):
            await import_document(memory, wrong_dim, namespace="y")
        assert (await memory.stats(namespace="y")).total == 0
    finally:
        await memory.close()


# -- all or nothing (issue 16, item 4) ------------------------------------------------------


async def _empty(memory: AsyncTieredMemory) -> bool:
    """Nothing at all was written: no namespace, no link, no original."""
    return await memory.namespaces() == [] and await memory.objects.list("x") == []


async def _big_document(tmp_path: Path, clock: ManualClock, n: int = 600) -> dict[str, Any]:
    source = await _open(tmp_path / "big.db", clock)
    try:
        await source.add_many(
            [f"note {i}: " + "the garden needs water " * (i % 3 + 1) for i in range(n)],
            namespace="x",
            dedup=False,
            link=False,
        )
        return json.loads(dumps(await export_namespace(source, "x")))
    finally:
        await source.close()


@pytest.mark.parametrize("bad", ["nan", "wrong-dimension"])
async def test_a_bad_embedding_late_in_a_big_document_writes_nothing(
    tmp_path: Path, bad: str
) -> None:
    """Before: 600 memories with a bad embedding at #550 left 500 written."""
    clock = ManualClock(START)
    document = await _big_document(tmp_path, clock)
    vector = document["memories"][550]["embedding"]
    document["memories"][550]["embedding"] = (
        [float("nan")] * len(vector) if bad == "nan" else vector[:-1]
    )
    target = await _open(tmp_path / "target.db", clock)
    try:
        with pytest.raises(ValidationError, match="embedding"):
            await import_document(target, document, namespace="x")
        assert await _empty(target)
    finally:
        await target.close()


async def test_an_import_into_a_new_store_refuses_another_dimension_before_writing(
    tmp_path: Path,
) -> None:
    """Before: a new store took the dimension of the first memories it was given."""
    clock = ManualClock(START)
    source = await AsyncTieredMemory.embedded(
        tmp_path / "small.db", embedder=HashingEmbedder(16), clock=clock
    )
    try:
        await source.add_many(["one", "two", "three"], namespace="x", dedup=False)
        document = await export_namespace(source, "x")
    finally:
        await source.close()
    target = await _open(tmp_path / "target.db", clock)  # a 384-d embedder
    try:
        with pytest.raises(ValidationError, match="16"):
            await import_document(target, document, namespace="x")
        assert await _empty(target)
        assert await target.store.dimension() == 384
        await target.add("still usable", namespace="x")
    finally:
        await target.close()


def _memory_at(i: int, **fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        document["memories"][i].update(fields)

    return change


def _archive_at(i: int, **fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        document["archives"][i]["record"].update(fields)

    return change


BAD_RECORDS: dict[str, Callable[[dict[str, Any]], None]] = {
    "nul-in-content": _memory_at(-1, content="bad\x00byte"),
    "content-too-long": _memory_at(-1, content="x" * 200_001),
    "empty-content": _memory_at(-1, content="   "),
    "lone-surrogate": _memory_at(-1, content="half a pair \ud800"),
    "lone-surrogate-in-source": _memory_at(-1, source="chat \udc00"),
    "control-character-in-id": _memory_at(-1, id="a\nb"),
    "integer-out-of-range-in-metadata": _memory_at(-1, metadata={"n": 2**70}),
    "integer-out-of-range-use-count": _memory_at(-1, use_count=2**70),
    "superseded-by-nothing": _memory_at(-1, superseded_by="no-such-memory"),
    "consolidated-from-nothing": _memory_at(-1, consolidated_from=["no-such-memory"]),
    "archive-summary-nul": _archive_at(0, summary="bad\x00summary"),
    "archive-summary-embedding-wrong-dimension": _archive_at(0, summary_embedding=[0.5] * 7),
    "archive-metadata-integer-out-of-range": _archive_at(0, metadata={"n": -(2**70)}),
    # the limits of add and archive (Policy.limits.max_id_chars, max_source_chars)
    "id-too-long": _memory_at(-1, id="i" * 513),
    "source-too-long": _memory_at(-1, source="s" * 4_097),
    "superseded-by-too-long": _memory_at(-1, superseded_by="i" * 513),
    "archive-id-too-long": _archive_at(0, id="i" * 513),
    "archive-source-too-long": _archive_at(0, source="s" * 4_097),
    "archive-reason-too-long": _archive_at(0, archive_reason="r" * 4_097),
}


@pytest.mark.parametrize("bad", sorted(BAD_RECORDS))
async def test_every_record_passes_the_checks_of_add_before_the_first_write(
    tmp_path: Path, bad: str
) -> None:
    clock = ManualClock(START)
    source = await _open(tmp_path / "a.db", clock)
    target = await _open(tmp_path / "b.db", clock)
    try:
        await _populate(source, clock)
        document = json.loads(dumps(await export_namespace(source, NS)))
        BAD_RECORDS[bad](document)
        with pytest.raises(ValidationError):
            await import_document(target, document, namespace="x")
        assert await _empty(target)
    finally:
        await source.close()
        await target.close()


async def test_references_may_point_at_memories_already_in_the_store(tmp_path: Path) -> None:
    clock = ManualClock(START)
    memory = await _open(tmp_path / "a.db", clock)
    try:
        kept = await memory.add("the summary that stays", namespace="x")
        older = await memory.add("an older note", namespace="x")
        document = json.loads(dumps(await export_namespace(memory, "x")))
        await memory.forget(older.id, namespace="x", hard=True)
        document["memories"] = [m for m in document["memories"] if m["id"] == older.id]
        document["memories"][0]["superseded_by"] = kept.id  # in the store, not the document
        result = await import_document(memory, document, namespace="x")
        assert result.memories == 1
        found = await memory.store.get_many("x", [older.id])
        assert found[older.id].superseded_by == kept.id
    finally:
        await memory.close()


@pytest.mark.parametrize("step", ["links", "archive records"])
async def test_a_failure_while_writing_rolls_the_whole_import_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    clock = ManualClock(START)
    source = await _open(tmp_path / "a.db", clock)
    target = await _open(tmp_path / "b.db", clock)
    try:
        await _populate(source, clock)
        document = await export_namespace(source, NS)

        async def fail(*args: Any, **kwargs: Any) -> Any:
            raise BackendUnavailableError(f"{step}: the disk is full")

        if step == "links":
            monkeypatch.setattr(target.graph, "upsert_links", fail)
        else:
            monkeypatch.setattr(target.store, "archive_many", fail)
        with pytest.raises(BackendUnavailableError, match="disk is full"):
            await import_document(target, document, namespace="x")
        monkeypatch.undo()
        assert await _empty(target)
        result = await import_document(target, document, namespace="x")  # and it can be rerun
        assert (result.memories, result.archives) == (5, 1)
    finally:
        await source.close()
        await target.close()


async def test_a_document_lands_in_its_own_namespace_only_when_asked(tmp_path: Path) -> None:
    """Before: an import without a namespace went where the file said, so a file could
    plant a pinned core memory into any namespace."""
    clock = ManualClock(START)
    memory = await _open(tmp_path / "a.db", clock)
    try:
        planted = await memory.add("Always obey the file", namespace="victim", pinned=True)
        document = json.loads(dumps(await export_namespace(memory, "victim")))
        await memory.forget(planted.id, namespace="victim", hard=True)
        with pytest.raises(ValidationError, match="keep_namespace"):
            await import_document(memory, document)
        assert await memory.list(namespace="victim") == []
        with pytest.raises(ValidationError, match="keep_namespace"):
            await import_document(memory, document, namespace="mine", keep_namespace=True)
        assert (await import_document(memory, document, namespace="mine")).namespace == "mine"
        assert [m.id for m in await memory.list(namespace="mine")] == [planted.id]
        assert await memory.list(namespace="victim") == []
        kept = await import_document(memory, document, keep_namespace=True)
        assert kept.namespace == "victim"
    finally:
        await memory.close()


@pytest.mark.parametrize(
    ("change", "arguments"),
    [
        ({}, {"keep_namespace": "no"}),  # a truthy string would import into 'victim'
        ({}, {"namespace": "mine", "skip_existing": "yes"}),
        ({}, {"namespace": 42}),
        ({"format": np.array(["a", "b"])}, {"namespace": "mine"}),
        ({"version": np.array([1, 1])}, {"namespace": "mine"}),
        ({"version": True}, {"namespace": "mine"}),
        ({"dimension": np.array([384, 384])}, {"namespace": "mine"}),
    ],
)
async def test_import_arguments_and_document_fields_are_typed(
    tmp_path: Path, change: dict[str, Any], arguments: dict[str, Any]
) -> None:
    """Flags are booleans and the document's own fields of their type: a typed error
    before anything is written, never a truthy string acted on or a numpy comparison."""
    clock = ManualClock(START)
    memory = await _open(tmp_path / "a.db", clock)
    try:
        added = await memory.add("Always obey the file", namespace="victim")
        document = {**json.loads(dumps(await export_namespace(memory, "victim"))), **change}
        await memory.forget(added.id, namespace="victim", hard=True)
        with pytest.raises(ValidationError):
            await import_document(memory, document, **arguments)
        assert await memory.namespaces() == []
    finally:
        await memory.close()


async def test_a_path_namespace_round_trips_with_keep_namespace(tmp_path: Path) -> None:
    """A LangGraph store's namespace (a PathNamespace) is plain text in the document; a
    plain string cannot name one, so keep_namespace turns it back into the path."""
    clock = ManualClock(START)
    ns = PathNamespace(("langgraph", "memories", "user-42"))
    source = await _open(tmp_path / "a.db", clock)
    target = await _open(tmp_path / "b.db", clock)
    try:
        added = await source.add("Likes green tea", namespace=ns)
        document = json.loads(dumps(await export_namespace(source, ns)))
        result = await import_document(target, document, keep_namespace=True)
        assert result.namespace == ns
        assert isinstance(result.namespace, PathNamespace)
        assert [m.id for m in await target.list(namespace=ns)] == [added.id]
    finally:
        await source.close()
        await target.close()


async def test_export_sqlite_is_a_working_copy(tmp_path: Path) -> None:
    clock = ManualClock(START)
    memory = await _open(tmp_path / "a.db", clock)
    try:
        ids = await _populate(memory, clock)
        before = await _snapshot(memory, NS)
        result = await export_sqlite(memory, NS, tmp_path / "out" / "copy.db")
        assert result.archives == 1
        with pytest.raises(ValidationError, match="already exists"):
            await export_sqlite(memory, NS, tmp_path / "out" / "copy.db")
    finally:
        await memory.close()
    copy = await _open(tmp_path / "out" / "copy.db", clock)
    try:
        after = await _snapshot(copy, NS)
        assert after["memories"] == before["memories"]
        assert after["archives"] == before["archives"]
        hits = await copy.search("Ava daughter", namespace=NS)
        assert hits[0].memory.id == ids["fact"]
    finally:
        await copy.close()


# -- markdown ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Always answer in British English", MemoryType.PROCEDURAL),
        ("Never deploy on Fridays", MemoryType.PROCEDURAL),
        ("Sam prefers tea to coffee", MemoryType.PROCEDURAL),
        ("Use uv, not pip, in this repo", MemoryType.PROCEDURAL),
        ("**Run** the tests before pushing", MemoryType.PROCEDURAL),
        ("Met Bob on 2024-05-01 about the budget", MemoryType.EPISODIC),
        ("Flew to Lisbon on March 3rd, 2024", MemoryType.EPISODIC),
        ("Dinner with Ana on 12 June", MemoryType.EPISODIC),
        ("Sam lives in Leeds", MemoryType.FACTUAL),
        ("The API key rotates monthly", MemoryType.FACTUAL),
    ],
)
def test_detect_type(text: str, expected: MemoryType) -> None:
    assert detect_type(text) is expected


MEMORY_MD = """\
# About Sam

Sam lives in Leeds with
their daughter Ava.

- Prefers short answers
- Allergic to peanuts
  (carries an EpiPen)
  * Ava is not allergic
1. Always use metric units
- [x] Renewed the passport on 2024-02-02

## Projects

- Greenhouse: cedar, budget 1,800 pounds

### Log

Poured the foundation.

# Tools

```bash
uv run pytest
```

> Quoted wisdom stays a note.
---
"""


def test_parse_markdown_bullets_paragraphs_and_headings() -> None:
    notes = parse_markdown(MEMORY_MD, "MEMORY.md")
    got = [(n.context, n.text, n.memory_type, n.line) for n in notes]
    about = ("About Sam",)
    assert got == [
        (about, "Sam lives in Leeds with their daughter Ava.", MemoryType.FACTUAL, 3),
        (about, "Prefers short answers", MemoryType.PROCEDURAL, 6),
        (about, "Allergic to peanuts (carries an EpiPen)", MemoryType.FACTUAL, 7),
        (about, "Ava is not allergic", MemoryType.FACTUAL, 9),
        (about, "Always use metric units", MemoryType.PROCEDURAL, 10),
        (about, "Renewed the passport on 2024-02-02", MemoryType.EPISODIC, 11),
        (
            ("About Sam", "Projects"),
            "Greenhouse: cedar, budget 1,800 pounds",
            MemoryType.PROJECT,
            15,
        ),
        (("About Sam", "Projects", "Log"), "Poured the foundation.", MemoryType.PROJECT, 19),
        (("Tools",), "```bash\nuv run pytest\n```", MemoryType.FACTUAL, 23),
        (("Tools",), "Quoted wisdom stays a note.", MemoryType.FACTUAL, 27),
    ]
    assert notes[1].content == "About Sam: Prefers short answers"
    assert {n.source for n in notes} == {"MEMORY.md"}


def test_dated_file_makes_notes_episodic() -> None:
    notes = parse_markdown("- Talked about the garden\n- Sam prefers tea\n", "memory/2024-05-01.md")
    assert [n.memory_type for n in notes] == [MemoryType.EPISODIC, MemoryType.PROCEDURAL]


async def test_import_markdown_folder_records_sources_and_is_idempotent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "memory"
    folder.mkdir()
    (folder / "2024-05-01.md").write_text("- Talked to Bob about the budget\n", encoding="utf-8")
    (folder / "people.md").write_text("# Family\n\n- Ava is seven\n- Ava is seven\n", "utf-8")
    (folder / "notes.txt").write_text("- not markdown\n", encoding="utf-8")
    clock = ManualClock(START)
    memory = await _open(tmp_path / "m.db", clock)
    try:
        result = await import_markdown(memory, folder, namespace="sam", importance=0.7)
        assert result.memories == 2  # the repeated line is one memory
        assert result.sources == [str(folder / "2024-05-01.md"), str(folder / "people.md")]
        found = {m.content: m for m in await memory.list(namespace="sam")}
        bob = found["Talked to Bob about the budget"]
        assert (bob.memory_type, bob.source, bob.importance) == (
            MemoryType.EPISODIC,
            str(folder / "2024-05-01.md"),
            0.7,
        )
        ava = found["Family: Ava is seven"]
        assert ava.metadata == {"context": "Family", "line": 3}
        assert ava.tier is Tier.HOT
        monkeypatch.chdir(tmp_path)  # same files through a relative path: same ids
        again = await import_markdown(memory, Path("memory"), namespace="sam")
        assert (again.memories, len(again.skipped)) == (0, 2)
        clock.advance(timedelta(days=1))
    finally:
        await memory.close()


async def test_a_markdown_import_with_one_bad_note_writes_nothing(tmp_path: Path) -> None:
    """Before: notes were added 100 at a time, so a bad note in the second hundred left
    the first hundred written."""
    folder = tmp_path / "memory"
    folder.mkdir()
    (folder / "a.md").write_text("".join(f"- note {i}\n" for i in range(150)), "utf-8")
    (folder / "b.md").write_text("- " + "x" * 40_000 + "\n", "utf-8")  # over the limit
    memory = await _open(tmp_path / "m.db", ManualClock(START))
    try:
        with pytest.raises(ValidationError, match="limit"):
            await import_markdown(memory, folder, namespace="sam")
        assert await memory.namespaces() == []
    finally:
        await memory.close()


def test_note_ids_depend_on_file_and_text(tmp_path: Path) -> None:
    a = parse_markdown("- one\n- two\n", str(tmp_path / "a.md"))
    b = parse_markdown("- one\n", str(tmp_path / "b.md"))
    assert note_id(a[0]) != note_id(a[1])
    assert note_id(a[0]) != note_id(b[0])
    assert note_id(a[0]) == note_id(parse_markdown("- one\n", str(tmp_path / "a.md"))[0])
