"""`TieredMemoryBlock`: long-term tiered memory inside `llama_index.core.memory.Memory`."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import ChatMessage, TextBlock
from llama_index.core.bridge.pydantic import Field, model_validator
from llama_index.core.memory.memory import BaseMemoryBlock

from tiered_memory import (
    AsyncTieredMemory,
    ConfigurationError,
    MemoryInput,
    MemoryType,
    NamespaceError,
    TieredMemory,
    ValidationError,
    validation,
)
from tiered_memory.capture import CaptureRules


class TieredMemoryBlock(BaseMemoryBlock[str]):
    """Recalls what is relevant to the latest messages, within `budget_tokens` split by
    tier shares, and captures the messages `Memory` flushes out of its short-term queue.

    The block is scoped to one `namespace` (a user, an agent), which it must be given:
    every chat session of that user shares it, and nothing crosses to another namespace.
    Build one block per user's `Memory`, as LlamaIndex builds one `Memory` per session.
    Recalled memories count as used, which keeps them in the active tiers. Captures go
    through the engine's near-duplicate check, so a fact said twice strengthens one
    memory. Each captured message is typed by the core's capture rules (the ones the
    LangChain middleware and note import use), which sets how fast it fades.

    The block runs where the memory's connections live: on a `TieredMemory`'s own loop
    (LlamaIndex's sync `Memory` calls the block from a fresh loop each time), or on the
    caller's loop for an `AsyncTieredMemory`.
    """

    name: str = Field(default="long_term_memory", description="The block's name (a tag).")
    memory: TieredMemory | AsyncTieredMemory = Field(
        exclude=True, description="The engine; a TieredMemory works from sync and async code."
    )
    namespace: str = Field(description="Whose memories these are (the user of this chat).")
    budget_tokens: int | None = Field(
        default=None,
        description="Tokens the recalled context may take; None: the engine's default.",
    )
    priority: int = Field(
        default=1,
        description="1 lets Memory shorten this block (lowest scores first) under pressure; "
        "0 never truncates it (the budget still caps it).",
    )
    retrieval_context_window: int = Field(
        default=3, ge=1, description="How many of the latest messages form the recall query."
    )
    capture_roles: tuple[str, ...] = Field(
        default=("user", "assistant"), description="Roles whose flushed messages are kept."
    )
    memory_type: MemoryType | None = Field(
        default=None,
        description="Type of every captured message (sets its decay); None: each "
        "message's own, by `rules`.",
    )
    rules: CaptureRules = Field(
        default_factory=CaptureRules,
        description="Which type a message is: the first type rule it matches, else the "
        "rules' default_type; a message of no type is not kept.",
    )
    importance: float = Field(default=0.5, ge=0.0, le=1.0)

    @model_validator(mode="before")
    @classmethod
    def _names_its_namespace(cls, data: Any) -> Any:
        # A block with a default namespace would put every user's chats in one place.
        namespace = data.get("namespace") if isinstance(data, dict) else None
        needed = (
            "TieredMemoryBlock needs namespace= naming whose memories it holds, "
            "e.g. TieredMemoryBlock(memory=mem, namespace=user_id) in each user's Memory"
        )
        if namespace is None:
            raise ConfigurationError(needed)
        try:  # the one definition of a valid namespace
            validation.check_namespace(namespace)
        except NamespaceError as e:  # a ValueError: pydantic would wrap it in its own
            raise ConfigurationError(f"{needed}: {e}") from e
        return data

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        recent = _messages(messages)[-self.retrieval_context_window :]
        query = "\n".join(text for m in recent if (text := _text(m).strip()))
        if not query:
            return ""
        recall = self.memory.aio.recall(
            query, namespace=self.namespace, budget_tokens=self.budget_tokens
        )
        return (await self.memory.arun(recall)).text

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """One memory per message, "role: text", so a recalled line says who said it."""
        engine = self.memory.aio
        limit = engine.policy.limits.max_content_chars
        items: list[MemoryInput] = []
        for message in _messages(messages):
            role = message.role.value
            text = _text(message).strip()
            if role not in self.capture_roles or not text:
                continue
            kind = self.memory_type or self.rules.detect_type(text) or self.rules.default_type
            if kind is None:
                continue
            content = f"{role}: {text}"[:limit]  # a pasted document must not fail the chat
            session = message.additional_kwargs.get("session_id")
            metadata: dict[str, Any] = {"role": role}
            if isinstance(session, str):
                metadata["session_id"] = session
            items.append(
                MemoryInput(
                    content=content,
                    memory_type=kind,
                    importance=self.importance,
                    metadata=metadata,
                    source="llamaindex-chat",
                )
            )
        if items:
            await self.memory.arun(engine.add_many(items, namespace=self.namespace))

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """Drop whole lines from the end (the lowest-scored memories come last) until
        at least `tokens_to_truncate` tokens are gone; a memory is never cut mid-line."""
        if not isinstance(content, str):
            raise ValidationError(f"content must be a string, got {type(content).__name__}")
        validation.check_budget(tokens_to_truncate)  # a count of tokens, like a budget
        if tokens_to_truncate <= 0:
            return content
        count = self.memory.aio.tokens.count
        lines = content.splitlines()
        target = count(content) - tokens_to_truncate
        while lines and count("\n".join(lines)) > target:
            lines.pop()
        return "\n".join(lines) if lines else None


def _messages(messages: object) -> list[ChatMessage]:
    """A list of ChatMessage (None is none); anything else is refused before use."""
    if messages is None:
        return []
    listed = validation.check_list(messages, "messages")
    for message in listed:
        if not isinstance(message, ChatMessage):
            raise ValidationError(
                f"messages must be ChatMessage objects, got {type(message).__name__}"
            )
    return listed


def _text(message: ChatMessage) -> str:
    return "".join(b.text for b in message.blocks if isinstance(b, TextBlock))


__all__ = ["TieredMemoryBlock"]
