"""Run the MCP server: open the configured memory, serve one transport until the
client (stdio) or a signal (HTTP) ends it, then close the memory.

stdio serves the process that started it, in one namespace. Streamable HTTP binds to
127.0.0.1 unless told otherwise; anywhere else it needs bearer tokens (`access`).
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import uvicorn

from tiered_memory.config import TieredMemorySettings
from tiered_memory.engine import AsyncTieredMemory
from tiered_memory.errors import ConfigurationError
from tiered_memory.namespaces import check_namespace
from tiered_memory.policy import Limits

from .access import BearerGate, Scoping, TokenMap, check_binding
from .tools import build_server

Transport = Literal["stdio", "http"]
PATH = "/mcp"


@dataclass(frozen=True)
class ServeOptions:
    """What the operator chose at start; checked before anything is opened."""

    transport: Transport = "stdio"
    namespace: str | None = None
    tokens: TokenMap | None = None
    host: str = "127.0.0.1"
    port: int = 8765

    def check(self, limits: Limits) -> Scoping:
        if self.transport == "stdio" and self.tokens is not None:
            raise ConfigurationError(
                "--tokens applies to --transport http; stdio serves the process that started "
                "it, in one --namespace"
            )
        if self.tokens is not None and self.namespace is not None:
            raise ConfigurationError(
                "with --tokens each token's namespace comes from the token file; drop --namespace"
            )
        if self.transport == "http":
            check_binding(self.host, self.tokens)
            if not 0 <= self.port <= 65_535:
                raise ConfigurationError(f"--port {self.port} is not a port (0..65535)")
        if self.tokens is not None:
            return Scoping(tokens=self.tokens)
        return Scoping(namespace=str(check_namespace(self.namespace or "default", limits)))


async def serve(
    settings: TieredMemorySettings,
    options: ServeOptions,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve until stdin closes (stdio) or SIGINT/SIGTERM (HTTP). `on_ready` gets the
    address once the HTTP server listens (the real port when `port` was 0)."""
    scoping = options.check(settings.policy.limits)
    memory = await AsyncTieredMemory.from_settings(settings)
    try:
        server = build_server(memory, scoping)
        if options.transport == "stdio":
            await server.run_stdio_async()
            return
        app: Any = server.streamable_http_app(streamable_http_path=PATH, host=options.host)
        if options.tokens is not None:
            app = BearerGate(app, options.tokens)
        http = _Uvicorn(
            uvicorn.Config(
                app,
                host=options.host,
                port=options.port,
                log_level="warning",
                lifespan="on",
                timeout_graceful_shutdown=5,
            ),
            on_ready,
        )
        try:
            await http.serve()
        except SystemExit as e:  # uvicorn's way out of a failed start
            raise ConfigurationError(
                f"the HTTP server could not start on {options.host}:{options.port} (is the "
                "port in use?); pick another with --port"
            ) from e
    finally:
        await memory.close()


class _Uvicorn(uvicorn.Server):
    """uvicorn, stopped gracefully by SIGINT or SIGTERM without re-raising the signal
    afterwards (uvicorn's default), so the memory is closed and the exit code is 0;
    and telling `on_ready` where it listens (the real port when asked for port 0)."""

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[str], None] | None) -> None:
        super().__init__(config)
        self.on_ready = on_ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.on_ready is not None and self.servers and not self.should_exit:
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            self.on_ready(f"http://{shown}:{port}{PATH}")

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        originals = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in originals.items():
                signal.signal(sig, handler)


__all__ = ["PATH", "ServeOptions", "Transport", "serve"]
