"""llamaindex_tiered_memory: placeholder until its issue lands."""

__all__: list[str] = []
