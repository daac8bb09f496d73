"""`TieredMemoryMiddleware`: automatic recall and capture for `create_agent` agents.

The two hooks of seed 002. Before the agent runs, the memory recalls for the user's
latest message (once per run, so a tool loop does not count the same memories as used
again and again) and every model call of the run gets that context in its system
prompt. After the run, the user's statements and the assistant's conclusions are
captured as HOT memories through the engine's `add_many`, which deduplicates.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, cast

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ContextT, OmitFromInput, ResponseT
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel, ConfigDict, Field, field_validator
from typing_extensions import NotRequired

from tiered_memory import MemoryInput, MemoryType, TieredMemory

from ._common import namespace_source, run_namespace, run_sync, thread_id
from .tools import create_memory_tools

DEFAULT_HEADER = (
    "Long-term memory about this user, from earlier conversations (pinned first, then "
    "by relevance). Use it when it helps; it may be out of date.\n{memories}"
)

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def _compiles(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as e:
        raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {e}") from e
    return pattern


class TypeRule(BaseModel):
    """A sentence matching `pattern` (a case-insensitive regex) is of `memory_type`."""

    model_config = ConfigDict(frozen=True)

    memory_type: MemoryType
    pattern: str

    @field_validator("pattern")
    @classmethod
    def _valid(cls, v: str) -> str:
        return _compiles(v)


_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"

DEFAULT_TYPE_RULES: tuple[TypeRule, ...] = (
    TypeRule(
        memory_type=MemoryType.PROCEDURAL,
        pattern=r"\b(?:always|never|prefers?|preferred|don't|do not|must|should)\b",
    ),
    TypeRule(
        memory_type=MemoryType.EPISODIC,
        pattern=(
            r"\b(?:yesterday|today|tonight|tomorrow|ago|last (?:night|week|month|year)"
            rf"|this (?:morning|afternoon|evening|week)|(?:on |last |next ){_WEEKDAY})\b"
            rf"|\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b{_MONTH} \d{{1,2}}(?:st|nd|rd|th)?\b"
        ),
    ),
    TypeRule(
        memory_type=MemoryType.FACTUAL,
        pattern=r"\b(?:is|are|was|were|am|called|named|lives?|works?|has|have)\b",
    ),
)


class Capture(BaseModel):
    """One sentence a finished turn offers to long-term memory."""

    content: str
    memory_type: MemoryType
    role: str


DEFAULT_SKIP_PATTERNS: tuple[str, ...] = (
    # requests to the assistant, memory commands included: acted on, not facts
    r"^(?:please\s+)?(?:can|could|would|will) you\b",
    r"^(?:please\s+)?(?:pin|unpin|forget|restore|promote|demote|remind|tell|show)\b",
    # chit-chat and the assistant's own uncertainty
    r"^(?:got it|thanks|thank you|noted|sure|okay|ok|hello|hi|hey)\b",
    r"\bI (?:don't|do not|didn't) (?:know|remember|have)\b",
    r"\bI(?:'m| am) not sure\b",
)


class CaptureRules(BaseModel):
    """What of a finished turn is worth keeping, and as which memory type.

    A sentence is kept when it is a statement (not a question), has at least
    `min_words` words, matches none of `skip_patterns` (requests, memory commands,
    chit-chat), and matches one of `type_rules` (first match wins: by default
    "always/never/prefer" is procedural, dates and "yesterday" episodic,
    "is/are/called" factual). A user sentence matching no type rule is kept as
    `default_type`, or dropped when that is None. An assistant sentence must match a
    type rule, and is dropped when it only restates a memory injected for this turn:
    repeating what was recalled is not a new conclusion.
    """

    model_config = ConfigDict(frozen=True)

    type_rules: tuple[TypeRule, ...] = DEFAULT_TYPE_RULES
    skip_patterns: tuple[str, ...] = DEFAULT_SKIP_PATTERNS
    default_type: MemoryType | None = MemoryType.EPISODIC
    capture_user: bool = True
    capture_assistant: bool = True
    min_words: int = Field(default=3, ge=1)
    max_chars: int = Field(default=1000, ge=1)
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    """Importance of captured memories; None keeps the memory policy's default."""

    @field_validator("skip_patterns")
    @classmethod
    def _all_compile(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            _compiles(pattern)
        return patterns

    def detect_type(self, sentence: str) -> MemoryType | None:
        for rule in self.type_rules:
            if re.search(rule.pattern, sentence, flags=re.IGNORECASE):
                return rule.memory_type
        return None

    def sentences(self, text: str) -> list[str]:
        """Statements of `text` long enough to mean something on their own."""
        out: list[str] = []
        for raw in _SENTENCE_END.split(text):
            sentence = raw.strip()
            if not sentence or sentence.endswith("?") or len(sentence) > self.max_chars:
                continue
            if len(sentence.split()) < self.min_words:
                continue
            if any(re.search(p, sentence, flags=re.IGNORECASE) for p in self.skip_patterns):
                continue
            out.append(sentence)
        return out

    def extract(self, messages: Sequence[AnyMessage], recalled: str = "") -> list[Capture]:
        """The captures of the last turn: the user's last message and the assistant's
        final answer after it (tool calls and tool results are not conclusions).

        `recalled` is the memory text injected for the turn.
        """
        start = _last_human_index(messages)
        if start is None:
            return []
        turn = messages[start:]
        captures: list[Capture] = []
        if self.capture_user:
            for sentence in self.sentences(turn[0].text):
                kind = self.detect_type(sentence) or self.default_type
                if kind is not None:
                    captures.append(Capture(content=sentence, memory_type=kind, role="user"))
        if self.capture_assistant:
            answer = _final_answer(turn[1:])
            known = [_normal(line[2:]) for line in recalled.splitlines() if line.startswith("- ")]
            if answer is not None:
                for sentence in self.sentences(answer.text):
                    kind = self.detect_type(sentence)
                    restated = any(k and k in _normal(sentence) for k in known)
                    if kind is not None and not restated:
                        captures.append(
                            Capture(content=sentence, memory_type=kind, role="assistant")
                        )
        return captures


def _normal(text: str) -> str:
    return " ".join(text.lower().split()).strip(" .!")


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
        return run_sync(self.memory, self._recall(state, self._namespace(runtime)))

    async def abefore_agent(
        self, state: TieredMemoryState[ResponseT], runtime: Runtime[ContextT]
    ) -> dict[str, Any] | None:
        return await self._recall(state, self._namespace(runtime))

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
            run_sync(self.memory, self._capture(state, self._namespace(runtime), thread_id()))
        return None

    async def aafter_agent(
        self, state: TieredMemoryState[ResponseT], runtime: Runtime[ContextT]
    ) -> dict[str, Any] | None:
        if self.capture:
            await self._capture(state, self._namespace(runtime), thread_id())
        return None

    async def _capture(
        self, state: TieredMemoryState[ResponseT], namespace: str, thread: str | None
    ) -> None:
        captures = self.rules.extract(state["messages"], state.get("memory_context") or "")
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
