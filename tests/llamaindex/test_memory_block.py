"""TieredMemoryBlock inside llama_index.core.memory.Memory and a chat engine."""

from __future__ import annotations

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms.mock import MockLLMWithChatMemoryOfLastCall
from llama_index.core.memory import Memory

from llamaindex_tiered_memory import TieredMemoryBlock
from tiered_memory import AsyncTieredMemory, ConfigurationError, MemoryType, TieredMemory
from tiered_memory.capture import CaptureRules

NS = "user-42"
FACT = "My daughter is called Ava and she plays the violin."


def user(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, content=text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


def system_text(messages: list[ChatMessage]) -> str:
    system = [m for m in messages if m.role == MessageRole.SYSTEM]
    return "".join(b.text for m in system for b in m.blocks if isinstance(b, TextBlock))


def block_text(messages: list[ChatMessage], name: str = "long_term_memory") -> str:
    text = system_text(messages)
    if f"<{name}>" not in text:
        return ""
    return text.split(f"<{name}>", 1)[1].split(f"</{name}>", 1)[0].strip()


def chat_memory(
    block: TieredMemoryBlock, session: str, token_limit: int = 4000, ratio: float = 0.7
) -> Memory:
    return Memory.from_defaults(
        session_id=session,
        token_limit=token_limit,
        chat_history_token_ratio=ratio,
        token_flush_size=max(1, token_limit // 20),
        memory_blocks=[block],
    )


def tell_the_fact(mem: TieredMemory) -> None:
    """Session one: a short queue makes Memory flush the fact into the block."""
    block = TieredMemoryBlock(memory=mem, namespace=NS)
    memory = chat_memory(block, "session-1", token_limit=60, ratio=0.5)
    memory.put_messages(
        [
            user(FACT),
            assistant("Lovely, I will remember that."),
            user("Project Falcon ships on March 3."),
            assistant("Noted."),
            user("What's the weather like?"),
            assistant("I cannot check the weather."),
        ]
    )


def test_flushed_messages_are_captured_one_memory_each(mem: TieredMemory) -> None:
    tell_the_fact(mem)
    captured = {m.content: m for m in mem.list(namespace=NS)}
    assert f"user: {FACT}" in captured
    assert "assistant: Lovely, I will remember that." in captured
    fact = captured[f"user: {FACT}"]
    assert fact.metadata == {"role": "user", "session_id": "session-1"}
    assert fact.memory_type is MemoryType.FACTUAL  # by the capture rules: "is called"
    assert fact.source == "llamaindex-chat"
    assert "user: What's the weather like?" not in captured  # still in the short-term queue


def test_a_new_session_gets_the_long_term_memory_injected(mem: TieredMemory) -> None:
    tell_the_fact(mem)
    block = TieredMemoryBlock(memory=mem, namespace=NS, budget_tokens=200)
    memory = chat_memory(block, "session-2")
    messages = memory.get(input="What is my daughter called?")
    injected = block_text(messages)
    assert injected.splitlines()[0] == f"- user: {FACT}"
    assert mem.aio.tokens.count(injected) <= 200
    fact = next(m for m in mem.list(namespace=NS) if m.content == f"user: {FACT}")
    assert fact.use_count == 1  # recalled, so it counts as used


def test_another_namespace_sees_nothing(mem: TieredMemory) -> None:
    tell_the_fact(mem)
    stranger = TieredMemoryBlock(memory=mem, namespace="user-7")
    messages = chat_memory(stranger, "s").get(input="What is my daughter called? Ava? violin?")
    assert "Ava" not in system_text(messages)
    assert mem.stats(namespace="user-7").total == 0


def test_chat_engine_sends_the_injected_memory_to_the_llm(mem: TieredMemory) -> None:
    tell_the_fact(mem)
    llm = MockLLMWithChatMemoryOfLastCall()
    block = TieredMemoryBlock(memory=mem, namespace=NS)
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=chat_memory(block, "session-3"))
    engine.chat("Remind me, what is my daughter called?")
    sent = list(llm.last_chat_messages or [])
    assert f"- user: {FACT}" in block_text(sent)
    assert sent[-1].content == "Remind me, what is my daughter called?"


def test_block_stays_within_the_token_limit_through_truncation(mem: TieredMemory) -> None:
    # Two namespaces with the same memories, so recall (which records use and so
    # changes later rankings) ranks both the same way.
    for ns in ("p0", "p1"):
        for i in range(12):
            text = f"Ava fact {i}: she likes violin piece number {i} " + "very much " * 4
            mem.add(text, namespace=ns)
    history = [user("Tell me about Ava and the violin " + "please " * 20), assistant("Sure.")]
    limit = 150

    def build(priority: int) -> tuple[Memory, list[ChatMessage]]:
        block = TieredMemoryBlock(
            memory=mem, namespace=f"p{priority}", budget_tokens=400, priority=priority
        )
        memory = chat_memory(block, f"p{priority}", token_limit=limit, ratio=0.9)
        memory.put_messages(history)
        return memory, memory.get()

    untouched, messages = build(priority=0)
    history_tokens = sum(untouched._estimate_token_count(m) for m in history)
    full = block_text(messages)
    assert history_tokens + untouched._estimate_token_count(full) > limit  # needs truncation

    truncated, messages = build(priority=1)
    kept = block_text(messages)
    assert kept
    assert history_tokens + truncated._estimate_token_count(kept) <= limit
    assert full.startswith(kept)  # whole lines, lowest scores dropped first
    assert len(kept.splitlines()) < len(full.splitlines())


async def test_atruncate_drops_whole_lines_from_the_end(mem: TieredMemory) -> None:
    block = TieredMemoryBlock(memory=mem, namespace=NS)
    content = "- first memory line\n- second memory line\n- third memory line"
    count = mem.aio.tokens.count
    assert await block.atruncate(content, 0) == content
    one = await block.atruncate(content, 1)
    assert one == "- first memory line\n- second memory line"
    big = count("- second memory line\n- third memory line")
    assert await block.atruncate(content, big) == "- first memory line"
    assert await block.atruncate(content, count(content)) is None


async def test_put_captures_only_the_chosen_roles_and_text(mem: TieredMemory) -> None:
    block = TieredMemoryBlock(memory=mem, namespace=NS, capture_roles=("user",))
    await block.aput(
        [
            user("I prefer green tea."),
            assistant("Noted, green tea."),
            ChatMessage(role=MessageRole.SYSTEM, content="You are helpful."),
            ChatMessage(role=MessageRole.TOOL, content="tool output"),
            user("   "),
        ],
        from_short_term_memory=True,
        session_id="s9",
    )
    assert [(m.content, m.metadata) for m in mem.list(namespace=NS)] == [
        ("user: I prefer green tea.", {"role": "user", "session_id": "s9"})
    ]


async def test_a_fact_said_twice_strengthens_one_memory(mem: TieredMemory) -> None:
    block = TieredMemoryBlock(memory=mem, namespace=NS)
    await block.aput([user(FACT)])
    await block.aput([user(FACT)])
    memories = mem.list(namespace=NS)
    assert [(m.content, m.use_count) for m in memories] == [(f"user: {FACT}", 1)]


async def test_an_oversized_message_is_captured_cut_not_failed(mem: TieredMemory) -> None:
    block = TieredMemoryBlock(memory=mem, namespace=NS)
    limit = mem.policy.limits.max_content_chars
    await block.aput([user("word " * limit)])
    (memory,) = mem.list(namespace=NS)
    assert len(memory.content) == limit
    assert memory.content.startswith("user: word word")


async def test_empty_messages_recall_nothing(mem: TieredMemory) -> None:
    mem.add("Something to recall", namespace=NS)
    block = TieredMemoryBlock(memory=mem, namespace=NS)
    assert await block.aget([]) == ""
    assert await block.aget(None) == ""
    assert await block.aget([user("  ")]) == ""


async def test_async_memory_with_an_async_engine(amem: AsyncTieredMemory) -> None:
    block = TieredMemoryBlock(memory=amem, namespace=NS, budget_tokens=100)
    await block.aput([user(FACT)], session_id="a1")
    memory = chat_memory(block, "a2")
    await memory.aput(user("Hi there"))
    messages = await memory.aget(input="What is my daughter called?")
    assert block_text(messages) == f"- user: {FACT}"
    assert (await amem.list(namespace=NS))[0].use_count == 1


def test_recall_query_uses_the_latest_messages_only(mem: TieredMemory) -> None:
    mem.add("The garage door code is 7781.", namespace=NS)
    mem.add("Ava plays the violin.", namespace=NS)
    block = TieredMemoryBlock(memory=mem, namespace=NS, retrieval_context_window=1)
    memory = chat_memory(block, "w")
    memory.put_messages([user("What is the garage door code?"), assistant("Let me check.")])
    injected = block_text(memory.get(input="Which instrument does Ava play?"))
    assert injected.splitlines()[0] == "- Ava plays the violin."


@pytest.mark.parametrize("window", [0, -1])
def test_context_window_must_be_positive(mem: TieredMemory, window: int) -> None:
    with pytest.raises(ValueError, match="retrieval_context_window"):
        TieredMemoryBlock(memory=mem, namespace=NS, retrieval_context_window=window)


@pytest.mark.parametrize("namespace", [None, "", "  ", 42, "a\nb", '\ufdd0["memories"]'])
def test_a_block_names_whose_memories_it_holds(mem: TieredMemory, namespace: object) -> None:
    """No block quietly shares a "default" namespace: each Memory (one per user's chat)
    gives its block the user's namespace."""
    kwargs = {} if namespace is None else {"namespace": namespace}
    # what the core refuses as a namespace, refused here too (one definition of it):
    # a control character, the mark only a path namespace may carry
    with pytest.raises(ConfigurationError, match="namespace"):
        TieredMemoryBlock(memory=mem, **kwargs)


async def test_captured_messages_are_typed_by_the_capture_rules(mem: TieredMemory) -> None:
    """The words that make a sentence procedural, episodic or factual in the LangChain
    middleware and in note import make a flushed message so here (one word list)."""
    block = TieredMemoryBlock(memory=mem, namespace=NS)
    await block.aput(
        [
            user("I always want answers in British English."),
            user("Yesterday we went hiking in the Alps."),
            user("My son is called Leo."),
            assistant("Lovely, I will keep that in mind."),  # no rule: the default type
        ]
    )
    types = {m.content: m.memory_type for m in mem.list(namespace=NS)}
    assert types == {
        "user: I always want answers in British English.": MemoryType.PROCEDURAL,
        "user: Yesterday we went hiking in the Alps.": MemoryType.EPISODIC,
        "user: My son is called Leo.": MemoryType.FACTUAL,
        "assistant: Lovely, I will keep that in mind.": MemoryType.EPISODIC,
    }


async def test_a_given_type_or_rules_decide_instead(mem: TieredMemory) -> None:
    fixed = TieredMemoryBlock(memory=mem, namespace=NS, memory_type=MemoryType.PROJECT)
    await fixed.aput([user("I always want answers in British English.")])
    strict = TieredMemoryBlock(
        memory=mem, namespace="strict", rules=CaptureRules(default_type=None)
    )
    await strict.aput([user("My son is called Leo."), user("Good morning to you.")])
    assert [m.memory_type for m in mem.list(namespace=NS)] == [MemoryType.PROJECT]
    assert [m.content for m in mem.list(namespace="strict")] == ["user: My son is called Leo."]
