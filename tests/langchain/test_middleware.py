"""TieredMemoryMiddleware in a real `create_agent` agent, with a recording fake model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_tiered_memory import TieredMemoryMiddleware, create_memory_tools
from langchain_tiered_memory.middleware import CaptureRules, captures_of
from tests.langchain.fakes import RecordingChatModel
from tiered_memory import ConfigurationError, MemoryInput, MemoryType, TieredMemory

SYSTEM = "You are a helpful assistant."
README = Path(__file__).resolve().parents[2] / "README.md"


def _agent(mem: TieredMemory, model: RecordingChatModel, **kwargs: Any) -> Any:
    return create_agent(
        model=model,
        system_prompt=SYSTEM,
        middleware=[TieredMemoryMiddleware(mem, **kwargs)],
        checkpointer=InMemorySaver(),
    )


def _say(agent: Any, text: str, *, user: str, thread: str) -> dict[str, Any]:
    result: dict[str, Any] = agent.invoke(
        {"messages": [HumanMessage(text)]},
        config={"configurable": {"thread_id": thread}},
        context={"user_id": user},
    )
    return result


# -- capture rules ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("I always want answers in British English", MemoryType.PROCEDURAL),
        ("Never schedule meetings before ten", MemoryType.PROCEDURAL),
        ("I prefer tea to coffee", MemoryType.PROCEDURAL),
        ("Yesterday I went hiking in the Alps", MemoryType.EPISODIC),
        ("We moved house on 2025-11-02", MemoryType.EPISODIC),
        ("The release happened on March 3rd", MemoryType.EPISODIC),
        ("My daughter is called Ava", MemoryType.FACTUAL),
        ("Our cats are named Miso and Tofu", MemoryType.FACTUAL),
        ("Good morning to you", None),
    ],
)
def test_memory_type_rules(sentence: str, expected: MemoryType | None) -> None:
    assert CaptureRules().detect_type(sentence) is expected


def test_a_turn_yields_user_statements_and_assistant_conclusions() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("An old turn that is not captured again."),
        AIMessage("Old answer is stale."),
        HumanMessage("My daughter is called Ava. What should I cook tonight? Hi!"),
        AIMessage("", tool_calls=[{"name": "memory_recall", "args": {}, "id": "c1"}]),
        ToolMessage("- Ava is vegetarian", tool_call_id="c1"),
        AIMessage("Ava is vegetarian, so a risotto works. Enjoy!"),
    ]
    captures = captures_of(messages, CaptureRules())  # type: ignore[arg-type]
    assert [(c.role, c.content, c.memory_type) for c in captures] == [
        ("user", "My daughter is called Ava.", MemoryType.FACTUAL),
        ("assistant", "Ava is vegetarian, so a risotto works.", MemoryType.FACTUAL),
    ]


def test_requests_chit_chat_and_restated_memories_are_not_captured() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("Please pin my preference for tea. Could you check my calendar."),
        AIMessage("Your daughter is called Ava. I don't know your calendar. Tea is pinned now."),
    ]
    recalled = "- Your daughter is called Ava\n- The user likes tea"
    captures = captures_of(messages, CaptureRules(), recalled)  # type: ignore[arg-type]
    assert [c.content for c in captures] == ["Tea is pinned now."]
    rules = CaptureRules(skip_patterns=())
    assert len(captures_of(messages, rules)) == 5  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="regular expression"):
        CaptureRules(skip_patterns=("[",))


def test_assistant_capture_can_be_turned_off() -> None:
    rules = CaptureRules(capture_assistant=False)
    messages: list[BaseMessage] = [HumanMessage("Hello there"), AIMessage("Paris is in France.")]
    assert captures_of(messages, rules) == []  # type: ignore[arg-type]


# -- the agent ----------------------------------------------------------------------


def test_injected_memory_is_in_the_system_prompt_the_model_receives(mem: TieredMemory) -> None:
    mem.add("The user's daughter is called Ava", namespace="alice", memory_type="factual")
    mem.add("Project Falcon ships on March 3", namespace="alice", memory_type="project")
    model = RecordingChatModel()
    result = _say(_agent(mem, model), "What is my daughter called?", user="alice", thread="t1")

    [prompt] = model.system_prompts()
    assert prompt.startswith(SYSTEM)
    assert "- The user's daughter is called Ava" in prompt
    assert "Long-term memory about this user" in prompt
    assert "daughter is called Ava" in result["memory_context"]
    [ava_id] = [m.id for m in mem.list(namespace="alice") if "Ava" in m.content]
    assert ava_id in result["memory_ids"]


def test_a_fact_told_in_one_thread_is_recalled_in_another_of_the_same_user(
    mem: TieredMemory,
) -> None:
    model = RecordingChatModel()
    agent = _agent(mem, model)
    _say(agent, "My daughter is called Ava.", user="alice", thread="monday")
    assert "daughter is called Ava" not in model.system_prompts()[0]  # nothing known yet
    [captured] = mem.list(namespace="alice")
    assert captured.content == "My daughter is called Ava."
    assert captured.memory_type is MemoryType.FACTUAL
    assert captured.source == "conversation:user"
    assert captured.metadata == {"role": "user", "thread_id": "monday"}
    assert captured.importance == MemoryInput.model_fields["importance"].default  # the core's

    _say(agent, "What is my daughter called?", user="alice", thread="tuesday")
    assert "My daughter is called Ava." in model.system_prompts()[1]

    _say(agent, "What is my daughter called?", user="bob", thread="wednesday")
    assert "Ava" not in model.system_prompts()[2]
    assert mem.list(namespace="bob") == []  # a question is not a statement to keep


async def test_async_agent_recalls_across_threads(mem: TieredMemory) -> None:
    model = RecordingChatModel()
    agent = _agent(mem, model)
    for text, thread in (("I always drink green tea.", "a"), ("What do I drink?", "b")):
        await agent.ainvoke(
            {"messages": [HumanMessage(text)]},
            config={"configurable": {"thread_id": thread}},
            context={"user_id": "carol"},
        )
    assert "I always drink green tea." in model.system_prompts()[1]
    [memory] = await mem.aio.list(namespace="carol")
    assert memory.memory_type is MemoryType.PROCEDURAL


def test_namespace_from_configurable(mem: TieredMemory) -> None:
    mem.add("The user's daughter is called Ava", namespace="dave")
    mem.add("The user's son is called Leo", namespace="erin")
    model = RecordingChatModel()
    agent = create_agent(model=model, middleware=[TieredMemoryMiddleware(mem, capture=False)])
    for user in ("dave", "erin"):
        agent.invoke(
            {"messages": [HumanMessage("Who is my child?")]},
            config={"configurable": {"user_id": user}},
        )
    first, second = model.system_prompts()
    assert "Ava" in first
    assert "Leo" not in first
    assert "Leo" in second
    assert "Ava" not in second


def test_a_fixed_namespace_serves_a_single_user_app(mem: TieredMemory) -> None:
    mem.add("The user's son is called Leo", namespace="me")
    model = RecordingChatModel()
    agent = create_agent(
        model=model, middleware=[TieredMemoryMiddleware(mem, namespace="me", capture=False)]
    )
    agent.invoke({"messages": [HumanMessage("Who is my child?")]})
    assert "Leo" in model.system_prompts()[0]


@pytest.mark.parametrize(
    ("context", "config"),
    [
        (None, None),
        ({"userid": "alice"}, None),  # misspelt
        ({"user_id": "  "}, None),  # blank
        (None, {"configurable": {"user": "alice"}}),
    ],
)
def test_a_run_without_its_namespace_is_an_error(
    mem: TieredMemory, context: dict[str, Any] | None, config: dict[str, Any] | None
) -> None:
    """A multi-user agent never guesses a namespace: a run whose context and config lack
    the key fails before anything is recalled or stored, naming the key."""
    mem.add("The user's daughter is called Ava", namespace="default")
    model = RecordingChatModel()
    agent = create_agent(
        model=model,
        tools=create_memory_tools(mem),
        middleware=[TieredMemoryMiddleware(mem)],
    )
    with pytest.raises(ConfigurationError, match="'user_id'") as error:
        agent.invoke(
            {"messages": [HumanMessage("My son is called Leo.")]}, context=context, config=config
        )
    assert "configurable" in str(error.value)
    assert model.calls == []
    assert mem.namespaces() == ["default"]
    assert len(mem.list(namespace="default")) == 1


def test_a_misspelt_key_is_named_in_the_error(mem: TieredMemory) -> None:
    agent = create_agent(model=RecordingChatModel(), middleware=[TieredMemoryMiddleware(mem)])
    with pytest.raises(ConfigurationError, match="userid"):
        agent.invoke({"messages": [HumanMessage("Hello there")]}, context={"userid": "alice"})


def test_namespace_and_namespace_key_together_are_refused(mem: TieredMemory) -> None:
    with pytest.raises(ConfigurationError, match="not both"):
        TieredMemoryMiddleware(mem, namespace="shared", namespace_key="user_id")


def _remember_or_recall(messages: list[BaseMessage]) -> AIMessage:
    """A model that stores "Remember ..." with memory_store and answers a question with
    what memory_recall returned."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(last.text)
    text = last.text
    if text.startswith("Remember "):
        call = {"name": "memory_store", "args": {"content": text[len("Remember ") :]}}
    else:
        call = {"name": "memory_recall", "args": {"query": text}}
    return AIMessage("", tool_calls=[{**call, "id": "call-1"}])  # type: ignore[typeddict-item]


