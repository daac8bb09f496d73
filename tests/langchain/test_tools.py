"""The nine memory tools: LangChain's standard tool suites for each, and behaviour."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests
from pydantic import BaseModel

from langchain_tiered_memory import create_memory_tools
from langchain_tiered_memory.tools import (
    MemoryDemoteTool,
    MemoryExplainTool,
    MemoryForgetTool,
    MemoryPinTool,
    MemoryPromoteTool,
    MemoryRecallTool,
    MemoryRestoreTool,
    MemoryStoreTool,
    MemoryTool,
    MemoryUnpinTool,
)
from tiered_memory import ConfigurationError, MemoryType, Tier, TieredMemory

NS = "user-42"
AVA = "The user's daughter is called Ava"

# tool class -> (how to prepare the seeded memory, example arguments given its id)
Prepare = Callable[[TieredMemory, str], Any]
Example = Callable[[str], dict[str, Any]]


def _nothing(mem: TieredMemory, memory_id: str) -> None:
    return None


SPECS: dict[type[MemoryTool], tuple[Prepare, Example]] = {
    MemoryRecallTool: (_nothing, lambda i: {"query": "what is the daughter called?"}),
    MemoryStoreTool: (
        _nothing,
        lambda i: {"content": "The user's son is called Leo", "memory_type": "factual"},
    ),
    MemoryForgetTool: (_nothing, lambda i: {"memory_id": i}),
    MemoryRestoreTool: (lambda m, i: m.forget(i, namespace=NS), lambda i: {"memory_id": i}),
    MemoryPinTool: (_nothing, lambda i: {"memory_id": i}),
    MemoryUnpinTool: (lambda m, i: m.pin(i, namespace=NS), lambda i: {"memory_id": i}),
    MemoryPromoteTool: (
        lambda m, i: m.demote(i, Tier.COLD, namespace=NS),
        lambda i: {"memory_id": i, "tier": "warm"},
    ),
    MemoryDemoteTool: (_nothing, lambda i: {"memory_id": i, "tier": "warm"}),
    MemoryExplainTool: (_nothing, lambda i: {"memory_id": i, "query": "daughter"}),
}


class _OneTool:
    """One memory tool bound to a freshly seeded memory (mixed into each suite)."""

    tool_class: type[MemoryTool]

    @pytest.fixture(autouse=True)
    def _seeded(self, mem: TieredMemory) -> None:
        self.memory = mem
        self.memory_id = mem.add(AVA, namespace=NS, memory_type=MemoryType.FACTUAL).id
        prepare, _ = SPECS[self.tool_class]
        prepare(mem, self.memory_id)

    @property
    def tool_constructor(self) -> type[BaseTool]:
        return self.tool_class

    @property
    def tool_constructor_params(self) -> dict[str, Any]:
        return {"memory": self.memory, "namespace": NS}

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        _, example = SPECS[self.tool_class]
        return example(self.memory_id)


# Two suite classes per tool (a class may subclass only one standard suite), named
# e.g. TestMemoryPinToolUnit / TestMemoryPinToolIntegration so pytest collects them.
for _cls in SPECS:
    for _suite, _kind in ((ToolsUnitTests, "Unit"), (ToolsIntegrationTests, "Integration")):
        _name = f"Test{_cls.__name__}{_kind}"
        globals()[_name] = type(_name, (_OneTool, _suite), {"tool_class": _cls})


def _tools(mem: TieredMemory, **kwargs: Any) -> dict[str, BaseTool]:
    return {t.name: t for t in create_memory_tools(mem, NS, **kwargs)}


def _call(tool: BaseTool, args: dict[str, Any]) -> ToolMessage:
    message = tool.invoke(ToolCall(name=tool.name, args=args, id="call-1", type="tool_call"))
    assert isinstance(message, ToolMessage)
    return message


def test_the_nine_tools_of_seed_002(mem: TieredMemory) -> None:
    tools = create_memory_tools(mem, NS)
    assert [t.name for t in tools] == [
        "memory_recall",
        "memory_store",
        "memory_forget",
        "memory_restore",
        "memory_pin",
        "memory_unpin",
        "memory_promote",
        "memory_demote",
        "memory_explain",
    ]
    for tool in tools:
        assert len(tool.description) > 40
        schema = tool.args_schema
        assert isinstance(schema, type)
        assert issubclass(schema, BaseModel)
        for name, field in schema.model_fields.items():
            assert field.description, f"{tool.name}.{name} has no description"


def test_store_then_recall_finds_it_and_counts_the_use(mem: TieredMemory) -> None:
    tools = _tools(mem)
    stored = _call(tools["memory_store"], {"content": AVA, "memory_type": "factual"})
    assert stored.status == "success"
    [memory] = mem.list(namespace=NS)
    assert memory.id in stored.text
    assert memory.memory_type is MemoryType.FACTUAL
    assert memory.tier is Tier.HOT
    assert memory.source == "agent"
    important = _call(
        tools["memory_store"], {"content": "Ava is allergic to nuts", "importance": 0.9}
    )
    assert important.status == "success"
    assert {m.importance for m in mem.list(namespace=NS) if "nuts" in m.content} == {0.9}

    recalled = _call(tools["memory_recall"], {"query": "what is my daughter called?"})
    assert f"id={memory.id}" in recalled.text
    assert AVA in recalled.text
    assert mem.get(memory.id, namespace=NS).use_count == 1  # type: ignore[union-attr]


def test_store_takes_the_tier_hot_by_default(mem: TieredMemory) -> None:
    """Seed 002's memory_store assigns the tier: hot unless the agent chooses."""
    tools = _tools(mem)
    store = tools["memory_store"]
    assert store.args_schema.model_fields["tier"].default == "hot"  # type: ignore[union-attr]
    hot = _call(store, {"content": AVA})
    assert "tier=hot" in hot.text
    warm = _call(store, {"content": "The user's car is a blue Volvo", "tier": "warm"})
    assert "tier=warm" in warm.text
    cold = _call(store, {"content": "Watched a film about octopuses", "tier": "cold"})
    assert "tier=cold" in cold.text
    pinned = _call(store, {"content": "Always answer in Spanish", "tier": "warm", "pinned": True})
    assert "tier=warm" in pinned.text
    assert "pinned" in pinned.text
    tiers = {m.content: (m.tier, m.pinned) for m in mem.list(namespace=NS)}
    assert tiers == {
        AVA: (Tier.HOT, False),
        "The user's car is a blue Volvo": (Tier.WARM, False),
        "Watched a film about octopuses": (Tier.COLD, False),
        "Always answer in Spanish": (Tier.WARM, True),
    }
    refused = _call(store, {"content": "Never forget this", "tier": "cold", "pinned": True})
    assert refused.status == "error"
    assert "hot or warm" in refused.text
    again = _call(store, {"content": "The user's car is a blue Volvo", "tier": "cold"})
    assert again.text.startswith("Already remembered")  # the memory it repeats stays put
    assert {m.tier for m in mem.list(namespace=NS) if "Volvo" in m.content} == {Tier.WARM}
    assert len(mem.list(namespace=NS)) == 4


