"""The shape of the core's imports, read from the source by grimp (nothing is imported).

- No cycles: a module that imports itself back through others can only be understood,
  changed or imported all together, and the order of its imports starts to matter.
  Every import counts, including the ones inside functions and under TYPE_CHECKING.
- Only a backend's package imports that backend's client library, so the rest of the
  core never learns which database, object store or model it runs on.
- The command line calls the public API: it imports no backend and none of the
  engine's collaborators.
"""

from __future__ import annotations

import grimp
import pytest

PACKAGE = "tiered_memory"

# Where a backend may live: its package under backends/, and summarizers/ (the
# Anthropic adapter beside the model-free extractive summariser).
BACKEND_PACKAGES = ("tiered_memory.backends", "tiered_memory.summarizers")
LEGACY_CYCLES: tuple[str, ...] = ()

CLIENT_LIBRARIES = frozenset({"sqlite3", "weaviate", "neo4j", "boto3", "botocore", "anthropic"})

# What the command line may import from the core: the public API and the small public
# helpers beside it (settings, results, errors, budget shares, safe printing, export,
# backup), never a backend or the engine's parts (stores, sweep, archiver, ...).
CLI_MAY_IMPORT = frozenset(
    {
        "tiered_memory",
        "tiered_memory.backup",
        "tiered_memory.budget",
        "tiered_memory.clock",
        "tiered_memory.config",
        "tiered_memory.embeddings",
        "tiered_memory.engine",
        "tiered_memory.errors",
        "tiered_memory.mcp_server",  # `serve`: the MCP server's public face
        "tiered_memory.models",
        "tiered_memory.ports",
        "tiered_memory.terminal",
        "tiered_memory.transfer",
    }
)


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(PACKAGE, include_external_packages=True, cache_dir=None)


def _ours(graph: grimp.ImportGraph) -> list[str]:
    return sorted(m for m in graph.modules if m == PACKAGE or m.startswith(PACKAGE + "."))


def _in(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """One shortest cycle through each import that closes one: A -> B, and B leads back
    to A. Each cycle is reported once, starting from its smallest module."""
    found: dict[tuple[str, ...], list[str]] = {}
    for importer in _ours(graph):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            if not imported.startswith(PACKAGE) or imported == importer:
                continue
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is None:
                continue
            cycle = [importer, *back[:-1]]
            start = cycle.index(min(cycle))
            key = tuple(cycle[start:] + cycle[:start])
            found.setdefault(key, list(key))
    return sorted(found.values())


def test_the_import_graph_has_no_cycles(graph: grimp.ImportGraph) -> None:
    found = [c for c in cycles(graph) if not all(m.startswith(LEGACY_CYCLES) for m in c)]
    assert found == [], "import cycles:\n" + "\n".join(" -> ".join([*c, c[0]]) for c in found)


def test_the_cycle_finder_finds_cycles() -> None:
    """The check above would pass on a finder that finds nothing; this one has two."""
    g = grimp.ImportGraph()
    for module in ("tiered_memory.a", "tiered_memory.b", "tiered_memory.c", "tiered_memory.d"):
        g.add_module(module)
    g.add_import(importer="tiered_memory.a", imported="tiered_memory.b")
    g.add_import(importer="tiered_memory.b", imported="tiered_memory.c")
    g.add_import(importer="tiered_memory.c", imported="tiered_memory.a")
    g.add_import(importer="tiered_memory.c", imported="tiered_memory.d")
    g.add_import(importer="tiered_memory.d", imported="tiered_memory.c")
    assert cycles(g) == [
        ["tiered_memory.a", "tiered_memory.b", "tiered_memory.c"],
        ["tiered_memory.c", "tiered_memory.d"],
    ]


def test_only_backend_packages_import_backend_clients(graph: grimp.ImportGraph) -> None:
    offenders = {
        module: sorted(CLIENT_LIBRARIES & graph.find_modules_directly_imported_by(module))
        for module in _ours(graph)
        if not _in(module, BACKEND_PACKAGES)
    }
    assert {m: libs for m, libs in offenders.items() if libs} == {}


def test_the_check_sees_backend_clients(graph: grimp.ImportGraph) -> None:
    """Client imports are in the graph (else the check above passes on nothing)."""
    importers = {
        lib: graph.find_modules_that_directly_import(lib)
        for lib in CLIENT_LIBRARIES
        if lib in graph.modules
    }
    assert importers.get("sqlite3")  # the embedded store is always there
    assert all(_in(m, BACKEND_PACKAGES) for found in importers.values() for m in found)


def test_the_command_line_imports_only_the_public_api(graph: grimp.ImportGraph) -> None:
    cli = [m for m in _ours(graph) if _in(m, ("tiered_memory.cli",))]
    assert "tiered_memory.cli.commands" in cli
    reached = {
        (module, imported)
        for module in cli
        for imported in graph.find_modules_directly_imported_by(module)
        if imported.startswith(PACKAGE)
        and not _in(imported, ("tiered_memory.cli",))
        and imported not in CLI_MAY_IMPORT
    }
    assert reached == set()
