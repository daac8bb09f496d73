"""Fail with the extra to install, not a bare ModuleNotFoundError, when LangChain is absent."""

from __future__ import annotations

try:
    import langchain.agents  # noqa: F401
    import langchain_core  # noqa: F401
    import langgraph.store.base  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    from tiered_memory.errors import missing_extra

    raise missing_extra("langchain, langchain-core and langgraph", "langchain") from e
