"""Where the rows of memories a search just returned live: (namespace, id) -> pk.

Why: a recall asks for the cosines of its lexical hits (`VectorTable.cosines`), which
the lexical search had just read by pk. Looking them up again by id descends the
(namespace, id) index for each: at 1M memories, 62 ids took 0.7-2.1 ms by id against
0.5-0.75 ms by pk (first touches of the index's pages dominate).

A pk is only a hint: the row is read by pk and kept only if it still holds that
namespace and id (a deleted row's pk can be reused), so nothing here can go stale in
a way that changes an answer; the ids whose hint fails are read by id as before.

A note made in the file's present state (`current`) is more than a hint: nothing was
written since the row was read at that pk, so the pk still holds that memory, and its
vector can be taken from the namespace's HNSW index without reading the file
(`VectorTable.cosines`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import islice
from typing import Any

# Entries kept, the oldest dropped first. A recall notes ~80-170 rows.
LOCATOR_ROWS = 4096


class RowLocator:
    """A bounded map of (namespace, id) to the pk a search last read the row at."""

    def __init__(self, capacity: int = LOCATOR_ROWS) -> None:
        self._capacity = capacity
        self._pks: dict[tuple[str, str], tuple[int, Any]] = {}

    def __len__(self) -> int:
        return len(self._pks)

    def note(self, namespace: str, rows: Iterable[tuple[str, int]], state: Any) -> None:
        """Remember the pk of each (id, pk) just read in `namespace`, in the file's
        `state` (`file_state`, taken before the read).

        Room is made by dropping the oldest notes, never this one's: the caller asks
        for these rows next (a recall, its lexical hits' cosines). The map was cleared
        when full, in the middle of a note, and then held only the rows noted after
        that: at 1M memories one recall in ~30 read the rest's vectors from the file,
        20-80 ms."""
        pks = self._pks
        batch = {(namespace, id_): (pk, state) for id_, pk in rows}
        if len(batch) > self._capacity:
            batch = dict(list(batch.items())[-self._capacity :])
        for key in batch:
            pks.pop(key, None)  # noted again: it is the newest now
        excess = len(pks) + len(batch) - self._capacity
        if excess > 0:
            for key in list(islice(pks, excess)):  # insertion order: the oldest first
                del pks[key]
        pks.update(batch)

    def pks(self, namespace: str, ids: Sequence[str]) -> dict[str, int]:
        """The remembered pk of each id of `ids` that has one (hints, see module)."""
        pks = self._pks
        return {i: found[0] for i in ids if (found := pks.get((namespace, i))) is not None}

    def current(self, namespace: str, ids: Sequence[str], state: Any) -> dict[str, int]:
        """The pk of each id of `ids` noted in the file's present `state`: certain, not
        a hint (see module)."""
        pks = self._pks
        return {
            i: found[0]
            for i in ids
            if (found := pks.get((namespace, i))) is not None and found[1] == state
        }
