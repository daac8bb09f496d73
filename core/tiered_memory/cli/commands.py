"""The `tiered-memory` commands: the seed-002 memory commands over any configured store.

Every command takes `--namespace`, `--db` (an embedded SQLite file; default under the
user's data folder, or the production stack from `--config`/environment) and `--json`
(machine-readable output on stdout). Tables and progress bars are for people: progress
goes to stderr, so `--json` output stays parseable. Every expected failure (unknown id,
bad tier, bad duration, bad configuration) is one line on stderr and a non-zero exit.

Commands call the public API only (`AsyncTieredMemory`'s methods, `transfer`, `backup`);
how results look is `rendering`'s.
"""

from __future__ import annotations

import asyncio
import inspect
import io
import json
import logging
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console

from tiered_memory.budget import share_caps
from tiered_memory.config import TieredMemorySettings, load_settings, parse_duration
from tiered_memory.engine import AsyncTieredMemory
from tiered_memory.errors import TieredMemoryError
from tiered_memory.models import (
    ArchivePreview,
    Explanation,
    Hit,
    Injection,
    Memory,
    MemoryType,
    QuarantinedMemory,
    Stats,
    Tier,
)
from tiered_memory.terminal import json_printable

from .rendering import (
    archive_table,
    err,
    flags,
    hit_json,
    hits_table,
    injection_json,
    line,
    memories_table,
    memory_json,
    memory_line,
    namespace_json,
    namespaces_table,
    out,
    print_explanation,
    print_injection,
    print_original,
    print_report,
    print_stats,
    progress,
    report_json,
    safe,
    tier_label,
    usd,
)

T = TypeVar("T")

app = typer.Typer(
    name="tiered-memory",
    help="Long-term memory for LLM agents: tiers, decay, archival and token budgets.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
log = logging.getLogger(__name__)


# -- options of the command itself (before the subcommand) ----------------------------------


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tiered-memory {package_version()}")
        raise typer.Exit()


def package_version() -> str:
    try:
        return version("tiered-memory")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


class _StderrLines(logging.Handler):
    """Log records as one safe line each on the current stderr (`line`): a record can
    quote stored text, and the test runner swaps stderr between commands."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            typer.echo(f"{record.levelname.lower()}: {line(self.format(record))}", err=True)
        except Exception:
            self.handleError(record)


def log_level(verbose: int, quiet: bool) -> int:
    """Warnings by default; -v info, -vv debug; --quiet errors only."""
    if quiet:
        return logging.ERROR
    return {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)


def _configure_logging(level: int) -> None:
    """The library's records on stderr at `level`; the handler is installed once."""
    logger = logging.getLogger("tiered_memory")
    logger.setLevel(level)
    if not any(isinstance(h, _StderrLines) for h in logger.handlers):
        logger.addHandler(_StderrLines())


@app.callback()
def _options(
    _show_version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            help="print the version and exit",
            callback=_version,
            is_eager=True,
        ),
    ] = False,
    verbose: Annotated[
        int,
        typer.Option("--verbose", "-v", count=True, help="log what happens on stderr (-vv: debug)"),
    ] = 0,
    quiet: Annotated[bool, typer.Option("--quiet", help="log errors only, no warnings")] = False,
) -> None:
    """Long-term memory for LLM agents: tiers, decay, archival and token budgets."""
    if verbose and quiet:
        _fail("give --verbose or --quiet, not both", code=2)
    _configure_logging(log_level(verbose, quiet))


# -- options every command takes -------------------------------------------------------------

