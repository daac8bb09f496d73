"""Where the rows of memories a search just returned live: (namespace, id) -> pk.

Why: a recall asks for the cosines of its lexical hits (`VectorTable.cosines`), which
the lexical search had just read by pk. Looking them up again by id descends the
(namespace, id) index for each: at 1M memories, 62 ids took 0.7-2.1 ms by id against
0.5-0.75 ms by pk (first touches of the index's pages dominate).

A pk is only a hint: the row is read by pk and kept only if it still holds that
namespace and id (a deleted row's pk can be reused), so nothing here can go stale in
a way that changes an answer; the ids whose hint fails are read by id as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

# Entries kept; started afresh when full. A recall notes ~80-170 rows.
LOCATOR_ROWS = 4096


class RowLocator:
    """A bounded map of (namespace, id) to the pk a search last read the row at."""

    def __init__(self, capacity: int = LOCATOR_ROWS) -> None:
        self._capacity = capacity
        self._pks: dict[tuple[str, str], int] = {}

    def note(self, namespace: str, rows: Iterable[tuple[str, int]]) -> None:
        """Remember the pk of each (id, pk) just read in `namespace`."""
        pks = self._pks
        for id_, pk in rows:
            if len(pks) >= self._capacity:
                pks.clear()
            pks[(namespace, id_)] = pk

    def pks(self, namespace: str, ids: Sequence[str]) -> dict[str, int]:
        """The remembered pk of each id of `ids` that has one (hints, see module)."""
        pks = self._pks
        return {i: pk for i in ids if (pk := pks.get((namespace, i))) is not None}