def _two_users(agent: Any) -> dict[str, str]:
    """Alice and Bob each tell the agent their locker code, then ask for it."""
    for user, code in (("alice", "1111"), ("bob", "2222")):
        agent.invoke(
            {"messages": [HumanMessage(f"Remember my locker code is {code}")]},
            context={"user_id": user},
        )
    answers: dict[str, str] = {}
    for user in ("alice", "bob"):
        result = agent.invoke(
            {"messages": [HumanMessage("What is my locker code?")]}, context={"user_id": user}
        )
        answers[user] = result["messages"][-1].text
    return answers


def _each_recalls_only_their_own(answers: dict[str, str]) -> None:
    for user, own, other in (("alice", "1111", "2222"), ("bob", "2222", "1111")):
        assert own in answers[user]
        assert other not in answers[user]


def test_two_users_remember_through_the_tools_and_recall_only_their_own(
    mem: TieredMemory,
) -> None:
    agent = create_agent(
        model=RecordingChatModel(reply=_remember_or_recall),
        tools=create_memory_tools(mem),  # per user by default: the run's user_id
        middleware=[TieredMemoryMiddleware(mem, capture=False)],
    )
    answers = _two_users(agent)
    _each_recalls_only_their_own(answers)
    assert [m.content for m in mem.list(namespace="alice")] == ["my locker code is 1111"]
    assert [m.content for m in mem.list(namespace="bob")] == ["my locker code is 2222"]
    assert sorted(mem.namespaces()) == ["alice", "bob"]