def test_recall_in_one_tier_is_inspection_not_use(mem: TieredMemory) -> None:
    memory = mem.add(AVA, namespace=NS)
    mem.demote(memory.id, Tier.WARM, namespace=NS)
    tools = _tools(mem)
    assert (
        "No memories found"
        in _call(tools["memory_recall"], {"query": "daughter", "tier": "hot"}).text
    )
    assert AVA in _call(tools["memory_recall"], {"query": "daughter", "tier": "warm"}).text
    assert mem.get(memory.id, namespace=NS).use_count == 0  # type: ignore[union-attr]


def test_forget_and_restore(mem: TieredMemory) -> None:
    memory = mem.add(AVA, namespace=NS)
    tools = _tools(mem)
    _call(tools["memory_forget"], {"memory_id": memory.id})
    assert "No memories found" in _call(tools["memory_recall"], {"query": "daughter"}).text
    _call(tools["memory_restore"], {"memory_id": memory.id})
    assert AVA in _call(tools["memory_recall"], {"query": "daughter"}).text
    _call(tools["memory_forget"], {"memory_id": memory.id, "hard": True})
    assert mem.get(memory.id, namespace=NS) is None


def test_pin_promote_demote_and_explain(mem: TieredMemory) -> None:
    memory = mem.add(AVA, namespace=NS)
    tools = _tools(mem)
    demoted = _call(tools["memory_demote"], {"memory_id": memory.id, "tier": "warm"})
    assert "tier=warm" in demoted.text
    promoted = _call(tools["memory_promote"], {"memory_id": memory.id, "tier": "hot"})
    assert "tier=hot" in promoted.text
    assert "pinned" in _call(tools["memory_pin"], {"memory_id": memory.id}).text
    assert mem.get(memory.id, namespace=NS).pinned  # type: ignore[union-attr]
    explained = _call(tools["memory_explain"], {"memory_id": memory.id, "query": "daughter"})
    assert "score = tier_factor" in explained.text
    assert "pinned" in explained.text
    _call(tools["memory_unpin"], {"memory_id": memory.id})
    assert not mem.get(memory.id, namespace=NS).pinned  # type: ignore[union-attr]


