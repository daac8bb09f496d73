"""A LangChain agent with tiered long-term memory: automatic recall and capture, plus tools.

    python examples/langchain_chatbot.py            # offline, a scripted chat model
    ANTHROPIC_API_KEY=... python examples/langchain_chatbot.py   # Claude, if installed

Needs `pip install 'tiered-memory[langchain]'`; Claude also needs `langchain-anthropic`.
Two users talk to one agent over several days and threads. Every turn prints the
memory the middleware injected into the system prompt: what Alice says on Monday is
recalled in Tuesday's thread, and never in Bob's.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langgraph.checkpoint.memory import InMemorySaver

from langchain_tiered_memory import TieredMemoryMiddleware
from tiered_memory import HashingEmbedder, ManualClock, TieredMemory

SYSTEM_PROMPT = (
    "You are a friendly assistant with long-term memory. Use the memories you are given, "
    "and the memory tools when the user asks you to remember, pin or forget something."
)

# (day, user, thread, message)
CONVERSATION = [
    (0, "alice", "monday", "My daughter is called Ava."),
    (0, "alice", "monday", "I always want answers in British English."),
    (1, "alice", "tuesday", "What is my daughter called?"),
    (1, "alice", "tuesday", "Please pin my preference for British English."),
    (2, "bob", "wednesday", "What is my daughter called?"),
    (3, "alice", "thursday", "Which English do I want my answers in?"),
]

_WORD = re.compile(r"[a-z]+")
_STOP = frozenset(
    _WORD.findall(
        "a an and are do i in is me my of please that the to what which want with you your"
    )
)


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _memory_lines(messages: Sequence[BaseMessage]) -> list[str]:
    system = next((m.text for m in messages if m.type == "system"), "")
    return [line[2:] for line in system.splitlines() if line.startswith("- ")]


class ScriptedChatModel(BaseChatModel):
    """A stand-in for Claude that answers from the memories in its system prompt.

    Questions are answered with the injected memory sharing the most words with them;
    a request to pin calls `memory_recall`, then `memory_pin` on the first id found.
    """

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, AIMessage]:
        return self  # the script knows the tools' names

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage) and last.name == "memory_recall":
            found = re.search(r"id=(\w+)", last.text)
            if found is None:
                return AIMessage("I could not find that in my memory.")
            return _tool_call("memory_pin", {"memory_id": found.group(1)})
        if isinstance(last, ToolMessage):
            return AIMessage(f"Done. {last.text}")
        question = last.text
        if "pin" in question.lower():
            topic = re.sub(r"(?i)\b(please|pin)\b", " ", question).strip(" .")
            return _tool_call("memory_recall", {"query": topic, "k": 1})
        if question.rstrip().endswith("?"):
            asked = _words(question)
            scored = [(len(asked & _words(line)), line) for line in _memory_lines(messages)]
            best = max(scored, default=(0, ""))
            if best[0] == 0:
                return AIMessage("I don't know that yet.")
            return AIMessage(f"From what you told me: {best[1]}")
        return AIMessage("Got it, thank you.")


def _tool_call(name: str, args: dict[str, Any]) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call-{name}"}])


def _this_turn(messages: list[BaseMessage]) -> list[BaseMessage]:
    starts = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    return messages[starts[-1] :] if starts else messages


def chat_model() -> BaseChatModel:
    """Claude when a key and langchain-anthropic are there, else the offline script."""
    if os.environ.get("ANTHROPIC_API_KEY"):
        try:
            from langchain_anthropic import ChatAnthropic
        except ImportError:
            print("ANTHROPIC_API_KEY is set but langchain-anthropic is not installed; offline.")
        else:
            model = os.environ.get("ANTHROPIC_MODEL", "claude-haiku-4-5")
            print(f"model: Claude ({model})")
            return ChatAnthropic(model=model)  # type: ignore[call-arg]
    print("model: scripted (offline)")
    return ScriptedChatModel()


def main() -> None:
    clock = ManualClock(datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc))
    folder = Path(tempfile.mkdtemp(prefix="tiered-memory-chatbot-"))
    with TieredMemory.embedded(
        folder / "memory.db", embedder=HashingEmbedder(), clock=clock
    ) as memory:
        agent = create_agent(
            model=chat_model(),
            system_prompt=SYSTEM_PROMPT,
            middleware=[
                TieredMemoryMiddleware(
                    memory, namespace_key="user_id", budget_tokens=300, include_tools=True
                )
            ],
            checkpointer=InMemorySaver(),
        )
        day = 0
        for turn_day, user, thread, text in CONVERSATION:
            if turn_day != day:
                clock.advance(days=turn_day - day)
                day = turn_day
            result = agent.invoke(
                {"messages": [HumanMessage(text)]},
                config={"configurable": {"thread_id": f"{user}-{thread}"}},
                context={"user_id": user},
            )
            print(f"\n[day {day}, {user}, thread {thread}] user: {text}")
            injected = result.get("memory_context") or "(nothing)"
            print("  memory injected:")
            for line in injected.splitlines():
                print(f"    {line}")
            for message in _this_turn(result["messages"]):
                if isinstance(message, ToolMessage):
                    print(f"  tool {message.name}: {message.text.splitlines()[0]}")
            print(f"  assistant: {result['messages'][-1].text}")

        for user in ("alice", "bob"):
            stats = memory.stats(namespace=user)
            counts = {t.value: s.count for t, s in stats.tiers.items() if s.count}
            print(f"\n{user}: {stats.total} memories {counts}, pinned={stats.pinned}")
            for m in memory.list(namespace=user):
                flags = " pinned" if m.pinned else ""
                print(f"  [{m.tier.value} {m.memory_type.value}{flags}] {m.content}")


if __name__ == "__main__":
    main()
