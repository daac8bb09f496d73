"""`tiered-memory serve`: the memory tools for any MCP client (the [mcp] extra)."""

from tiered_memory.errors import missing_extra

try:
    import mcp  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise missing_extra(e.name or "mcp", "mcp") from e

from .access import AccessDeniedError, BearerGate, Scoping, TokenMap, check_binding, load_tokens
from .run import ServeOptions, serve
from .tools import TOOLS, MemoryTools, build_server

__all__ = [
    "TOOLS",
    "AccessDeniedError",
    "BearerGate",
    "MemoryTools",
    "Scoping",
    "ServeOptions",
    "TokenMap",
    "build_server",
    "check_binding",
    "load_tokens",
    "serve",
]