def test_engine_errors_come_back_as_tool_messages(mem: TieredMemory) -> None:
    memory = mem.add(AVA, namespace=NS, pinned=True)
    tools = _tools(mem)
    refused = _call(tools["memory_demote"], {"memory_id": memory.id, "tier": "cold"})
    assert refused.status == "error"
    assert "exempt from demotion" in refused.text
    assert mem.get(memory.id, namespace=NS).tier is Tier.HOT  # type: ignore[union-attr]

    missing = _call(tools["memory_pin"], {"memory_id": "no-such-id"})
    assert missing.status == "error"
    assert "not found" in missing.text

    # ids never cross namespaces: another user's tools cannot touch it
    other = {t.name: t for t in create_memory_tools(mem, "someone-else")}
    assert _call(other["memory_forget"], {"memory_id": memory.id}).status == "error"
    assert not mem.get(memory.id, namespace=NS).do_not_inject  # type: ignore[union-attr]


def test_bad_arguments_come_back_as_tool_messages(mem: TieredMemory) -> None:
    tools = _tools(mem)
    answer = tools["memory_demote"].invoke({"memory_id": "x", "tier": "frozen"})
    assert isinstance(answer, str)
    assert "tier" in answer


async def test_async_tools_use_the_async_engine(mem: TieredMemory) -> None:
    tools = _tools(mem)
    stored = await tools["memory_store"].ainvoke({"content": AVA, "memory_type": "factual"})
    assert "Stored" in stored
    recalled = await tools["memory_recall"].ainvoke({"query": "daughter"})
    assert AVA in recalled
    error = await tools["memory_restore"].ainvoke({"memory_id": "no-such-id"})
    assert "not found" in error


def _per_user(mem: TieredMemory, **kwargs: Any) -> dict[str, BaseTool]:
    return {t.name: t for t in create_memory_tools(mem, **kwargs)}


@pytest.mark.parametrize("kwargs", [{}, {"namespace_key": "user_id"}])
def test_namespace_from_the_run_config(mem: TieredMemory, kwargs: dict[str, Any]) -> None:
    """Without a fixed namespace the tools are per user: the run's `user_id`."""
    store = _per_user(mem, **kwargs)["memory_store"]
    store.invoke({"content": AVA}, config={"configurable": {"user_id": "ava-parent"}})
    store.invoke(
        {"content": "The user's son is called Leo"}, config={"configurable": {"user_id": 7}}
    )
    assert [m.content for m in mem.list(namespace="ava-parent")] == [AVA]
    assert [m.content for m in mem.list(namespace="7")] == ["The user's son is called Leo"]
    assert sorted(mem.namespaces()) == ["7", "ava-parent"]


def test_a_call_without_its_namespace_is_an_error_not_a_tool_message(mem: TieredMemory) -> None:
    """The model cannot fix a run that names no user; the run fails, and nothing is
    written to a namespace nobody chose."""
    store = _per_user(mem)["memory_store"]
    with pytest.raises(ConfigurationError, match="'user_id'"):
        store.invoke({"content": AVA})
    with pytest.raises(ConfigurationError, match="usr_id"):
        store.invoke({"content": AVA}, config={"configurable": {"usr_id": "ava-parent"}})
    with pytest.raises(ConfigurationError, match="'user_id'"):
        _call(store, {"content": AVA})
    assert mem.namespaces() == []


async def test_async_call_without_its_namespace_is_an_error(mem: TieredMemory) -> None:
    recall = _per_user(mem)["memory_recall"]
    with pytest.raises(ConfigurationError, match="'user_id'"):
        await recall.ainvoke({"query": "daughter"})
    mem.add(AVA, namespace="ava-parent")
    found = await recall.ainvoke(
        {"query": "daughter"}, config={"configurable": {"user_id": "ava-parent"}}
    )
    assert AVA in found


def test_namespace_and_namespace_key_together_are_refused(mem: TieredMemory) -> None:
    with pytest.raises(ConfigurationError, match="not both"):
        create_memory_tools(mem, NS, namespace_key="user_id")


def test_a_plain_string_is_the_single_argument(mem: TieredMemory) -> None:
    memory = mem.add(AVA, namespace=NS)
    answer = _tools(mem)["memory_pin"].invoke(memory.id)
    assert answer.startswith("Pinned")
    assert mem.get(memory.id, namespace=NS).pinned  # type: ignore[union-attr]
