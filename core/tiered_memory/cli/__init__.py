"""The `tiered-memory` command line (the [cli] extra): `commands` (what each command
does, over the public API), `rendering` (how results look), and `demo` (a scripted few
months on a fresh store)."""

from tiered_memory.errors import missing_extra

try:
    import rich  # noqa: F401
    import typer  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise missing_extra(e.name or "typer", "cli") from e

from . import serve as _serve  # noqa: F401  (registers `serve`; its [mcp] extra loads when run)
from .commands import app, main

__all__ = ["app", "main"]
