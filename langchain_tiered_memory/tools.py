"""The agent-facing memory tools of seed 002, as LangChain tools.

`create_memory_tools(memory)` returns the nine of them. Each tool is one
engine call; the rules (what forget means, which promotions are allowed, how a score
is made) are the engine's, and its errors reach the model as a tool message that
says what went wrong, instead of ending the run.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.callbacks import (
    AsyncCallbackManagerForToolRun,
    CallbackManagerForToolRun,
)
from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, Field, model_validator

from tiered_memory import (
    Explanation,
    Hit,
    Memory,
    TieredMemory,
    TieredMemoryError,
)

from ._common import namespace_source, run_namespace

TierName = Literal["hot", "warm", "cold", "archived"]
MemoryTypeName = Literal["procedural", "factual", "project", "episodic"]

_ID_DESCRIPTION = "The id of the memory, exactly as shown by memory_recall or memory_store."


class RecallInput(BaseModel):
    query: str = Field(
        description="What to look for, in plain words (a question, a name, a topic)."
    )
    k: int = Field(default=5, ge=1, le=50, description="How many memories to return at most.")
    tier: TierName | None = Field(
        default=None,
        description=(
            "Only look in this tier (hot: new, warm: proven useful, cold: faded, "
            "archived: summaries of old memories). Leave empty for a normal recall."
        ),
    )
    deep: bool = Field(
        default=False,
        description="Also search faded (cold) memories and archived summaries.",
    )


class StoreInput(BaseModel):
    content: str = Field(
        description="The thing to remember, as one self-contained sentence "
        "(e.g. 'The user's daughter is called Ava')."
    )
    memory_type: MemoryTypeName = Field(
        default="episodic",
        description=(
            "procedural: how the user wants things done (kept longest); factual: facts "
            "about the user or the world; project: context of a piece of work; "
            "episodic: what happened when (fades fastest)."
        ),
    )
    importance: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="How much it matters, 0 to 1 (0.5 or more keeps it even if unused); "
        "leave empty if unsure.",
    )
    pinned: bool = Field(
        default=False,
        description="Pin it: never fades and is always put into context. Use sparingly.",
    )
    tier: Literal["hot", "warm", "cold"] = Field(
        default="hot",
        description=(
            "The tier it starts in: hot (new, the default), warm (known to matter for "
            "weeks), cold (background, only searched when nothing better is found; "
            "not for pinned memories)."
        ),
    )

    @model_validator(mode="after")
    def _pinned_is_never_cold(self) -> StoreInput:
        if self.pinned and self.tier == "cold":
            raise ValueError("a pinned memory is always put into context: store it hot or warm")
        return self


class MemoryIdInput(BaseModel):
    memory_id: str = Field(description=_ID_DESCRIPTION)


class ForgetInput(BaseModel):
    memory_id: str = Field(description=_ID_DESCRIPTION)
    hard: bool = Field(
        default=False,
        description="Delete it for good. Only when the user explicitly asks; "
        "a normal forget can be undone with memory_restore.",
    )


class PromoteInput(BaseModel):
    memory_id: str = Field(description=_ID_DESCRIPTION)
    tier: Literal["hot", "warm"] = Field(
        default="warm", description="The more active tier to move it to."
    )


class DemoteInput(BaseModel):
    memory_id: str = Field(description=_ID_DESCRIPTION)
    tier: Literal["warm", "cold"] = Field(description="The less active tier to move it to.")


class ExplainInput(BaseModel):
    memory_id: str = Field(description=_ID_DESCRIPTION)
    query: str | None = Field(
        default=None,
        description="The query to score it against; empty to explain its decay alone.",
    )


def _bad_arguments(error: Exception) -> str:
    """Tell the model which argument was wrong and why, so it can call again."""
    return f"Invalid arguments: {error}"


def _line(hit: Hit) -> str:
    m = hit.memory
    return (
        f"- [id={m.id} tier={hit.tier.value} type={m.memory_type.value} "
        f"score={hit.score:.3f}{' pinned' if m.pinned else ''}] {m.content}"
    )


def _state(memory: Memory) -> str:
    flags = [f"tier={memory.tier.value}", f"type={memory.memory_type.value}"]
    if memory.pinned:
        flags.append("pinned")
    if memory.do_not_inject:
        flags.append("forgotten")
    return f"{memory.id} ({', '.join(flags)})"


class MemoryTool(BaseTool):
    """Base of the memory tools: the run's namespace, errors as tool messages, sync and
    async.

    By default each call works in the namespace its run names under `user_id` (the
    agent's runtime context, else `config["configurable"]`), as `TieredMemoryMiddleware`
    does, so one set of tools serves many users; `namespace_key` names another key. A
    run that names none fails with `ConfigurationError` rather than writing somewhere
    nobody chose. `namespace` instead fixes one namespace, for a single-user app.
    """

    memory: TieredMemory
    namespace: str | None = None
    namespace_key: str | None = None

    def __init__(self, **data: Any) -> None:
        # A bad id or a refused demotion is something the model can act on: report it
        # as the tool's answer rather than ending the agent run.
        data.setdefault("handle_tool_error", True)
        data.setdefault("handle_validation_error", _bad_arguments)
        data["namespace"], data["namespace_key"] = namespace_source(
            "the memory tools", data.get("namespace"), data.get("namespace_key")
        )
        super().__init__(**data)

    def _resolve_namespace(self) -> str:
        if self.namespace is not None:
            return self.namespace
        assert self.namespace_key is not None  # namespace_source gives one or the other
        # Not a ToolException: the model cannot fix a run that names no user.
        return run_namespace(self.namespace_key, "the memory tools")

    def _run(
        self, *args: Any, run_manager: CallbackManagerForToolRun | None = None, **kwargs: Any
    ) -> str:
        # The namespace is read here, in the caller's thread, where the run's context is.
        return self.memory.run(self._guarded(self._resolve_namespace(), args, kwargs))

    async def _arun(
        self,
        *args: Any,
        run_manager: AsyncCallbackManagerForToolRun | None = None,
        **kwargs: Any,
    ) -> str:
        return await self.memory.arun(self._guarded(self._resolve_namespace(), args, kwargs))

    async def _guarded(
        self, namespace: str, positional: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> str:
        schema = self.args_schema
        if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise TypeError(f"{type(self).__name__}.args_schema must be a pydantic model")
        # A plain string input (tool.invoke("some-id")) arrives positionally.
        named = dict(zip(schema.model_fields, positional, strict=False))
        args = schema.model_validate({**named, **kwargs})
        try:
            return await self._execute(namespace, args)
        except TieredMemoryError as e:
            raise ToolException(f"{type(e).__name__}: {e}") from e

    async def _execute(self, namespace: str, args: Any) -> str:
        raise NotImplementedError


class MemoryRecallTool(MemoryTool):
    name: str = "memory_recall"
    description: str = (
        "Search long-term memory about the user and past conversations. Returns the "
        "best matching memories with their ids, tiers and scores. Use it before "
        "answering questions about the user's preferences, facts or past events."
    )
    args_schema: type[BaseModel] = RecallInput
    budget_tokens: int | None = Field(default=None, ge=0)
    """Token budget of a normal recall; None uses the memory policy's default."""

    async def _execute(self, namespace: str, args: RecallInput) -> str:
        engine = self.memory.aio
        hits: list[Hit]
        if args.tier is None:
            # A normal recall is a use: what the agent reads stays active.
            injection = await engine.recall(
                args.query,
                namespace=namespace,
                budget_tokens=self.budget_tokens,
                max_items=args.k,
                deep=args.deep,
            )
            hits = injection.items
        else:
            # Looking inside one tier is inspection, like the CLI's `search --tier`.
            hits = await engine.search(
                args.query, namespace=namespace, k=args.k, deep=args.deep, tiers=[args.tier]
            )
        if not hits:
            return f"No memories found for {args.query!r}."
        return "\n".join(_line(h) for h in hits)


class MemoryStoreTool(MemoryTool):
    name: str = "memory_store"
    description: str = (
        "Save something worth remembering about the user or the work into long-term "
        "memory (in the hot tier unless you choose another). Store one fact, preference "
        "or event per call. A near-duplicate of an existing memory strengthens that one "
        "instead."
    )
    args_schema: type[BaseModel] = StoreInput

    async def _execute(self, namespace: str, args: StoreInput) -> str:
        # Unset importance keeps the memory policy's default, not a number of ours.
        importance: dict[str, Any] = (
            {} if args.importance is None else {"importance": args.importance}
        )
        # Seed 002's tool assigns the tier; a near-duplicate stays where it is.
        memory = await self.memory.aio.add(
            args.content,
            namespace=namespace,
            memory_type=args.memory_type,
            pinned=args.pinned,
            source="agent",
            tier=args.tier,
            **importance,
        )
        if memory.content != args.content or memory.use_count > 0:  # (a new one has no use)
            return f"Already remembered as {_state(memory)}: {memory.content}"
        return f"Stored {_state(memory)}."


class MemoryForgetTool(MemoryTool):
    name: str = "memory_forget"
    description: str = (
        "Forget a memory: it will no longer be put into context (memory_restore undoes "
        "it). Use hard=true only when the user explicitly asks to delete it for good."
    )
    args_schema: type[BaseModel] = ForgetInput

    async def _execute(self, namespace: str, args: ForgetInput) -> str:
        await self.memory.aio.forget(args.memory_id, namespace=namespace, hard=args.hard)
        if args.hard:
            return f"Deleted {args.memory_id} permanently."
        return f"Forgot {args.memory_id}; memory_restore brings it back."


class MemoryRestoreTool(MemoryTool):
    name: str = "memory_restore"
    description: str = (
        "Undo memory_forget, or bring an archived memory back from its stored original."
    )
    args_schema: type[BaseModel] = MemoryIdInput

    async def _execute(self, namespace: str, args: MemoryIdInput) -> str:
        memory = await self.memory.aio.restore(args.memory_id, namespace=namespace)
        return f"Restored {_state(memory)}."


class MemoryPinTool(MemoryTool):
    name: str = "memory_pin"
    description: str = (
        "Pin a memory so it never fades and is always put into context. For standing "
        "instructions and key facts the user wants kept."
    )
    args_schema: type[BaseModel] = MemoryIdInput

    async def _execute(self, namespace: str, args: MemoryIdInput) -> str:
        memory = await self.memory.aio.pin(args.memory_id, namespace=namespace)
        return f"Pinned {_state(memory)}."


class MemoryUnpinTool(MemoryTool):
    name: str = "memory_unpin"
    description: str = "Unpin a memory: it fades and is recalled like any other again."
    args_schema: type[BaseModel] = MemoryIdInput

    async def _execute(self, namespace: str, args: MemoryIdInput) -> str:
        memory = await self.memory.aio.unpin(args.memory_id, namespace=namespace)
        return f"Unpinned {_state(memory)}."


class MemoryPromoteTool(MemoryTool):
    name: str = "memory_promote"
    description: str = (
        "Move a memory to a more active tier (cold -> warm, or to hot) so it is "
        "recalled more readily."
    )
    args_schema: type[BaseModel] = PromoteInput

    async def _execute(self, namespace: str, args: PromoteInput) -> str:
        memory = await self.memory.aio.promote(args.memory_id, args.tier, namespace=namespace)
        return f"Promoted {_state(memory)}."


class MemoryDemoteTool(MemoryTool):
    name: str = "memory_demote"
    description: str = (
        "Move a memory to a less active tier (hot -> warm -> cold) when it matters less "
        "now. Pinned memories cannot be demoted."
    )
    args_schema: type[BaseModel] = DemoteInput

    async def _execute(self, namespace: str, args: DemoteInput) -> str:
        memory = await self.memory.aio.demote(args.memory_id, args.tier, namespace=namespace)
        return f"Demoted {_state(memory)}."


class MemoryExplainTool(MemoryTool):
    name: str = "memory_explain"
    description: str = (
        "Explain why a memory ranks where it does: relevance, retention, frequency and "
        "tier factor, with the formula."
    )
    args_schema: type[BaseModel] = ExplainInput

    async def _execute(self, namespace: str, args: ExplainInput) -> str:
        explanation = await self.memory.aio.explain(
            args.memory_id, query=args.query, namespace=namespace
        )
        return _explanation(explanation)


def _explanation(e: Explanation) -> str:
    t = e.terms
    lines = [
        f"memory {e.id}: tier={e.tier.value} type={e.memory_type.value} "
        f"uses={e.use_count} last_used={e.last_used_at.isoformat()}"
        f"{' pinned' if e.pinned else ''}{' core' if e.core else ''}",
        e.formula,
        f"relevance: cosine={t.cosine:.3f} vector={t.vector:.3f} lexical={t.lexical:.3f} "
        f"graph={t.graph:.3f}",
        f"retention: recency={t.recency:.3f} half_life_days={t.half_life_days:.1f}",
    ]
    return "\n".join(lines)


TOOL_CLASSES: tuple[type[MemoryTool], ...] = (
    MemoryRecallTool,
    MemoryStoreTool,
    MemoryForgetTool,
    MemoryRestoreTool,
    MemoryPinTool,
    MemoryUnpinTool,
    MemoryPromoteTool,
    MemoryDemoteTool,
    MemoryExplainTool,
)


def create_memory_tools(
    memory: TieredMemory,
    namespace: str | None = None,
    *,
    namespace_key: str | None = None,
) -> list[BaseTool]:
    """The nine memory tools of seed 002, bound to `memory`.

    Each call works in the namespace its run names under `namespace_key` (default
    `"user_id"`; the runtime context, else `config["configurable"]`), matching
    `TieredMemoryMiddleware`; a run naming none raises `ConfigurationError`. Give
    `namespace` instead to fix one namespace for every call (a single-user app).
    """
    return [
        cls(memory=memory, namespace=namespace, namespace_key=namespace_key) for cls in TOOL_CLASSES
    ]
