"""The row locator keeps the pks a search just read; the newest notes must survive
the map filling up (a recall asks for its lexical hits' cosines right after noting
them, and a cleared map sent them to the file: 20-80 ms at 1M memories)."""

from __future__ import annotations

from tiered_memory.backends.sqlite.locator import RowLocator

NS = "ns"
STATE = (1, 2, 3)


def _rows(start: int, count: int) -> list[tuple[str, int]]:
    return [(f"m{i}", 1000 + i) for i in range(start, start + count)]


def test_a_note_that_fills_the_map_keeps_every_row_it_notes() -> None:
    locator = RowLocator(capacity=8)
    locator.note(NS, _rows(0, 5), STATE)
    locator.note(NS, _rows(5, 5), STATE)  # crosses the capacity mid-note
    ids = [i for i, _ in _rows(5, 5)]
    assert locator.current(NS, ids, STATE) == dict(_rows(5, 5))


def test_the_oldest_notes_go_first_and_the_map_stays_bounded() -> None:
    locator = RowLocator(capacity=8)
    for start in range(0, 40, 4):
        locator.note(NS, _rows(start, 4), STATE)
    assert len(locator) <= 8
    newest = _rows(32, 8)
    assert locator.pks(NS, [i for i, _ in newest]) == dict(newest)
    assert locator.pks(NS, ["m0", "m31"]) == {}


def test_a_row_noted_again_is_kept_as_new() -> None:
    locator = RowLocator(capacity=4)
    locator.note(NS, _rows(0, 4), STATE)
    locator.note(NS, _rows(0, 1), STATE)  # m0 read again: now the newest
    locator.note(NS, _rows(4, 3), STATE)
    assert locator.pks(NS, ["m0", "m4", "m5", "m6"]) == {
        "m0": 1000,
        "m4": 1004,
        "m5": 1005,
        "m6": 1006,
    }


def test_a_note_larger_than_the_map_keeps_its_newest_rows() -> None:
    locator = RowLocator(capacity=4)
    locator.note(NS, _rows(0, 6), STATE)
    assert len(locator) == 4
    assert locator.pks(NS, [i for i, _ in _rows(0, 6)]) == dict(_rows(2, 4))