NamespaceOpt = Annotated[
    str | None,
    typer.Option(
        "--namespace", "-n", help="user/agent/tenant scope [default: from config, 'default']"
    ),
]
DbOpt = Annotated[
    Path | None,
    typer.Option(
        "--db",
        help="embedded SQLite store file [default: <user data folder>/tiered-memory/memory.db]",
        dir_okay=False,
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config", "-c", help="TOML configuration [default: $TIERED_MEMORY_CONFIG]", dir_okay=False
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON on stdout for scripts")]


@dataclass(frozen=True)
class Common:
    namespace: str | None
    db: Path | None
    config: Path | None
    as_json: bool

    def settings(self) -> TieredMemorySettings:
        overrides: dict[str, Any] = {}
        if self.db is not None:  # an explicit file means the embedded store, whatever else
            overrides["store"] = {"backend": "sqlite", "path": str(self.db)}
        return load_settings(self.config, **overrides)


def _fail(message: str, code: int = 1) -> NoReturn:
    """One line on stderr, never a traceback, for every error a user can cause."""
    typer.echo(f"error: {line(message)}", err=True)
    raise typer.Exit(code)


def _run(common: Common, body: Callable[[AsyncTieredMemory, str], Awaitable[T]]) -> T:
    """Open the configured memory, run one command's body, close it; errors -> one line."""

    async def main() -> T:
        settings = common.settings()
        # `-n ""` is a mistake (an unset variable), not a request for the default
        namespace = settings.namespace if common.namespace is None else common.namespace
        log.info("store: %s; namespace %r", _where(settings), namespace)
        memory = await AsyncTieredMemory.from_settings(settings)
        try:
            return await body(memory, namespace)
        finally:
            await memory.close()

    try:
        return asyncio.run(main())
    except TieredMemoryError as e:
        _fail(str(e))
    except OSError as e:
        _fail(f"{e.strerror or e}: {e.filename}" if e.filename else str(e))


def _where(settings: TieredMemorySettings) -> str:
    """Which store a command opens, for --verbose."""
    if settings.store.backend == "sqlite":
        return f"embedded SQLite {settings.resolved_db_path()}"
    parts = f"graph {settings.graph.backend}, objects {settings.objects.backend}"
    return f"{settings.store.backend} ({parts})"


def _emit(data: Any) -> None:
    typer.echo(json_printable(json.dumps(data, ensure_ascii=False, indent=2, default=str)))


def _checked(parse: Callable[[str], T], value: str) -> T:
    """Parse user input before anything is opened; a bad value is one line and exit 1."""
    try:
        return parse(value)
    except TieredMemoryError as e:
        _fail(str(e))


# -- writing ------------------------------------------------------------------------------------


def _api_default(parameter: str) -> Any:
    """The default of one parameter of `add()`: the command line states none of its own,
    so a memory added from the shell is the one Python's `add(text)` makes."""
    return inspect.signature(AsyncTieredMemory.add).parameters[parameter].default


# Read once at import: typer evaluates the annotations below only when it runs a command.
_TYPE_DEFAULT = MemoryType.parse(_api_default("memory_type")).value
_IMPORTANCE_DEFAULT = _api_default("importance")


@app.command()
def add(
    text: Annotated[str, typer.Argument(help="what to remember")],
    memory_type: Annotated[
        str | None,
        typer.Option(
            "--type",
            "-t",
            help="procedural, factual, project, episodic, or auto (detected from the text) "
            f"[default: {_TYPE_DEFAULT}, as Python's add()]",
            show_default=False,
        ),
    ] = None,
    importance: Annotated[
        float | None,
        typer.Option(
            help=f"0..1; >= 0.5 keeps it out of COLD [default: {_IMPORTANCE_DEFAULT}, "
            "as Python's add()]",
            show_default=False,
        ),
    ] = None,
    pin: Annotated[bool, typer.Option("--pin", help="never decays, always injected")] = False,
    source: Annotated[str, typer.Option(help="where it came from")] = "cli",
    namespace: NamespaceOpt = None,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Remember TEXT (in HOT, as every new capture)."""
    from tiered_memory.transfer import detect_type

    common = Common(namespace, db, config, as_json)
    chosen: dict[str, Any] = {}
    if memory_type is not None:
        detect = memory_type.strip().lower() == "auto"
        chosen["memory_type"] = (
            detect_type(text) if detect else _checked(MemoryType.parse, memory_type)
        )
    if importance is not None:
        chosen["importance"] = importance

    async def body(memory: AsyncTieredMemory, ns: str) -> Memory:
        return await memory.add(text, namespace=ns, pinned=pin, source=source, **chosen)

    m = _run(common, body)
    if as_json:
        _emit(memory_json(m))
    else:
        out.print(memory_line(m))


# -- reading -----------------------------------------------------------------------------------


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="what to look for")],
    tier: Annotated[
        list[str] | None, typer.Option("--tier", help="only these tiers (repeatable)")
    ] = None,
    deep: Annotated[bool, typer.Option("--deep", help="also COLD and archived summaries")] = False,
    k: Annotated[int, typer.Option("-k", "--k", help="how many hits")] = 10,
    namespace: NamespaceOpt = None,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Ranked hits for QUERY (nothing is counted as used; see `recall`)."""
    common = Common(namespace, db, config, as_json)
    tiers = [_checked(Tier.parse, t) for t in tier] if tier else None

    async def body(memory: AsyncTieredMemory, ns: str) -> list[Hit]:
        include_archived = deep or (tiers is not None and Tier.ARCHIVED in tiers)
        return list(
            await memory.search(
                query,
                namespace=ns,
                k=k,
                deep=deep,
                include_archived=include_archived,
                tiers=tiers,
            )
        )

    hits = _run(common, body)
    if as_json:
        _emit([hit_json(h) for h in hits])
        return
    if not hits:
        out.print("no hits")
        return
    out.print(hits_table(hits, f"{len(hits)} hit(s) for {safe(repr(query))}"))


@app.command("list")
def list_(
    tier: Annotated[str | None, typer.Option("--tier", help="hot, warm, cold or archived")] = None,
    limit: Annotated[int, typer.Option(help="page size")] = 50,
    after: Annotated[str | None, typer.Option(help="the last id of the previous page")] = None,
    namespace: NamespaceOpt = None,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Memories ordered by id, a page at a time."""
    common = Common(namespace, db, config, as_json)
    t = _checked(Tier.parse, tier) if tier else None

    async def body(memory: AsyncTieredMemory, ns: str) -> list[Memory]:
        return await memory.list(namespace=ns, tier=t, after_id=after, limit=limit)

    memories = _run(common, body)
    if as_json:
        _emit([memory_json(m) for m in memories])
        return
    out.print(memories_table(memories))


@app.command()
def stats(
    namespace: NamespaceOpt = None,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Counts and bytes per tier, flags and links, and the memories archival has set
    aside (quarantined) after repeated failures, with their last error."""
    common = Common(namespace, db, config, as_json)

    async def body(memory: AsyncTieredMemory, ns: str) -> tuple[Stats, list[QuarantinedMemory]]:
        return await memory.stats(namespace=ns), await memory.quarantined(namespace=ns)

    s, quarantined = _run(common, body)
    if as_json:
        data = s.model_dump(mode="json")
        data["total"] = s.total
        data["quarantined_memories"] = [q.model_dump(mode="json") for q in quarantined]
        _emit(data)
        return
    print_stats(s, quarantined)


@app.command()
def namespaces(
    prefix: Annotated[str, typer.Option(help="only namespaces whose name starts with this")] = "",
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Every namespace holding memories or archive records, with its memories per tier
    (names and counts only, never contents)."""
    common = Common(None, db, config, as_json)

    async def body(memory: AsyncTieredMemory, _ns: str) -> list[Stats]:
        names = await memory.namespaces(prefix=prefix)
        return [await memory.stats(namespace=name) for name in names]

    found = _run(common, body)
    if as_json:
        _emit([namespace_json(s) for s in found])
        return
    if not found:
        out.print("no namespaces" + (f" starting with {safe(repr(prefix))}" if prefix else ""))
        return
    out.print(namespaces_table(found))


@app.command()
def explain(
    memory_id: Annotated[str, typer.Argument(metavar="ID")],
    query: Annotated[str | None, typer.Option("--query", "-q", help="score against it")] = None,
    namespace: NamespaceOpt = None,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Every term of one memory's score (for --query, or its decay terms alone)."""
    common = Common(namespace, db, config, as_json)

    async def body(memory: AsyncTieredMemory, ns: str) -> Explanation:
        return await memory.explain(memory_id, query=query, namespace=ns)

    e = _run(common, body)
    if as_json:
        _emit(e.model_dump(mode="json"))
        return
    print_explanation(e)


@app.command()
def recall(
    query: Annotated[str, typer.Argument(help="the prompt to find context for")],
    budget: Annotated[int | None, typer.Option(help="tokens [default: policy, 1000]")] = None,
    max_items: Annotated[int | None, typer.Option(help="[default: no cap]")] = None,
    deep: Annotated[bool, typer.Option("--deep", help="also archived summaries")] = False,
    namespace: NamespaceOpt = None,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """What would be injected for QUERY, packed into a token budget by tier shares.
    Injected memories count as used."""
    common = Common(namespace, db, config, as_json)

    async def body(memory: AsyncTieredMemory, ns: str) -> tuple[Injection, dict[str, int]]:
        inj = await memory.recall(
            query, namespace=ns, budget_tokens=budget, max_items=max_items, deep=deep
        )
        return inj, share_caps(inj.budget_tokens, memory.policy.budget)

    inj, caps = _run(common, body)
    if as_json:
        _emit(injection_json(inj))
        return
    print_injection(inj, caps)


# -- flags and tiers ------------------------------------------------------------------------------


def _show_memory(m: Memory, verb: str, as_json: bool) -> None:
    if as_json:
        _emit(memory_json(m))
    else:
        shown = flags(m)
        out.print(f"{verb} {safe(m.id)}: {tier_label(m.tier)}{'  ' + shown if shown else ''}")


@app.command()
def forget(
    memory_id: Annotated[str, typer.Argument(metavar="ID")],
    hard: Annotated[
        bool, typer.Option("--hard", help="delete for good (and its archived original)")
    ] = False,
    namespace: NamespaceOpt = None,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Never inject this memory again (soft; `restore` undoes it), or --hard delete it."""
    common = Common(namespace, db, config, as_json)

    async def body(memory: AsyncTieredMemory, ns: str) -> None:
        await memory.forget(memory_id, namespace=ns, hard=hard)

    _run(common, body)
    if as_json:
        _emit({"id": memory_id, "forgotten": True, "hard": hard})
    else:
        out.print(f"{'deleted' if hard else 'forgot'} {safe(memory_id)}")


def _flag_command(
    name: str,
    verb: str,
    doc: str,
    call: Callable[[AsyncTieredMemory, str, str], Awaitable[Memory]],
) -> None:
    """Register a command that changes one memory by id and shows it (restore, pin,
    unpin): one body, so their options and output cannot drift apart."""

    def command(
        memory_id: Annotated[str, typer.Argument(metavar="ID")],
        namespace: NamespaceOpt = None,
        db: DbOpt = None,
        config: ConfigOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        common = Common(namespace, db, config, as_json)

        async def body(memory: AsyncTieredMemory, ns: str) -> Memory:
            return await call(memory, memory_id, ns)

        _show_memory(_run(common, body), verb, as_json)

    command.__doc__ = doc
    app.command(name)(command)


_flag_command(
    "restore",
    "restored",
    "Undo a soft forget; an archived memory comes back to WARM from its original.",
    lambda memory, memory_id, ns: memory.restore(memory_id, namespace=ns),
)
_flag_command(
    "pin",
    "pinned",
    "Never decays, never demoted, always a candidate for the pinned share.",
    lambda memory, memory_id, ns: memory.pin(memory_id, namespace=ns),
)
_flag_command(
    "unpin",
    "unpinned",
    "Let a pinned memory decay again.",
    lambda memory, memory_id, ns: memory.unpin(memory_id, namespace=ns),
)


@app.command()
def promote(
    memory_id: Annotated[str, typer.Argument(metavar="ID")],
    tier: Annotated[str, typer.Argument(help="hot or warm")] = "warm",
    namespace: NamespaceOpt = None,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Move a memory to a more active tier (HOT only ever this way)."""
    common = Common(namespace, db, config, as_json)
    target = _checked(Tier.parse, tier)

    async def body(memory: AsyncTieredMemory, ns: str) -> Memory:
        return await memory.promote(memory_id, target, namespace=ns)

    _show_memory(_run(common, body), "promoted", as_json)


@app.command()
def demote(
    memory_id: Annotated[str, typer.Argument(metavar="ID")],
    tier: Annotated[str, typer.Argument(help="warm or cold")],
    namespace: NamespaceOpt = None,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Move a memory to a less active tier (pinned and core memories are exempt)."""
    common = Common(namespace, db, config, as_json)
    target = _checked(Tier.parse, tier)

    async def body(memory: AsyncTieredMemory, ns: str) -> Memory:
        return await memory.demote(memory_id, target, namespace=ns)

    _show_memory(_run(common, body), "demoted", as_json)


# -- life cycle and archive -------------------------------------------------------------------


@app.command()
def maintain(
    every: Annotated[
        str | None, typer.Option(help="repeat every interval, e.g. 6h (Ctrl-C stops)")
    ] = None,
    runs: Annotated[
        int | None, typer.Option(help="with --every: stop after this many sweeps")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="report only, change nothing")] = False,
    all_namespaces: Annotated[
        bool, typer.Option("--all-namespaces", help="sweep every namespace of the store")
    ] = False,
    namespace: NamespaceOpt = None,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Apply every tier transition that is due, and archive; once, or --every interval."""
    common = Common(namespace, db, config, as_json)
    interval = _checked(parse_duration, every) if every else None
    if runs is not None and runs < 1:
        _fail("--runs must be at least 1")

    async def body(memory: AsyncTieredMemory, ns: str) -> None:
        done = 0
        while True:
            report = await memory.maintain(
                dry_run=dry_run, namespace=None if all_namespaces else ns
            )
            if as_json:
                typer.echo(json_printable(json.dumps(report_json(report), ensure_ascii=False)))
            else:
                print_report(report)
            done += 1
            if interval is None or (runs is not None and done >= runs):
                return
            await asyncio.sleep(interval.total_seconds())

    try:
        _run(common, body)
    except KeyboardInterrupt:
        err.print("stopped")


@app.command()
def archive(
    ids: Annotated[list[str] | None, typer.Argument(metavar="[ID]...")] = None,
    older_than: Annotated[
        str | None,
        typer.Option(help="archive what has not been used for this long, e.g. 90d"),
    ] = None,
    preview: Annotated[
        bool, typer.Option("--preview", help="show what would go and what it would cost")
    ] = False,
    namespace: NamespaceOpt = None,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Archive memories now: the given IDs; or those unused for --older-than; or, with
    neither, the ones the sweep finds eligible (COLD 180 days, or old and unimportant)."""
    common = Common(namespace, db, config, as_json)
    age = _checked(parse_duration, older_than) if older_than else None
    if ids and age is not None:
        _fail("give ids or --older-than, not both")

    async def body(memory: AsyncTieredMemory, ns: str) -> dict[str, Any]:
        chosen: ArchivePreview = await memory.archive_preview(
            ids or None, older_than=age, namespace=ns
        )
        result: dict[str, Any] = {
            "preview": preview,
            "candidates": [memory_json(m) for m in chosen.candidates],
            "estimate": chosen.estimate.model_dump(mode="json"),
            "archived": [],
        }
        if preview:
            return result
        archived: list[str] = []
        with progress(len(chosen.candidates), "archiving", not as_json) as advance:
            for m in chosen.candidates:
                if await memory.archive([m.id], namespace=ns, reason="cli"):
                    archived.append(m.id)
                advance(1)
        result["archived"] = archived
        return result

    result = _run(common, body)
    if as_json:
        _emit(result)
        return
    candidates = result["candidates"]
    if not candidates:
        out.print("nothing to archive")
        return
    out.print(archive_table(candidates, "would archive" if preview else "archived"))
    est = result["estimate"]
    out.print(
        f"cost: {est['summarizer_calls']} summariser call(s), ~{est['input_tokens']} input + "
        f"~{est['output_tokens']} output tokens, {est['bytes']} bytes of originals, "
        f"~{usd(est['cost_usd'])}"
    )


@app.command()
def expand(
    memory_id: Annotated[str, typer.Argument(metavar="ID")],
    namespace: NamespaceOpt = None,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The full original of an archived memory, read back from object storage."""
    common = Common(namespace, db, config, as_json)

    async def body(memory: AsyncTieredMemory, ns: str) -> dict[str, Any]:
        return await memory.expand(memory_id, namespace=ns)

    document = _run(common, body)
    if as_json:
        shown = dict(document)
        shown.pop("embedding", None)
        if isinstance(shown.get("memory"), dict):
            shown["memory"] = {k: v for k, v in shown["memory"].items() if k != "embedding"}
        _emit(shown)
        return
    print_original(document)


# -- import and export -------------------------------------------------------------------------


class ExportFormat(str, Enum):
    json = "json"
    sqlite = "sqlite"


class ImportFormat(str, Enum):
    auto = "auto"
    markdown = "markdown"
    json = "json"


@app.command()
def export(
    fmt: Annotated[ExportFormat, typer.Option("--format", "-f")] = ExportFormat.json,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="file to write [default for json: stdout]"),
    ] = None,
    namespace: NamespaceOpt = None,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Export a namespace: JSON (every field, round-trips through `import`), or a copy
    in a new SQLite file."""
    from tiered_memory import transfer

    common = Common(namespace, db, config, as_json)
    if fmt is ExportFormat.sqlite and output is None:
        _fail("--format sqlite needs --output FILE (a new file)")
    if output is not None and output.exists():
        _fail(f"{str(output)!r} already exists; export into a new file")

    async def body(memory: AsyncTieredMemory, ns: str) -> dict[str, Any]:
        total = await transfer.count_namespace(memory, ns)
        with progress(total, "exporting", output is not None and not as_json) as advance:
            if fmt is ExportFormat.sqlite:
                assert output is not None
                r = await transfer.export_sqlite(memory, ns, output, progress=advance)
                return {"format": "sqlite", "output": str(output), **r.as_dict()}
            document = await transfer.export_namespace(memory, ns, progress=advance)
        text = transfer.dumps(document)
        if output is None:
            return {"document": text}
        output.write_text(text + "\n", encoding="utf-8")
        return {
            "format": "json",
            "output": str(output),
            "namespace": ns,
            "memories": len(document["memories"]),
            "archives": len(document["archives"]),
            "links": len(document["links"]),
        }

    result = _run(common, body)
    if "document" in result:
        typer.echo(json_printable(result["document"]))
    elif as_json:
        _emit(result)
    else:
        out.print(
            f"exported {result['memories']} memories, {result['archives']} archived and "
            f"{result['links']} links of {safe(repr(result['namespace']))} to "
            f"{safe(result['output'])}"
        )


@app.command("import")
def import_(
    path: Annotated[
        Path, typer.Argument(help="MEMORY.md, a folder of .md files, or a JSON export")
    ],
    fmt: Annotated[ImportFormat, typer.Option("--format", "-f")] = ImportFormat.auto,
    importance: Annotated[float, typer.Option(help="markdown: importance of each note")] = 0.5,
    skip_existing: Annotated[
        bool, typer.Option("--skip-existing", help="json: skip ids already in the namespace")
    ] = False,
    keep_namespace: Annotated[
        bool,
        typer.Option("--keep-namespace", help="json: import into the namespace the export names"),
    ] = False,
    namespace: NamespaceOpt = None,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Import markdown notes (one memory per bullet or paragraph, headings as context,
    type detected, source = file) or a JSON export, all or nothing, into --namespace
    (default: the configured one; the export's own only with --keep-namespace)."""
    from tiered_memory import transfer

    common = Common(namespace, db, config, as_json)
    kind = fmt
    if kind is ImportFormat.auto:
        kind = ImportFormat.json if path.suffix.lower() == ".json" else ImportFormat.markdown
    if keep_namespace and kind is not ImportFormat.json:
        _fail("--keep-namespace applies to JSON exports only")
    if keep_namespace and namespace is not None:
        _fail("--keep-namespace imports into the namespace the export names; drop --namespace")

    async def body(memory: AsyncTieredMemory, ns: str) -> transfer.ImportResult:
        if kind is ImportFormat.json:
            document = transfer.load_document(path)
            total = sum(
                len(part) if isinstance(part := document.get(key), list) else 0
                for key in ("memories", "archives")
            )
            with progress(total, "importing", not as_json) as advance:
                return await transfer.import_document(
                    memory,
                    document,
                    namespace=None if keep_namespace else ns,
                    keep_namespace=keep_namespace,
                    skip_existing=skip_existing,
                    progress=advance,
                )
        notes, _ = transfer.read_markdown(path)
        with progress(len(notes), "importing", not as_json) as advance:
            return await transfer.import_markdown(
                memory, path, namespace=ns, importance=importance, progress=advance
            )

    if not path.exists():
        _fail(f"{str(path)!r} does not exist")
    result = _run(common, body)
    if as_json:
        _emit(result.as_dict())
        return
    extra = (
        f", {result.archives} archived, {result.links} links" if kind is ImportFormat.json else ""
    )
    out.print(
        f"imported {result.memories} memories{extra} into {safe(repr(result.namespace))}"
        + (f" ({len(result.skipped)} already there)" if result.skipped else "")
    )


# -- durability -----------------------------------------------------------------------------------

PROBLEMS_FOUND = 3  # `verify` ran to its end and found damage (1: it could not check)


def _store_file(common: Common) -> Path | None:
    """The embedded store's SQLite file, which must exist; None for a server store.
    (Opening a missing file would create an empty store, and back it up or verify it.)"""
    try:
        settings = common.settings()
    except TieredMemoryError as e:
        _fail(str(e))
    if settings.store.backend != "sqlite":
        return None
    path = settings.resolved_db_path()
    if not path.is_file():
        _fail(f"no store at {str(path)!r}; pass --db FILE (or --config) to name it")
    return path


@app.command()
def backup(
    destination: Annotated[Path, typer.Argument(help="a new (or empty) folder")],
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Back up the whole embedded store (every namespace) into DESTINATION: the SQLite
    file through SQLite's online backup API (one consistent copy, while other processes
    go on writing), then the original of every archive record in it, each checked
    against its checksum. Exit 0 when done, 1 when it failed (DESTINATION is left empty)."""
    from tiered_memory import backup as backups

    common = Common(None, db, config, as_json)
    if _store_file(common) is None:
        _fail(
            "backup copies the embedded store (--db FILE); back up a server store with "
            "its own tools"
        )

    async def body(memory: AsyncTieredMemory, _ns: str) -> backups.BackupReport:
        return await backups.backup(memory, destination)

    report = _run(common, body)
    if as_json:
        _emit(report.as_dict())
        return
    out.print(
        f"backed up {safe(report.database)} and {report.archives} archived original(s) "
        f"in {report.namespaces} namespace(s) to {safe(report.archive)}, {report.bytes} bytes"
    )


@app.command()
def verify(
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check the store without changing it: SQLite's full integrity check of the file,
    then every archived original against its record's size and sha256. Exit 0 when
    everything verified, 3 when problems were found (each is listed), 1 when the check
    could not run."""
    from tiered_memory import backup as backups

    common = Common(None, db, config, as_json)
    path = _store_file(common)
    report = backups.verify_file(path) if path is not None else backups.VerifyReport(None)
    if report.ok:  # a damaged file would not open: otherwise report it as it is

        async def body(memory: AsyncTieredMemory, _ns: str) -> backups.VerifyReport:
            return await backups.verify(memory)

        report = _run(common, body)
        report.database = path
    if as_json:
        _emit(report.as_dict())
    elif report.ok:
        where = f"{safe(path)}: integrity ok; " if path is not None else ""
        out.print(f"verified {where}{report.archives} archived original(s) match their records")
    else:
        for problem in report.problems:
            out.print(f"problem: {safe(problem)}")
        out.print(f"{len(report.problems)} problem(s) found; see docs/durability.md")
    if not report.ok:
        raise typer.Exit(PROBLEMS_FOUND)


# -- demo ---------------------------------------------------------------------------------------


@app.command()
def demo(
    embedder: Annotated[
        str, typer.Option(help="auto (local model if installed and on disk), hashing or local")
    ] = "auto",
    keep: Annotated[
        Path | None, typer.Option(help="keep the demo store in this new folder")
    ] = None,
    namespace: NamespaceOpt = None,
    db: DbOpt = None,
    config: ConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Play a few months of a user's conversation on a fresh store and a simulated clock:
    tiers moving, a budgeted recall, an archived memory found with --deep, expand."""
    from .demo import run_demo

    if db is not None or config is not None:
        _fail("the demo always runs on a fresh embedded store; use --keep FOLDER to keep it")
    if embedder not in ("auto", "hashing", "local"):
        _fail(f"unknown embedder {embedder!r}; expected auto, hashing or local")
    try:
        summary = run_demo(
            console=Console(file=sys.stderr) if as_json else out,
            embedder=embedder,
            keep=keep,
            namespace=namespace or "demo-user",
        )
    except TieredMemoryError as e:
        _fail(str(e))
    if as_json:
        _emit(summary)


# -- entry point --------------------------------------------------------------------------------


def _encodable_output() -> None:
    """On a terminal whose encoding is not UTF-8 (a legacy code page, LANG=C), write
    what it cannot encode as backslash escapes instead of dying on the first `é` or
    `…` with UnicodeEncodeError. Escapes are ASCII, and inside --json strings they are
    JSON's own (`\\u00e9`), so the output still parses to the stored text."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "utf-8").lower().replace("-", "")
        if isinstance(stream, io.TextIOWrapper) and not encoding.startswith("utf"):
            stream.reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> None:
    """The console script: usage errors are one line too (exit 2), like every other."""
    _encodable_output()
    try:
        code = app(args=list(argv) if argv is not None else None, standalone_mode=False)
    except typer.Abort:
        typer.echo("aborted", err=True)
        sys.exit(130)
    except TieredMemoryError as e:
        typer.echo(f"error: {line(e)}", err=True)
        sys.exit(1)
    except Exception as e:
        # click's usage errors (typer >= 0.2x vendors click, so match by shape, not class)
        message = getattr(e, "format_message", None)
        if not callable(message) or not hasattr(e, "exit_code"):
            raise
        typer.echo(f"error: {line(message())}", err=True)
        sys.exit(int(getattr(e, "exit_code", 2)) or 2)
    sys.exit(code if isinstance(code, int) else 0)
