"""Markers that select tests only when asked for by name with -m: the default run
(`tox`, plain `pytest`) stays fast, and still runs every backend at least once.

- `soak`: long fault-injection variants (`-m soak`);
- `matrix`: the server combinations of slow tests (`-m matrix`; see tests/matrix.py).
"""

from __future__ import annotations

import pytest

OPT_IN = ("soak", "matrix")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = config.getoption("markexpr") or ""
    skipped = [name for name in OPT_IN if name not in wanted]
    dropped = [item for item in items if any(item.get_closest_marker(n) for n in skipped)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        gone = set(dropped)
        items[:] = [item for item in items if item not in gone]
