"""The columns of a memory row, in the order `memories.memory_of` reads them.

Its own module because two layers select them: the memory table, and the vector
table's graph candidates (`graph_candidates`), which read a search's candidate rows
whole so that the hits need no second read; the vector table sits below the memory
table, so it cannot import it.

Two columns live beside `memories`, keyed by its `pk`: the embedding in
`memory_vectors` (`v`) and the text in `memory_texts` (`t`, schema 8). A query that
selects `columns` joins them (`TEXT_JOIN`; `VECTOR_JOIN` with the embedding).
"""

from __future__ import annotations

FIELDS = (
    "namespace, id, content, memory_type, tier, importance, pinned, core, do_not_inject, "
    "superseded_by, consolidated_from, source, metadata, embedding, created_at, updated_at, "
    "last_accessed_at, last_used_at, use_count, use_days, uses_since_cold, cold_since, "
    "tier_changed_at"
)
NAMES = [n.strip() for n in FIELDS.split(",")]
EMBEDDING = NAMES.index("embedding")
ID = NAMES.index("id")
TIER = NAMES.index("tier")
CONTENT = NAMES.index("content")
# the text of the memory `m` (every memory has one: written in its transaction)
TEXT_JOIN = " JOIN memory_texts AS t ON t.pk = m.pk"
_BESIDE = {"embedding": "v.embedding", "content": "t.content"}


def columns(alias: str, with_embeddings: bool) -> str:
    """The `FIELDS` of `alias`; the text is `t.content` (join `TEXT_JOIN`), the
    embedding `v.embedding` (join `VECTOR_JOIN`)."""
    names = [n for n in NAMES if with_embeddings or n != "embedding"]
    return ", ".join(_BESIDE.get(n, f"{alias}.{n}") for n in names)
