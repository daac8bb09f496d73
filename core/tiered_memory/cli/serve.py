"""`tiered-memory serve`: the memory tools over MCP (the [mcp] extra), for desktop
assistants and IDE agents. How serving works is `tiered_memory.mcp_server`'s; this is
only its command line."""

from __future__ import annotations

import asyncio
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from tiered_memory.errors import TieredMemoryError

from .commands import Common, ConfigOpt, DbOpt, NamespaceOpt, _fail, app


class TransportName(str, Enum):
    stdio = "stdio"
    http = "http"


@app.command()
def serve(
    transport: Annotated[
        TransportName,
        typer.Option(help="stdio (started by the MCP client) or http (streamable HTTP)"),
    ] = TransportName.stdio,
    host: Annotated[
        str, typer.Option(help="http: address to bind; beyond loopback it needs --tokens")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="http: port (0 picks a free one)")] = 8765,
    tokens: Annotated[
        Path | None,
        typer.Option(
            "--tokens",
            help="http: TOML file of bearer tokens, each mapped to its namespace "
            '([tokens] "<token>" = "<namespace>")',
            dir_okay=False,
        ),
    ] = None,
    namespace: NamespaceOpt = None,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Serve the memory tools (store, search, recall, forget, restore, pin, unpin,
    expand, stats) to MCP clients, in one namespace (--namespace), or per bearer token
    (--tokens). Runs until the client closes stdio, or until Ctrl-C / SIGTERM."""
    try:
        from tiered_memory.mcp_server import ServeOptions, load_tokens
        from tiered_memory.mcp_server import serve as run_server
    except TieredMemoryError as e:  # the [mcp] extra is missing
        _fail(str(e))

    def ready(url: str) -> None:
        scope = (
            f"{len(token_map.entries)} bearer token(s)"
            if token_map is not None
            else f"namespace {options.namespace!r}"
        )
        typer.echo(f"serving MCP over streamable HTTP at {url} ({scope})", err=True)

    try:
        settings = Common(namespace, db, config, False).settings()
        token_map = load_tokens(tokens, settings.policy.limits) if tokens is not None else None
        if namespace is None and token_map is None:
            namespace = settings.namespace
        options = ServeOptions(
            transport=transport.value,
            namespace=namespace,
            tokens=token_map,
            host=host,
            port=port,
        )
        asyncio.run(run_server(settings, options, on_ready=ready))
    except TieredMemoryError as e:
        _fail(str(e))
    except OSError as e:
        _fail(f"{e.strerror or e}: {e.filename}" if e.filename else str(e))
    except KeyboardInterrupt:
        pass