def _readme_block(heading: str) -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split(f"## {heading}\n", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_agent_keeps_users_apart(mem: TieredMemory) -> None:
    """The README's LangChain snippet, run as written, serves two users safely."""
    scope: dict[str, Any] = {"model": RecordingChatModel(reply=_remember_or_recall), "mem": mem}
    exec(compile(_readme_block("LangChain"), "README.md", "exec"), scope)
    answers = _two_users(scope["agent"])
    _each_recalls_only_their_own(answers)
    assert not any("locker" in m.content for m in mem.list(namespace="user-42"))


def test_one_recall_per_run_even_when_the_model_calls_tools(mem: TieredMemory) -> None:
    ava = mem.add("The user's daughter is called Ava", namespace="erin")

    def reply(messages: list[BaseMessage]) -> AIMessage:
        if not any(isinstance(m, ToolMessage) for m in messages):
            return AIMessage(
                "",
                tool_calls=[
                    {
                        "name": "memory_store",
                        "args": {"content": "Ava's school is Hillside Primary"},
                        "id": "call-1",
                    }
                ],
            )
        return AIMessage("Done, I will remember that.")

    model = RecordingChatModel(reply=reply)
    agent = create_agent(
        model=model,
        middleware=[TieredMemoryMiddleware(mem, include_tools=True, capture=False)],
    )
    agent.invoke(
        {"messages": [HumanMessage("Remember where my daughter goes to school")]},
        context={"user_id": "erin"},
    )
    assert len(model.calls) == 2
    assert all("daughter is called Ava" in p for p in model.system_prompts())
    assert mem.get(ava.id, namespace="erin").use_count == 1  # type: ignore[union-attr]
    # the tool wrote into the run's namespace, taken from the same context
    contents = {m.content for m in mem.list(namespace="erin")}
    assert "Ava's school is Hillside Primary" in contents


def test_budget_limits_what_is_injected(mem: TieredMemory) -> None:
    mem.add_many(
        [f"The user owns a green bicycle number {i} with a bell" for i in range(30)],
        namespace="fay",
        dedup=False,
    )
    model = RecordingChatModel()
    agent = create_agent(
        model=model,
        middleware=[TieredMemoryMiddleware(mem, budget_tokens=40, capture=False)],
    )
    result = agent.invoke(
        {"messages": [HumanMessage("Tell me about my green bicycle")]},
        context={"user_id": "fay"},
    )
    assert 0 < len(result["memory_ids"]) < 5
    assert mem.aio.tokens.count(result["memory_context"]) <= 40


def test_custom_header_keeps_its_other_braces(mem: TieredMemory) -> None:
    mem.add("The user's daughter is called Ava", namespace="gus")
    model = RecordingChatModel()
    header = 'Known about the user (JSON-ish {"source": "memory"}):\n{memories}'
    agent = create_agent(
        model=model,
        middleware=[TieredMemoryMiddleware(mem, header=header, capture=False)],
    )
    agent.invoke({"messages": [HumanMessage("Who is my daughter?")]}, context={"user_id": "gus"})
    [prompt] = model.system_prompts()  # no system prompt of its own: the block is the prompt
    assert prompt.startswith('Known about the user (JSON-ish {"source": "memory"}):\n- ')
    assert "daughter is called Ava" in prompt


def test_header_must_have_a_place_for_the_memories(mem: TieredMemory) -> None:
    with pytest.raises(ValueError, match="memories"):
        TieredMemoryMiddleware(mem, header="Memories:")
