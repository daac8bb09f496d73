"""The Python in README.md and docs/*.md runs (issue 20, item 6).

Each file's ```python blocks run in order, in one shared namespace, in a temporary
folder (so `"memory.db"` is a new file there), with no TIERED_MEMORY_* setting of the
machine and no network. A block may `await` at the top level: the file's blocks share
one event loop. Before, the first README block raised NameError (`archived_id`) and the
configuration block lacked an import; nothing ran them.

Two markers, each on the line directly above a fence:

- `<!-- docs-test: skip reason="needs a Weaviate server" -->` above a ```python block:
  the block does not run (it needs a server, a key or a model), and the reason is
  reported as the skip reason of that block's test. The blocks after it still run.
- `<!-- docs-test: file name="config.toml" -->` above any other block (```toml): the
  block's text is written to that file in the temporary folder before the next block
  runs, so a Python block can read the configuration the page shows.

A marker anywhere else, or spelled otherwise, fails the test: a typo must not turn a
skip into silence.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
MARKER = re.compile(
    r'^<!--\s*docs-test:\s*(?P<kind>skip|file)\s+(?P<key>reason|name)="(?P<value>[^"]+)"\s*-->$'
)
PYTHON = frozenset({"python", "py"})


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    marker: re.Match[str] | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def skip_reason(self) -> str | None:
        if self.marker is not None and self.marker["kind"] == "skip":
            return self.marker["value"]
        return None

    @property
    def file_name(self) -> str | None:
        if self.marker is not None and self.marker["kind"] == "file":
            return self.marker["value"]
        return None


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, each with the marker directly above its fence."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, start = opening["fence"], i
        i += 1
        body: list[str] = []
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        above = lines[start - 1].strip() if start > 0 else ""
        found.append(
            Block(
                page=page,
                line=start + 1,
                lang=opening["lang"].lower(),
                code=textwrap.dedent("\n".join(body)) + "\n",
                marker=MARKER.match(above),
            )
        )
        i += 1  # the closing fence
    return found


def _python(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.lang in PYTHON]


def _pages_with_python() -> list[Path]:
    return [p for p in PAGES if _python(p)]


# -- the markers are where they must be, spelled as they must be -------------------------


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_marker_sits_above_a_fence_it_applies_to(page: Path) -> None:
    lines = page.read_text(encoding="utf-8").splitlines()
    problems: list[str] = []
    for n, text in enumerate(lines):
        if "docs-test:" not in text:
            continue
        where = f"{page.relative_to(ROOT)}:{n + 1}"
        marker = MARKER.match(text.strip())
        below = FENCE.match(lines[n + 1]) if n + 1 < len(lines) else None
        if marker is None:
            problems.append(f"{where}: not a docs-test marker: {text.strip()!r}")
        elif below is None:
            problems.append(f"{where}: a marker must be directly above a ``` fence")
        elif marker["kind"] == "skip" and (
            below["lang"].lower() not in PYTHON or marker["key"] != "reason"
        ):
            problems.append(f'{where}: skip reason="..." applies to ```python blocks only')
        elif marker["kind"] == "file" and (
            below["lang"].lower() in PYTHON or marker["key"] != "name"
        ):
            problems.append(f'{where}: file name="..." applies to non-Python blocks only')
    assert problems == []


def test_the_marker_parser_reads_the_documented_form(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n"
        '<!-- docs-test: skip reason="needs a Weaviate server" -->\n'
        "```python\nx = 1\n```\n\n"
        "```python\ny = 2\n```\n",
        encoding="utf-8",
    )
    first, second = blocks(page)
    assert (first.line, first.skip_reason, first.code) == (3, "needs a Weaviate server", "x = 1\n")
    assert (second.skip_reason, second.code) == (None, "y = 2\n")


# -- the blocks run -------------------------------------------------------------------------


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary working folder, no settings of this machine, no network."""
    import os

    from pytest_socket import disable_socket, enable_socket

    for key in list(os.environ):
        if key.upper().startswith("TIERED_MEMORY_"):
            monkeypatch.delenv(key)
    for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    disable_socket(allow_unix_socket=True)  # the event loop's self-pipe is a socketpair
    try:
        yield work  # type: ignore[misc]
    finally:
        enable_socket()


def _run(block: Block, namespace: dict[str, Any], loop: asyncio.AbstractEventLoop) -> None:
    code = compile(
        block.code, block.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
    )
    result = eval(code, namespace)  # the docs' own code, run on purpose
    if inspect.iscoroutine(result):  # a block with a top-level await
        loop.run_until_complete(result)


def _close_memories(namespace: dict[str, Any], loop: asyncio.AbstractEventLoop) -> None:
    """Close what the blocks opened and left open (a page shows use, not teardown)."""
    from tiered_memory import AsyncTieredMemory, TieredMemory

    for value in list(namespace.values()):
        if isinstance(value, TieredMemory):
            value.close()
        elif isinstance(value, AsyncTieredMemory):
            loop.run_until_complete(value.close())


@pytest.mark.parametrize("page", _pages_with_python(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_python_blocks_of_a_page_run_in_order(page: Path, offline: Path) -> None:
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    loop = asyncio.new_event_loop()
    try:
        for block in blocks(page):
            if block.file_name is not None:
                (offline / block.file_name).write_text(block.code, encoding="utf-8")
            elif block.lang in PYTHON and block.skip_reason is None:
                try:
                    _run(block, namespace, loop)
                except Exception as e:
                    raise AssertionError(f"the block at {block.name} raised {e!r}") from e
    finally:
        try:
            _close_memories(namespace, loop)
        finally:
            loop.close()


SKIPPED = [b for page in PAGES for b in _python(page) if b.skip_reason is not None]


@pytest.mark.parametrize("block", SKIPPED, ids=lambda b: b.name)
def test_a_marked_block_is_skipped_with_its_reason(block: Block) -> None:
    compile(block.code, block.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)  # still valid
    pytest.skip(f"{block.name}: {block.skip_reason}")
