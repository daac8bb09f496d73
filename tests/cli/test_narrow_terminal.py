"""At 80 columns `search` and `list` keep their tier, score and type columns and shorten
the content instead (issue 20, item 5). Left to rich, the tables dropped every column
but the id and the content once the content did not fit."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from tiered_memory import HashingEmbedder, MemoryType, TieredMemory
from tiered_memory.cli.rendering import hits_table, memories_table

from .conftest import Cli

LONG = (
    "Sam's daughter Ava is seven and loves dinosaurs, especially the long-necked ones "
    "she saw at the natural history museum last spring with her grandparents"
)


def _seed(cli: Cli) -> None:
    with TieredMemory.embedded(cli.db, embedder=HashingEmbedder()) as mem:
        mem.add(LONG, memory_type=MemoryType.FACTUAL, importance=0.8, pinned=True)
        mem.add("Always give measurements in metric units", memory_type="procedural")


def _header_and_rows(shown: str) -> tuple[list[str], list[str]]:
    lines = [line for line in shown.splitlines() if line.strip()]
    header = next(line for line in lines if line.split()[:2] == ["id", "tier"])
    rows = [line for line in lines if len(line.split()[0]) == 32]
    return header.split(), rows


@pytest.mark.parametrize("command", ["search", "list"])
def test_at_80_columns_the_columns_stay_and_the_content_is_cut(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    _seed(cli)
    monkeypatch.setenv("COLUMNS", "80")
    args = ("search", "Ava dinosaurs metric units") if command == "search" else ("list",)
    shown = cli(*args).stdout
    assert max(len(line) for line in shown.splitlines()) <= 80, shown
    header, rows = _header_and_rows(shown)
    wanted = ["tier", "score", "type", "content"] if command == "search" else ["tier", "type"]
    assert set(wanted) <= set(header), shown
    assert len(rows) == 2
    long_row = next(row for row in rows if "Sam's daughter" in row)
    assert "…" in long_row  # shortened, on one line
    assert "museum" not in shown
    type_at = header.index("type")
    assert {row.split()[type_at] for row in rows} == {"fact", "proc"}


def _render(table: object, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, highlight=False, color_system=None)
    console.print(table)
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue()


def test_tables_fit_the_console_they_are_printed_on(tmp_path: object) -> None:
    with TieredMemory.embedded(f"{tmp_path}/m.db", embedder=HashingEmbedder()) as mem:
        m = mem.add(LONG, memory_type=MemoryType.FACTUAL, pinned=True)
        hits = list(mem.search("dinosaurs", k=1))
        memories = mem.list()
    for width in (80, 100, 120):
        shown = _render(hits_table(hits, "hits"), width)
        header, (row,) = _header_and_rows(shown)
        assert header == ["id", "tier", "score", "type", "content"]
        assert row.split()[:4] == [m.id, "hot", f"{hits[0].score:.3f}", "fact"]
        assert max(len(line) for line in shown.splitlines()) <= width
    wide = _render(memories_table(memories), 260)
    assert _header_and_rows(wide)[0] == ["id", "tier", "type", "imp", "uses", "flags", "content"]
    assert "grandparents" in wide  # nothing cut when it fits
    narrow = _render(memories_table(memories), 80)
    header, (row,) = _header_and_rows(narrow)
    assert header[:3] == ["id", "tier", "type"]
    assert header[-1] == "content"
    assert len(row) <= 80
    assert "…" in row


def test_an_optional_column_empty_in_every_row_is_left_out(tmp_path: object) -> None:
    with TieredMemory.embedded(f"{tmp_path}/m.db", embedder=HashingEmbedder()) as mem:
        mem.add("a plain memory")
        shown = _render(memories_table(mem.list()), 200)
    assert "flags" not in _header_and_rows(shown)[0]
