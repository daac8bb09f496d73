"""The faces are thin: they reach the core through its public API only.

Read from the source (no framework needs to be installed): a face module imports only
the core's public modules, never a private name, touches no private attribute it did not
define itself (the facade's `_loop`, say), and never reaches past the engine into its
ports and helpers (`engine.store`, `.retriever`, `.embedder` ...). What a face needs that
the core lacks belongs in the core.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FACES = ("langchain_tiered_memory", "llamaindex_tiered_memory")
PUBLIC_CORE_MODULES = frozenset(
    {
        "tiered_memory",
        "tiered_memory.capture",
        "tiered_memory.embeddings",
        "tiered_memory.errors",
        "tiered_memory.filters",
        "tiered_memory.ports",
        "tiered_memory.validation",
    }
)
# What the faces call a memory or its engine (`self.memory.aio`, `engine = ...`).
MEMORY_NAMES = frozenset({"aio", "amem", "engine", "mem", "memory", "_memory"})
# The engine's ports and helpers: the engine's business, not an integration's.
ENGINE_INTERNALS = frozenset(
    {
        "archival",
        "archiver",
        "dimensions",
        "embedder",
        "graph",
        "objects",
        "retriever",
        "store",
        "summarizer",
        "sweep",
    }
)


def _face_files() -> list[Path]:
    return sorted(p for face in FACES for p in (ROOT / face).rglob("*.py"))


def _trees() -> Iterator[tuple[Path, ast.Module]]:
    for path in _face_files():
        yield path, ast.parse(path.read_text(), filename=str(path))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _names_a_memory(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in MEMORY_NAMES
    return isinstance(node, ast.Attribute) and node.attr in MEMORY_NAMES


def _own_private_names() -> set[str]:
    """Private names the faces define: their own helpers and attributes."""
    names: set[str] = set()
    for _, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return {n for n in names if _private(n)}


def test_there_are_face_modules_to_check() -> None:
    assert len(_face_files()) >= 10


@pytest.mark.parametrize("path", _face_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_face_imports_only_public_core_names(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    bad: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
            names: list[str] = []
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
            names = [alias.name for alias in node.names]
        else:
            continue
        for module in modules:
            if module.split(".")[0] != "tiered_memory":
                continue
            if module not in PUBLIC_CORE_MODULES:
                bad.append(f"line {node.lineno}: imports {module}")
            bad.extend(f"line {node.lineno}: imports {module}.{n}" for n in names if _private(n))
    assert bad == [], f"{path.name} reaches into the core: {bad}"


@pytest.mark.parametrize("path", _face_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_face_touches_no_private_or_internal_attribute_of_the_core(path: Path) -> None:
    own = _own_private_names()
    tree = ast.parse(path.read_text(), filename=str(path))
    bad = [
        f"line {node.lineno}: .{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and (
            (_private(node.attr) and node.attr not in own)
            or (node.attr in ENGINE_INTERNALS and _names_a_memory(node.value))
        )
    ]
    assert bad == [], f"{path.name} touches the core's internals: {bad}"


def test_the_core_gaps_module_is_gone() -> None:
    assert not (ROOT / "llamaindex_tiered_memory" / "_core_gaps.py").exists()
