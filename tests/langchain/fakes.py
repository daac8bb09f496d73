"""Fakes for the face tests: a chat model that answers from a script and keeps what it
was sent, and embeddings whose service fails on demand."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import Field

Reply = Callable[[list[BaseMessage]], AIMessage]


def echo_reply(messages: list[BaseMessage]) -> AIMessage:
    return AIMessage(content="Noted.")


class RecordingChatModel(BaseChatModel):
    """Answers with `reply(messages)`; every call's messages are kept in `calls`."""

    reply: Reply = echo_reply
    calls: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "recording-fake"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.reply(list(messages)))])

    def bind_tools(
        self, tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool], **kwargs: Any
    ) -> Runnable[Any, AIMessage]:
        return self  # the script decides on tool calls itself

    def system_prompts(self) -> list[str]:
        """The system prompt of each call ('' when a call had none)."""
        out: list[str] = []
        for call in self.calls:
            system = [m for m in call if m.type == "system"]
            out.append(system[0].text if system else "")
        return out


class FailingEmbeddings(DeterministicFakeEmbedding):
    """Deterministic fake embeddings whose service fails for any text holding "boom"."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if any("boom" in t for t in texts):
            raise ConnectionError("the embedding service is down")
        return super().embed_documents(texts)
