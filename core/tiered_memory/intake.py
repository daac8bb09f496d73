"""What `add` takes in: one item's fields (`MemoryInput`), checked and embedded for a
whole batch before anything is written (`prepare`), so a bad item or a failing
embedder leaves the store untouched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticError

from . import validation
from .dimensions import EmbeddingDimension
from .errors import ValidationError
from .models import LIVE_TIERS, Memory, MemoryType, Tier, filled, new_id, utc
from .policy import Limits
from .ports import Embedder, ObjectStore, Vector


class MemoryInput(BaseModel):
    """One item for `add_many`; the same fields as `add`'s keyword arguments."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    # strict: pydantic would otherwise turn bytes into text (b"x" -> "x")
    content: str = Field(strict=True)
    memory_type: MemoryType | str = MemoryType.EPISODIC
    importance: float = 0.4
    metadata: dict[str, Any] | None = None
    source: str = Field(default="api", strict=True)
    pinned: bool = Field(default=False, strict=True)
    embedding: Any = None
    id: str | None = Field(default=None, strict=True)
    # Seed 002's store tool assigns the tier; captures start HOT. A near-duplicate
    # merged into an existing memory never moves it.
    tier: Tier | str = Tier.HOT

    @classmethod
    def parse(cls, fields: Mapping[str, Any]) -> MemoryInput:
        """Build one from keyword fields; a bad field is a ValidationError naming it."""
        try:
            return cls(**fields)
        except (TypeError, PydanticError) as e:
            raise ValidationError(f"bad memory: {_fields_message(e)}") from e


def _fields_message(error: Exception) -> str:
    """pydantic's errors as one line: "content: Input should be a valid string"."""
    if not isinstance(error, PydanticError):
        return str(error)
    return "; ".join(
        f"{'.'.join(str(part) for part in e['loc']) or 'item'}: {e['msg']}" for e in error.errors()
    )


def _start_tier(item: MemoryInput) -> Tier:
    """The tier a new memory starts in: a live one, and never COLD when pinned (a pinned
    memory is always a candidate for context)."""
    tier = Tier.parse(item.tier)
    if tier not in LIVE_TIERS:
        raise ValidationError(f"a new memory starts in hot, warm or cold, not {tier.value}")
    if item.pinned and tier is Tier.COLD:
        raise ValidationError("a pinned memory is always put into context: start it hot or warm")
    return tier


def as_input(item: MemoryInput | str | Mapping[str, Any]) -> MemoryInput:
    """One item of `add_many`: its content, a dict of fields or a MemoryInput."""
    if isinstance(item, MemoryInput):
        return item
    if isinstance(item, str):
        return MemoryInput(content=item)
    if isinstance(item, Mapping):
        if not all(isinstance(key, str) for key in item):
            raise ValidationError("the keys of a memory item must be field names")
        return MemoryInput.parse(item)
    raise ValidationError(
        f"cannot add a {type(item).__name__}: each item is its content (a str), a dict of "
        "fields or a MemoryInput"
    )


def _new_memory(
    memory_id: str,
    namespace: str,
    content: str,
    memory_type: MemoryType,
    tier: Tier,
    importance: float,
    pinned: bool,
    source: str,
    metadata: dict[str, Any],
    at: datetime,
) -> Memory:
    """A new memory from fields `prepare` has checked, without pydantic validating
    them again (`filled`): that cost ~25 us of each added memory's ~400 at 100k, most
    of it converting its three timestamps to UTC through pydantic's own time zone."""
    values: dict[str, Any] = {
        "id": memory_id,
        "namespace": namespace,
        "content": content,
        "memory_type": memory_type,
        "tier": tier,
        "importance": importance,
        "pinned": pinned,
        "core": False,
        "do_not_inject": False,
        "superseded_by": None,
        "consolidated_from": [],
        "source": source,
        "metadata": metadata,
        "embedding": None,
        "created_at": at,
        "updated_at": at,
        "last_accessed_at": None,
        "use_count": 0,
        "use_days": [],
        "uses_since_cold": 0,
        "cold_since": None,
        "tier_changed_at": at,
    }
    return filled(Memory, values)


@dataclass
class Prepared:
    """A checked new memory and its embedding (kept apart: memories travel without)."""

    memory: Memory
    vector: Vector
    named: bool  # the caller gave its id


async def prepare(
    namespace: str,
    items: Sequence[MemoryInput],
    *,
    limits: Limits,
    now: datetime,
    embedder: Embedder,
    dimensions: EmbeddingDimension,
    objects: ObjectStore,
) -> list[Prepared]:
    """Validate everything and embed in one batch, before anything is written."""
    memories: list[Memory] = []
    given: dict[int, Vector] = {}
    seen_ids: set[str] = set()
    first_generated = next((i for i, item in enumerate(items) if item.id is None), -1)
    at = utc(now)
    for i, item in enumerate(items):
        content = validation.check_content(item.content, limits)
        memory_id = validation.check_id(item.id, limits) if item.id is not None else None
        if memory_id is not None:
            if memory_id in seen_ids:
                raise ValidationError(f"id {memory_id!r} appears twice in one call")
            seen_ids.add(memory_id)
        # checked in the order the fields are listed: the first bad one is the error
        memory_type = MemoryType.parse(item.memory_type)
        importance = validation.check_importance(item.importance)
        metadata = validation.check_metadata(item.metadata, limits)
        source = validation.check_label(
            item.source, "source", limits.max_source_chars, "max_source_chars"
        )
        tier = _start_tier(item)
        memories.append(
            _new_memory(
                memory_id or new_id(),
                namespace,
                content,
                memory_type,
                tier,
                importance,
                bool(item.pinned),
                source,
                metadata,
                at,
            )
        )
        if memory_id is not None or i == first_generated:
            # e.g. S3: is the key too long? Generated ids all have one shape (`new_id`),
            # so the first stands for the rest.
            objects.ref(namespace, memories[-1].id)
        if item.embedding is not None:  # finite and flat; its size once known, below
            given[i] = validation.check_vector(item.embedding, None)
    to_embed = [i for i in range(len(items)) if i not in given]
    measured: int | None = None
    if to_embed:
        # the embedder's guard checked one finite row per text
        matrix = await embedder.aembed_documents([memories[i].content for i in to_embed])
        for row, i in enumerate(to_embed):
            given[i] = matrix[row]
        measured = int(matrix.shape[1])
    dimension = await dimensions.for_write(embedder, measured)
    vectors = [validation.check_size(given[i], dimension) for i in range(len(items))]
    return [
        Prepared(memory=m, vector=v, named=item.id is not None)
        for m, v, item in zip(memories, vectors, items, strict=True)
    ]
