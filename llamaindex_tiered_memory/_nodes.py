"""LlamaIndex nodes <-> core memories.

A node is stored as one memory with the same id: its text is the content, its
embedding is kept as given (the index's model, not the engine's), and its metadata
is LlamaIndex's usual `node_to_metadata_dict` (the user's keys at top level, so they
can be filtered, plus the serialised node so it comes back with its relationships).
"""

from __future__ import annotations

from llama_index.core.schema import BaseNode, MetadataMode, TextNode
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict

from tiered_memory import Memory, MemoryInput, MemoryType, Tier, ValidationError

NODE_CONTENT_KEY = "_node_content"
_TIER_VALUES = frozenset(t.value for t in Tier)


def node_to_input(
    node: BaseNode,
    *,
    tier_key: str,
    memory_type: MemoryType,
    importance: float,
    source: str,
) -> MemoryInput:
    if not isinstance(node, BaseNode):
        raise ValidationError(
            f"add takes LlamaIndex nodes (e.g. TextNode), got {type(node).__name__}"
        )
    if node.embedding is None:
        raise ValidationError(
            f"node {node.node_id!r} has no embedding: insert it through a VectorStoreIndex "
            "(which embeds with its embed_model) or set node.embedding first"
        )
    if tier_key in node.metadata:
        node = _without_tier(node, tier_key)
    return MemoryInput(
        id=node.node_id,
        content=node.get_content(metadata_mode=MetadataMode.NONE),
        embedding=node.embedding,
        metadata=node_to_metadata_dict(node, remove_text=True, flat_metadata=False),
        memory_type=memory_type,
        importance=importance,
        source=source,
    )


def _without_tier(node: BaseNode, tier_key: str) -> BaseNode:
    """Drop our own tier annotation from a node that came out of a query; refuse a
    user key of the same name, which tier filters would otherwise shadow."""
    ours = node.metadata[tier_key] in _TIER_VALUES and tier_key in node.excluded_llm_metadata_keys
    if not ours:
        raise ValidationError(
            f"node {node.node_id!r} has metadata key {tier_key!r}, which this store reserves "
            "for the memory tier; construct the store with another tier_key "
            "(e.g. tier_key='memory_tier')"
        )
    copy = node.model_copy(deep=True)
    del copy.metadata[tier_key]
    copy.excluded_llm_metadata_keys = [k for k in copy.excluded_llm_metadata_keys if k != tier_key]
    copy.excluded_embed_metadata_keys = [
        k for k in copy.excluded_embed_metadata_keys if k != tier_key
    ]
    return copy


def memory_to_node(memory: Memory, *, tier_key: str) -> BaseNode:
    """The stored node (or a TextNode for memories captured another way), its text
    the memory's content (an archived memory's summary), annotated with its tier.
    The tier is kept out of the LLM and embedding text: it is for code, not prompts."""
    node: BaseNode
    if NODE_CONTENT_KEY in memory.metadata:
        node = metadata_dict_to_node(memory.metadata, text=memory.content)
    else:
        node = TextNode(id_=memory.id, text=memory.content, metadata=dict(memory.metadata))
    node.metadata[tier_key] = memory.tier.value
    for keys in (node.excluded_llm_metadata_keys, node.excluded_embed_metadata_keys):
        if tier_key not in keys:
            keys.append(tier_key)
    return node


__all__ = ["NODE_CONTENT_KEY", "memory_to_node", "node_to_input"]
