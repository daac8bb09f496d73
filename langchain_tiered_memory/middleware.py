"""`TieredMemoryMiddleware`: automatic recall and capture for `create_agent` agents.

The two hooks of seed 002. Before the agent runs, the memory recalls for the user's
latest message (once per run, so a tool loop does not count the same memories as used
again and again) and every model call of the run gets that context in its system
prompt. After the run, the user's statements and the assistant's conclusions are
captured as HOT memories through the engine's `add_many`, which deduplicates. What is
worth capturing, and as which type, is the core's `CaptureRules` (`tiered_memory.capture`),
the rules the LlamaIndex memory block and note import use too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, cast

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ContextT, OmitFromInput, ResponseT
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from typing_extensions import NotRequired

from tiered_memory import MemoryInput, TieredMemory
from tiered_memory.capture import Capture, CaptureRules, TypeRule

from ._common import namespace_source, run_namespace, thread_id
from .tools import create_memory_tools

DEFAULT_HEADER = (
    "Long-term memory about this user, from earlier conversations (pinned first, then "
    "by relevance). Use it when it helps; it may be out of date.\n{memories}"
)


def last_turn(messages: Sequence[AnyMessage]) -> tuple[str | None, str | None]:
    """The texts of the last turn: the user's last message and the assistant's final
    answer after it (tool calls and tool results are not conclusions)."""
    start = _last_human_index(messages)
    if start is None:
        return None, None
    answer = _final_answer(messages[start + 1 :])
    return messages[start].text, answer.text if answer is not None else None


def captures_of(
    messages: Sequence[AnyMessage], rules: CaptureRules, recalled: str = ""
) -> list[Capture]:
    """What `rules` keep of the last turn of `messages`; `recalled` is the memory text
    injected for the turn (restating it is not a new conclusion)."""
    user, answer = last_turn(messages)
    return rules.capture(user, answer, recalled)


def _last_human_index(messages: Sequence[AnyMessage]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            return i
    return None


def _final_answer(messages: Sequence[AnyMessage]) -> AIMessage | None:
    for message in reversed(messages):
        if isinstance(message, AIMessage) and not message.tool_calls and message.text.strip():
            return message
    return None


def latest_user_text(messages: Sequence[AnyMessage]) -> str | None:
    i = _last_human_index(messages)
    if i is None:
        return None
    text = messages[i].text.strip()
    return text or None


class TieredMemoryState(AgentState[ResponseT]):
    """What the middleware recalled for this run; also returned by `invoke`."""

    memory_context: Annotated[NotRequired[str], OmitFromInput]
    """The rendered memories injected into every model call of the run."""
    memory_ids: Annotated[NotRequired[list[str]], OmitFromInput]
    """Ids of the injected memories, in rendered order."""


class TieredMemoryMiddleware(AgentMiddleware[TieredMemoryState[ResponseT], ContextT, ResponseT]):
    """Give a `create_agent` agent tiered long-term memory.

    Example:
        ```python
        agent = create_agent(
            model,
            middleware=[TieredMemoryMiddleware(mem, namespace_key="user_id")],
        )
        agent.invoke({"messages": [...]}, context={"user_id": "user-42"})
        ```

    The namespace of a run is `context[namespace_key]` (a dict or an object with that
    attribute), else `config["configurable"][namespace_key]`: one agent serves many
    users, and no user's memories reach another's prompt. A run naming none raises
    `ConfigurationError` before anything is recalled or stored; it never falls back to
    a shared namespace. A single-user app can pass `namespace=` instead.
    """

    state_schema = TieredMemoryState  # type: ignore[assignment]

    def __init__(
        self,
        memory: TieredMemory,
        *,
        namespace: str | None = None,
        namespace_key: str | None = None,
        budget_tokens: int | None = None,
        deep: bool = False,
        capture: bool = True,
        rules: CaptureRules | None = None,
        header: str = DEFAULT_HEADER,
        include_tools: bool = False,
    ) -> None:
        """
        Args:
            memory: The memory to recall from and capture into.
            namespace: One fixed namespace for every run (a single-user app); not
                together with `namespace_key`.
            namespace_key: Key of the run's context/configurable holding the namespace
                (default `"user_id"` when `namespace` is not given).
            budget_tokens: Tokens of memory per prompt; None uses the memory policy's
                default (1000).
            deep: Also recall COLD memories and archived summaries.
            capture: Store the turn's statements after each run.
            rules: What is worth capturing, and as which memory type.
            header: System-prompt text around the memories; must contain `{memories}`.
            include_tools: Also give the agent the nine memory tools (same namespace).
        """
        super().__init__()
        if "{memories}" not in header:
            raise ValueError("header must contain '{memories}' where the memories go")
        self.memory = memory
        self.namespace, self.namespace_key = namespace_source(
            "TieredMemoryMiddleware", namespace, namespace_key
        )
        self.budget_tokens = budget_tokens
        self.deep = deep
        self.capture = capture
        self.rules = rules or CaptureRules()
        self.header = header
        self.tools = (
            create_memory_tools(memory, self.namespace, namespace_key=self.namespace_key)
            if include_tools
            else []
        )

    # -- recall ---------------------------------------------------------------------

    def _namespace(self, runtime: Runtime[ContextT]) -> str:
        if self.namespace is not None:
            return self.namespace
        assert self.namespace_key is not None  # namespace_source gives one or the other
        context = getattr(runtime, "context", None)
        return run_namespace(self.namespace_key, "TieredMemoryMiddleware", context=context)

    def before_agent(
        self, state: TieredMemoryState[ResponseT], runtime: Runtime[ContextT]
    ) -> dict[str, Any] | None:
        return self.memory.run(self._recall(state, self._namespace(runtime)))

    async def abefore_agent(
        self, state: TieredMemoryState[ResponseT], runtime: Runtime[ContextT]
    ) -> dict[str, Any] | None:
        return await self.memory.arun(self._recall(state, self._namespace(runtime)))

    async def _recall(self, state: TieredMemoryState[ResponseT], namespace: str) -> dict[str, Any]:
        query = latest_user_text(state["messages"])
        if query is None:
            return {"memory_context": "", "memory_ids": []}
        injection = await self.memory.aio.recall(
            query, namespace=namespace, budget_tokens=self.budget_tokens, deep=self.deep
        )
        return {
            "memory_context": injection.text,
            "memory_ids": [h.memory.id for h in injection.items],
        }

    def _with_memories(self, request: ModelRequest[ContextT]) -> ModelRequest[ContextT]:
        text = request.state.get("memory_context")
        if not isinstance(text, str) or not text:
            return request
        block = self.header.replace("{memories}", text)  # other braces are left as they are
        if request.system_message is None:
            return request.override(system_message=SystemMessage(content=block))
        content = [
            *request.system_message.content_blocks,
            {"type": "text", "text": f"\n\n{block}"},
        ]
        return request.override(
            system_message=SystemMessage(content=cast("list[str | dict[str, Any]]", content))
        )

    def wrap_model_call(
        self,
        request: ModelRequest[ContextT],
        handler: Callable[[ModelRequest[ContextT]], ModelResponse[ResponseT]],
    ) -> ModelResponse[ResponseT]:
        return handler(self._with_memories(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[ContextT],
        handler: Callable[[ModelRequest[ContextT]], Awaitable[ModelResponse[ResponseT]]],
    ) -> ModelResponse[ResponseT]:
        return await handler(self._with_memories(request))

    # -- capture --------------------------------------------------------------------

    def after_agent(
        self, state: TieredMemoryState[ResponseT], runtime: Runtime[ContextT]
    ) -> dict[str, Any] | None:
        if self.capture:
            self.memory.run(self._capture(state, self._namespace(runtime), thread_id()))
        return None

    async def aafter_agent(
        self, state: TieredMemoryState[ResponseT], runtime: Runtime[ContextT]
    ) -> dict[str, Any] | None:
        if self.capture:
            await self.memory.arun(self._capture(state, self._namespace(runtime), thread_id()))
        return None

    async def _capture(
        self, state: TieredMemoryState[ResponseT], namespace: str, thread: str | None
    ) -> None:
        captures = captures_of(state["messages"], self.rules, state.get("memory_context") or "")
        if not captures:
            return
        importance: dict[str, Any] = (
            {} if self.rules.importance is None else {"importance": self.rules.importance}
        )
        items = [
            MemoryInput(
                content=c.content,
                memory_type=c.memory_type,
                source=f"conversation:{c.role}",
                metadata={"role": c.role, **({"thread_id": thread} if thread else {})},
                **importance,
            )
            for c in captures
        ]
        await self.memory.aio.add_many(items, namespace=namespace)


__all__ = [
    "Capture",
    "CaptureRules",
    "TieredMemoryMiddleware",
    "TieredMemoryState",
    "TypeRule",
    "captures_of",
    "last_turn",
    "latest_user_text",
]
